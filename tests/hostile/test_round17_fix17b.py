"""Hostile input, round 17 (fix17b): a small foreign dump that cost a lot before a check
refused it. A ``.safetensors`` header of 1.37 million ``__metadata__`` keys is counted before
it is parsed (T93a); a ``.pt`` pickle's record dict of 900,000 keys is counted from its opcodes
before torch is imported or loads it (T93b); an ``.npz``'s ``__metadata__`` object is read key
by key, refused at the first key past the cap (T93c)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_round4_importers import refused

from forensics.errors import CaptureFormatError
from forensics.importers import read_source
from forensics.validate import max_fields
from tests.instructions import assert_linear, scaling

# ------------------------------------------------------------------ T93a: a header's items


def _header_file(path: Path, header: dict[str, object]) -> Path:
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text)
    return path


def test_a_safetensors_header_of_many_keys_is_refused_before_it_is_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A header of 1.37 million ``__metadata__`` keys (16 MB, within the header's cap) was
    parsed whole (400 MB, 1.4 s) before the field count refused it; its strings and commas are
    now counted first, no further than one record's needs, and the file is refused unparsed
    in one line naming it, the header and the fix."""
    from forensics.importers import safetensors_

    parsed: list[str] = []
    monkeypatch.setattr(safetensors_, "strict_json", lambda text: parsed.append(text[:40]))
    meta = {"site": "embedding", "step": "1", **{f"k{i}": "" for i in range(20_000)}}
    source = _header_file(tmp_path / "many.safetensors", {"__metadata__": meta})
    cap = safetensors_.HEADER_ITEMS * (max_fields() + 1)
    refused(source, tmp_path, capsys, f"header holds more than {cap} JSON strings",
            "one record per file")
    assert parsed == []


def test_a_safetensors_header_of_many_list_items_is_refused_before_it_is_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A shape of a million dims (a list JSON builds a million items of) is refused by the
    same count, from its commas outside strings."""
    from forensics.importers import safetensors_

    monkeypatch.setattr(safetensors_, "strict_json", lambda text: pytest.fail("parsed"))
    source = _header_file(tmp_path / "dims.safetensors", {
        "__metadata__": {"site": "embedding", "step": "1"},
        "input_ids": {"dtype": "I64", "shape": [0] * 1_000_000, "data_offsets": [0, 0]}})
    refused(source, tmp_path, capsys, "JSON commas outside strings", "long lists as tensors")


def test_keys_and_commas_inside_metadata_strings_are_not_counted(tmp_path: Path) -> None:
    """A ``batch_change`` record of 3,000 requests written by the ``safetensors`` package:
    its ``prev_req_id_to_index`` and ``req_ids`` are JSON texts in ``__metadata__`` strings,
    thousands of escaped quotes, commas and colons (ids holding a quote and a backslash too),
    none of them counted: it imports whole."""
    from safetensors.numpy import save_file

    n = 3_000
    ids = [f'r"{i}\\' if i % 2 else f"req-{i}" for i in range(n)]
    tensors = {name: np.zeros(n, np.int32) for name in (
        "prev_positions", "valid_sampled_token_count", "num_computed_tokens",
        "num_accepted_tokens", "prev_num_draft_tokens", "cpu_num_computed_tokens")}
    meta = {"site": "batch_change", "step": "3", "req_ids": json.dumps(ids),
            "prev_req_id_to_index": json.dumps({r: i for i, r in enumerate(ids)})}
    source = tmp_path / "wide.safetensors"
    save_file(tensors, str(source), metadata=meta)
    (record,) = read_source(source).records
    assert record.fields["req_ids"] == ids and len(record.fields["prev_req_id_to_index"]) == n


@pytest.mark.parametrize("tensors", [0, 1, max_fields()])
def test_the_header_count_passes_every_header_of_a_records_fields(tensors: int,
                                                                 tmp_path: Path) -> None:
    """The most one record's header holds, as the ``safetensors`` package writes it: as many
    fields as any site declares, tensors of 8 long dims or ``__metadata__`` keys, passes the
    count (the fields are judged after it, by their names)."""
    from safetensors.numpy import save_file

    from forensics.importers import safetensors_

    meta = {f"field_{i}": json.dumps(list(range(100))) for i in range(max_fields() - tensors)}
    save_file({f"tensor_{i}": np.zeros((1,) * 8, np.int64) for i in range(tensors)},
              str(tmp_path / "most.safetensors"), metadata=meta or None)
    raw = (tmp_path / "most.safetensors").read_bytes()
    size = int.from_bytes(raw[:8], "little")
    safetensors_._check_items(raw[8:8 + size], tmp_path / "most.safetensors")


# ------------------------------------------------------------------ T93b: a pickle's record keys

#: a child that imports ARGV[1] and says whether torch was imported; its parent (the second
#: program) prints that and the child's peak memory in KiB, which no other child shares
_CHILD = ("import sys; from forensics.cli import main; code = main(['import', sys.argv[1], "
          "'-o', sys.argv[2]]); print(code, 'torch' in sys.modules)")
_PARENT = ("import resource, subprocess, sys; out = subprocess.run([sys.executable, '-c', "
           "sys.argv[1], *sys.argv[2:]], capture_output=True, text=True).stdout.split(); "
           "print(*out, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def test_a_pt_record_of_many_keys_is_refused_before_torch_is_imported(tmp_path: Path) -> None:
    """A ``.pt`` dict of 900,000 keys (15 MB) took 6.4 s of CPU and 800 MB before the field
    count refused it: torch's import (1.6 s, 680 MB) and its unpickler. The pickle's opcodes are
    read first and its record dict refused at its first 1,000 keys: here in a child that never
    imports torch, whose peak memory stays far under what importing torch alone takes."""
    import subprocess
    import sys

    import torch

    source = tmp_path / "many.pt"
    torch.save({"site": "embedding", "step": 1, **{f"{i:x}": 0 for i in range(100_000)}},
               source)
    run = subprocess.run([sys.executable, "-c", _PARENT, _CHILD, str(source),
                          str(tmp_path / "out.capture")], capture_output=True, text=True,
                         cwd=Path(__file__).parents[2], check=True)
    code, imported, peak_kib = run.stdout.split()
    assert (code, imported) == ("2", "False"), run.stdout
    assert int(peak_kib) < 300 * 1024, peak_kib  # torch's import alone: 680 MB


def _record(n: int) -> dict[str, object]:
    """A ``batch_change`` record of ``n`` requests as torch.save takes it (a dict of ``n``
    keys in ``prev_req_id_to_index``)."""
    import torch

    ids = [f"req-{i}" for i in range(n)]
    return {"site": "batch_change", "step": 3, "rank": 0, "req_ids": ids,
            "prev_req_id_to_index": {r: i for i, r in enumerate(ids)},
            **{name: torch.zeros(n, dtype=torch.int32) for name in (
                "prev_positions", "valid_sampled_token_count", "num_computed_tokens",
                "num_accepted_tokens", "prev_num_draft_tokens", "cpu_num_computed_tokens")}}


@pytest.mark.parametrize("shape", ["dict", "list of one", "list", "tuple of two", "tuple"])
def test_torch_save_of_records_with_large_field_dicts_is_imported(shape: str,
                                                                  tmp_path: Path) -> None:
    """Records as torch.save writes them, alone, in a list (of one: ``APPEND``) or a tuple
    (of two: ``TUPLE2``; more: ``MARK`` ... ``TUPLE``), each with a field dict of 3,000 keys
    (past the field cap, and past a pickle's batch of 1,000): none is refused by the scan."""
    import torch

    records = {"dict": _record(3_000), "list of one": [_record(3_000)],
               "list": [_record(3_000), _record(2), _record(3_000)],
               "tuple of two": (_record(3_000), _record(3_000)),
               "tuple": tuple(_record(3_000) for _ in range(5))}[shape]
    torch.save(records, tmp_path / "ok.pt")
    imported = read_source(tmp_path / "ok.pt").records
    assert [len(r.fields["prev_req_id_to_index"]) for r in imported] == [
        len(r["prev_req_id_to_index"]) for r in (  # type: ignore[arg-type]
            records if isinstance(records, (list, tuple)) else [records])]


@pytest.mark.parametrize(("shape", "where"), [
    ("list", "at place 4 of its stack, where torch.save puts record 2 (item 2 of the list"),
    ("list of one", "at place 1 of its stack, where torch.save puts record 0 (item 0 of the "
                    "list saved)"),
    ("tuple of two", "at place 1 of its stack, where torch.save puts record 1 (item 1 of the "
                     "tuple saved)"),
    ("tuple", "at place 4 of its stack, where torch.save puts record 3 (item 3 of the tuple")])
def test_a_pt_record_of_many_keys_in_a_list_or_tuple_is_named(
        shape: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A record of 2,000 keys among others is refused from the pickle, naming which, before
    torch loads the file."""
    import torch

    loaded: list[int] = []
    real = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: loaded.append(1) or real(*a, **k))
    many = {**_record(2), **{f"k{i}": 0 for i in range(2_000)}}
    records = {"list": [_record(2), _record(3_000), many],
               "list of one": [many],
               "tuple of two": (_record(3_000), many),
               "tuple": (_record(2), _record(2), _record(2), many)}[shape]
    torch.save(records, tmp_path / "many.pt")
    refused(tmp_path / "many.pt", tmp_path, capsys, "its pickle sets keys 1000 times", where)
    assert loaded == []


def _pairs(count: int) -> bytes:
    """``count`` keys (``BINUNICODE``) of 0 (``BININT1``), as a pickle's stack items."""
    return b"".join(b"X" + len(key).to_bytes(4, "little") + key + b"K\x00"
                    for key in (f"k{i}".encode() for i in range(count)))


#: pickles whose record dict is not where torch.save puts records (``\x80\x02``: protocol
#: 2), and the record the line names
HIDDEN = {
    # a None below the dict: the dict (on top at STOP) is what the loader returns
    "below junk": (b"\x80\x02N}(" + _pairs(2_000) + b"u.", 0),
    # the dict fetched again from the memo and given its keys there
    "memo alias": (b"\x80\x02}q\x00h\x00(" + _pairs(2_000) + b"u.", 0),
    # a list (above a dict) of that dict twice, given its keys after the first append
    "alias in a list": (b"\x80\x02}q\x00]q\x01h\x00ah\x00(" + _pairs(2_000) + b"ua.", 0),
    # a tuple of a small dict and the big one's alias
    "alias in a tuple": (b"\x80\x02}q\x00N}h\x00(" + _pairs(2_000) + b"u\x86.", 1),
}


@pytest.mark.parametrize("case", HIDDEN)
def test_a_pt_record_of_many_keys_elsewhere_is_refused_once_its_pickle_is_read(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A record dict given its keys where torch.save puts none (above a value left below it,
    through the memo) is judged when the pickle's ``STOP`` says what the loader returns: the
    line names that record, before torch loads the file (which took these as they are)."""
    import torch
    from test_round6_caps import _pt_with_pickle

    loaded: list[int] = []
    real = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: loaded.append(1) or real(*a, **k))
    body, index = HIDDEN[case]
    source = _pt_with_pickle(tmp_path / "hidden.pt", body)
    refused(source, tmp_path, capsys, f"record {index} in '", "hidden.pt': its pickle sets "
            "keys 2000 times in that record's dict, before anything is loaded: past the 23")
    assert loaded == []


def test_an_ordered_dict_record_of_many_keys_is_refused_from_its_pickle(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``OrderedDict`` record (made by ``REDUCE``, then given its keys) is counted as a
    dict is."""
    from collections import OrderedDict

    import torch

    loaded: list[int] = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: loaded.append(1))
    torch.save(OrderedDict({**_record(2), **{f"k{i}": 0 for i in range(3_000)}}),
               tmp_path / "ordered.pt")
    refused(tmp_path / "ordered.pt", tmp_path, capsys, "its pickle sets keys 1000 times in the "
            "dict at place 0 of its stack, where torch.save puts record 0 (the object saved)")
    assert loaded == []


def test_a_pickle_past_the_allocation_budget_is_refused_before_torch_loads_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The values a pickle makes and their texts are held to the allocation budget
    (``FORENSICS_MAX_ALLOC``, here 1 MiB) before torch loads it: 100,000 request ids of 20
    characters take at least 3.6 MB."""
    import torch

    loaded: list[int] = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: loaded.append(1))
    monkeypatch.setenv("FORENSICS_MAX_ALLOC", "1M")
    record = {**_record(2), "req_ids": [f"request-{i:012d}" for i in range(100_000)]}
    torch.save(record, tmp_path / "ids.pt")
    refused(tmp_path / "ids.pt", tmp_path, capsys, "'pickle' is ", "past the allocation budget "
            "of 1048576 bytes", "save tensors, not long Python lists, or raise "
            "FORENSICS_MAX_ALLOC")
    assert loaded == []


# ------------------------------------------------------------------ T93c: an npz's __metadata__


def test_an_npz_metadata_of_many_keys_is_refused_before_their_values_are_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``.npz`` whose ``__metadata__`` object holds 1.37 million keys (3.6 MB compressed)
    took 1.5 s and 420 MB: json built every value before the field count saw the keys. The
    object is read key by key, and refused at the first key past what a record holds beside
    the file's other members: none of the values past it is parsed."""
    from forensics.store import json_in

    objects: list[int] = []
    real = json_in._unique
    monkeypatch.setattr(json_in, "_unique", lambda pairs: objects.append(1) or real(pairs))
    meta = {"site": "embedding", "step": 1, **{f"k{i}": {"x": i} for i in range(20_000)}}
    source = tmp_path / "many.npz"
    np.savez(source, __metadata__=np.array(json.dumps(meta)), input_ids=np.zeros(1, np.int64))
    refused(source, tmp_path, capsys, "member '__metadata__.npy' holds more than 22 keys "
            "(counted before the values past them are parsed)", "one record per file")
    assert len(objects) < 25, len(objects)  # the keys' values before the refusal: 20,000 before


def test_an_npz_metadata_with_large_field_values_is_imported(tmp_path: Path) -> None:
    """A ``batch_change`` record of 3,000 requests whose ``req_ids`` and
    ``prev_req_id_to_index`` are ``__metadata__``'s values (thousands of strings and keys one
    level down) imports whole."""
    n = 3_000
    ids = [f"req-{i}" for i in range(n)]
    meta = {"site": "batch_change", "step": 3, "req_ids": ids,
            "prev_req_id_to_index": {r: i for i, r in enumerate(ids)}}
    source = tmp_path / "wide.npz"
    np.savez(source, __metadata__=np.array(json.dumps(meta)), **{name: np.zeros(n, np.int32) for
             name in ("prev_positions", "valid_sampled_token_count", "num_computed_tokens",
                      "num_accepted_tokens", "prev_num_draft_tokens",
                      "cpu_num_computed_tokens")})
    (record,) = read_source(source).records
    assert record.fields["req_ids"] == ids and len(record.fields["prev_req_id_to_index"]) == n


JSON_TEXTS = ["{}", " { } ", '{"a": 1}', '{"a": {"b": [1, 2, {"c": "d"}]}, "e": "f\\"g"}',
              "[1, 2]", '"x"', "3", '{"a": 1,}', '{"a" 1}', '{"a": 1} x', '{"a": }', "{,}",
              '{"a": 1', '{"a": 1, "a": 2}', '{"a": {"b": 1, "b": 2}}', "", '{"a": NaN}\n',
              '{ "a" : 1 , "b" : [ ] }', '{"\\u00e9": "\\ud800"}', '{"a": "\x01"}',
              '{"a": ' + "[" * 150 + "]" * 150 + "}"]


@pytest.mark.parametrize("text", JSON_TEXTS)
def test_an_object_read_key_by_key_is_what_json_reads(text: str) -> None:
    """``strict_object`` reads what ``strict_json`` reads, and refuses what it refuses (a
    key twice, nested too deep, no JSON), when within its keys."""
    from forensics.store.json_in import strict_json, strict_object

    def outcome(read: Callable[[str], Any]) -> Any:
        try:
            return read(text)
        except ValueError as exc:
            return type(exc)

    assert outcome(lambda t: strict_object(t, 3)) == outcome(strict_json)


# ------------------------------------------------------------------ T93a, T93b: linear counts

#: inputs engineered against the counts (``size`` grows): headers of one string, a pickle's
#: field dict given its keys one at a time (each past the cap)
SCANNED: dict[str, Callable[[int], bytes]] = {
    "escaped quotes": lambda n: b'{"a":"' + b'\\"' * n + b'"}',
    "a string never closed": lambda n: b'{"a":"' + b'\\"' * n,
    "quotes after backslashes": lambda n: b'{"a":"' + b'\\\\"\\' * n,
    "commas in a string": lambda n: b'{"a":"' + b"," * n + b'"}',
    "keys one at a time": lambda n: b"\x80\x02}(X\x01\x00\x00\x00a}" + b"".join(
        b"X" + len(k).to_bytes(4, "little") + k + b"K\x00s" for k in (
            f"{i:x}".encode() for i in range(n // 8))) + b"u.",
}


@pytest.mark.parametrize("case", list(SCANNED))
def test_the_counts_before_parsing_take_linear_time(tmp_path: Path, case: str) -> None:
    """A header or pickle 4x longer costs under 6x the instructions of the counts (escapes,
    a string never closed, and a field dict past the cap are each read once)."""
    make_work(case, 1_000, tmp_path)()
    assert_linear(scaling(__file__, dict.fromkeys(SCANNED, 16_000), tmp_path)[case])


def make_work(case: str, size: int, scratch: Path) -> Callable[[], Any]:
    """The count of ``case`` over an input of ``size`` (:mod:`tests.instructions`)."""
    from forensics.importers import pickle_scan, safetensors_

    data, path = SCANNED[case](size), scratch / f"{case}.bin"
    if data.startswith(b"\x80"):
        return lambda: pickle_scan.count_made(data, 0, path)

    def header() -> None:
        try:
            safetensors_._check_items(data, path)
        except CaptureFormatError:
            pass

    return header
