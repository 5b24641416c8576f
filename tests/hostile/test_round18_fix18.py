"""Hostile input, round 18 (fix18; issue 38, "Hostile input, round 3"): a ``.pt`` storage or an
``.npz`` array past the allocation budget is refused from its size before torch or numpy
allocates it (T100a)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_round4_importers import refused

from forensics.cli import main

# ------------------------------------- T100a: a member's size, held to the budget before a read

#: a tensor of 2 MiB, past a budget of 1 MiB
BIG = 262_144


def _spy(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[str]:
    """The calls of ``owner.name`` made from now on (it still runs)."""
    calls: list[str] = []
    real = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return calls


def test_a_torch_storage_past_the_budget_is_refused_before_torch_reads_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``FORENSICS_MAX_ALLOC=1M``, a 2 MiB tensor was loaded by torch (allocated whole)
    before the budget refused it; its storage's size is now read from the zip directory and
    the file refused before ``torch.load``, in one line naming the file, the member, the key
    the pickle puts its tensor under, the budget and how to raise it."""
    import torch

    source = tmp_path / "big.pt"
    torch.save({"site": "embedding", "step": 1, "input_ids": torch.zeros(BIG, dtype=torch.int64),
                "num_embeddings": 10}, source)
    monkeypatch.setenv("FORENSICS_MAX_ALLOC", "1M")
    loads = _spy(monkeypatch, torch, "load")
    refused(source, tmp_path, capsys, "member 'big/data/0'", "under key 'input_ids'",
            "2097152 bytes", "budget of 1048576 bytes", "raise FORENSICS_MAX_ALLOC")
    assert loads == []


def test_a_storage_two_keys_share_names_both_and_one_no_key_names_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A storage two tensors view names both keys; a member past the budget no tensor of the
    pickle names is refused too (torch's reader matches names ignoring case), saying which
    tensor's it is, if any, is not known."""
    import zipfile

    import torch

    ids = torch.zeros(BIG, dtype=torch.int64)
    source = tmp_path / "shared.pt"
    torch.save([{"site": "embedding", "step": 1, "input_ids": ids, "other": ids[1:]}], source)
    monkeypatch.setenv("FORENSICS_MAX_ALLOC", "1M")
    refused(source, tmp_path, capsys, "under key 'input_ids' and 'other'")
    small = tmp_path / "extra.pt"
    torch.save({"site": "embedding", "step": 1, "input_ids": torch.arange(4),
                "num_embeddings": 10}, small)
    with zipfile.ZipFile(small, "a") as archive:
        archive.writestr("extra/DATA/9", bytes(BIG * 8))
    refused(small, tmp_path, capsys, "member 'extra/DATA/9'", "if any, not known")


def test_a_torch_storage_within_the_budget_is_imported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same record of 1 MiB of ids imports under a budget of 1 MiB."""
    import torch

    source = tmp_path / "fits.pt"
    torch.save({"site": "embedding", "step": 1,
                "input_ids": torch.zeros(BIG // 2, dtype=torch.int64), "num_embeddings": 10},
               source)
    monkeypatch.setenv("FORENSICS_MAX_ALLOC", "1M")
    assert main(["import", str(source), "-o", str(tmp_path / "fits.capture")]) == 0


def test_an_npz_array_past_the_budget_is_refused_before_numpy_reads_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``FORENSICS_MAX_ALLOC=1M``, numpy read (allocated) a 2 MiB array before the budget
    saw it; its ``.npy`` header's shape and item size are now held to the budget before any
    array is read, in one line naming the file, the member, the field, the budget and how to
    raise it."""
    source = tmp_path / "big.npz"
    np.savez(source, site=np.array("embedding"), step=np.array(1), num_embeddings=np.array(10),
             input_ids=np.zeros(BIG, dtype=np.int64))
    monkeypatch.setenv("FORENSICS_MAX_ALLOC", "1M")
    reads = _spy(monkeypatch, np.lib.format, "read_array")
    refused(source, tmp_path, capsys, "member 'input_ids.npy'", "'input_ids' is an array of "
            "shape [262144] of int64", "allocate 2097152 bytes", "budget of 1048576 bytes",
            "raise FORENSICS_MAX_ALLOC")
    assert reads == []


# ------------------------------------------- T100b: an OrderedDict record's BUILD state, named


def _text(text: str) -> bytes:
    """``BINUNICODE`` of ``text``."""
    return b"X" + len(text.encode()).to_bytes(4, "little") + text.encode()


def _ordered(state_keys: int = 0) -> bytes:
    """An ``OrderedDict`` record (``REDUCE``, then ``SETITEMS``), and, with ``state_keys``, a
    ``BUILD`` state of that many keys (attributes torch's loader sets on it)."""
    body = b"ccollections\nOrderedDict\n)R(" + _text("site") + _text("embedding") + \
        _text("step") + b"K\x01u"
    if state_keys:
        body += b"}(" + b"".join(_text(f"k{i}") + b"K\x00" for i in range(state_keys)) + b"ub"
    return body


def _plain_dict(keys: int) -> bytes:
    """A dict record of ``keys`` keys (``EMPTY_DICT``, ``SETITEMS``)."""
    return b"}(" + b"".join(_text(f"k{i}") + b"K\x00" for i in range(keys)) + b"u"


#: pickles (protocol 2) of a many-keyed dict above an OrderedDict record, and what the line says
STATES = {
    "state in a list": (b"\x80\x02](" + _ordered() + _ordered(2_000) + b"e.",
                        "in the BUILD state of the object at place 3 of its stack, where "
                        "torch.save puts record 1 (item 1 of the list saved): attributes"),
    "state of the object saved": (b"\x80\x02" + _ordered(2_000) + b".",
                                  "in the BUILD state of the object at place 0 of its stack, "
                                  "where torch.save puts record 0 (the object saved)"),
    "next record in a list": (b"\x80\x02](" + _ordered() + _plain_dict(2_000) + b"e.",
                              "record 1 in 'state.pt': its pickle sets keys 2000 times in that "
                              "record's dict"),
}


@pytest.mark.parametrize("case", STATES)
def test_a_many_keyed_build_state_names_the_record_it_is_built_into(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2,000-key dict given as an ``OrderedDict`` record's ``BUILD`` state was refused as
    the record after it ("record 2" of a list of two; "record 1 (item 1 of the tuple saved)"
    of a lone record): it is now named as the BUILD state of the record it is built into, and
    a many-keyed record that follows an OrderedDict one is still named as itself (judged once
    the pickle says which it is), before torch loads the file."""
    import torch
    from test_round6_caps import _pt_with_pickle

    loads = _spy(monkeypatch, torch, "load")
    body, words = STATES[case]
    source = _pt_with_pickle(tmp_path / "state.pt", body)
    refused(source, tmp_path, capsys, words, "past the 23 names")
    assert loads == []


# ------------------------------------------ T100d: no /proc, no write through the folder's name


def _no_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulate a system without ``/proc`` (or with ``/proc/self/fd`` unreadable): a path
    under it does not exist."""
    import os

    real = os.stat

    def stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).startswith("/proc/self/fd"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)


def test_without_proc_the_capture_folder_is_not_written_through_its_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``/proc``, ``OwnedFolder.path`` gave the folder's name (which another user may
    replace) and the writer process's capture path, ``/proc/self/fd/N``, would be made as a
    folder: the path is now refused in one line naming the folder and the fix, and nothing is
    made."""
    from forensics.probe import owned

    capture = tmp_path / "run.capture"
    capture.mkdir(mode=0o700)
    folder = owned.OwnedFolder(capture, owned.identity(capture.stat()))
    try:
        assert folder.path == Path(f"/proc/self/fd/{folder.fd}")  # with /proc: through it
        _no_proc(monkeypatch)
        with pytest.raises(PermissionError) as refused_path:
            folder.path  # noqa: B018
    finally:
        folder.close()
    line = str(refused_path.value)
    assert "\n" not in line and str(capture) in line and "mount /proc" in line, line
    assert list(capture.iterdir()) == []


def test_without_proc_the_writer_process_refuses_to_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer process opens its capture at ``/proc/self/fd/N`` (the folder it inherits
    held open): without ``/proc`` it refuses to start (one line, ``could not start``) rather
    than make ``/proc/self/fd/N`` as a folder and write there."""
    import argparse
    import os

    from forensics.probe import writer_process
    from forensics.store import writer as store_writer

    made: list[Path] = []
    monkeypatch.setattr(store_writer, "CaptureWriter",
                        lambda path, *a, **k: made.append(Path(path)) or pytest.fail("written"))
    monkeypatch.setattr(writer_process, "leave_engine_cores", lambda: None)
    capture = tmp_path / "run.capture"
    capture.mkdir(mode=0o700)
    fd = os.open(capture, os.O_RDONLY | os.O_DIRECTORY)
    ring = os.open(tmp_path / "ring", os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(ring, 4096)
    (tmp_path / "manifest").write_text("{}")
    facts = os.open(tmp_path / "manifest", os.O_RDONLY)
    _no_proc(monkeypatch)
    args = argparse.Namespace(ring_fd=ring, ring_bytes=4096, capture_fd=fd, manifest_fd=facts,
                              process="p1", ack_fd=-1, engine_pid=os.getpid())
    try:
        with pytest.raises(PermissionError, match="does not name the folder held open"):
            writer_process._start(args)
    finally:
        for opened in (fd, ring, facts):
            try:
                os.close(opened)
            except OSError:  # the manifest's, closed where it was read (before the fix)
                pass
    assert made == []


# ---------------------------------------------- T100e: a rank divergence in a tensor's shape


def _two_ranks(tmp_path: Path, rank1_ids: np.ndarray) -> list[str]:
    """One engine of two ranks (the ``clean`` scenario) whose ``async_output`` records of
    step 5 hold ``sampled_token_ids_cpu`` ``[[1, 2, 3], [4, 5, 6]]`` on rank 0 and
    ``rank1_ids`` on rank 1: the two captures' paths."""
    from typing import cast

    from forensics.fleet.generate import _manifest, _scenario, without_positions
    from forensics.records import Record
    from forensics.simulator.runs import simulate
    from forensics.store.writer import write_capture

    sc = _scenario("clean", 12, 4, ranks=2)
    records: list[Record] = []
    for record in without_positions(cast(list[Record], simulate(sc, seed=3))):
        if record.site == "async_output" and record.step == 5:
            ids = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32) if record.rank == 0 \
                else rank1_ids
            record = Record(record.site, record.step, record.rank,
                            {**record.fields, "sampled_token_ids_cpu": ids})
        records.append(record)
    root = tmp_path / "fleet"
    root.mkdir()
    return [str(write_capture(root / f"engine-x-rank{rank}.capture",
                              [r for r in records if r.rank == rank],
                              _manifest(1, "engine-x", sc, 3, f"node-x{rank}", rank, "engine-x"),
                              validated=True)) for rank in (0, 1)]


def test_ranks_holding_the_same_values_in_other_shapes_diverge_naming_both(
        tmp_path: Path) -> None:
    """Two ranks whose ``sampled_token_ids_cpu`` at step 5 hold the same six values, one in
    shape [2, 3], the other in [3, 2]: triage compared the values alone and found no
    divergence. The shapes are compared too, and the sentence names both."""
    from forensics.fleet.stitch import divergence_text, first_divergence

    ids = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int32)
    hit = first_divergence(_two_ranks(tmp_path, ids))
    assert hit is not None and (hit["step"], hit["site"]) == (5, "async_output"), hit
    text = divergence_text(hit)
    assert "async_output shape(sampled_token_ids_cpu) = [2, 3] on rank 0 (engine-x-rank0." \
        "capture), [3, 2] on rank 1 (engine-x-rank1.capture)" in text, text


def test_ranks_holding_the_same_values_in_the_same_shape_do_not_diverge(
        tmp_path: Path) -> None:
    """The same values in the same shape [2, 3] on both ranks: no divergence."""
    from forensics.fleet.stitch import first_divergence

    assert first_divergence(_two_ranks(
        tmp_path, np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32))) is None


# ------------------------------------ T100c: a field's dict of many keys, counted before parsing

#: past the keys one record's dicts hold (65,536 in a field's dict, and its fields)
MANY = 70_000
#: the tensors of a ``batch_change`` record
CHANGE_TENSORS = ("prev_positions", "valid_sampled_token_count", "num_computed_tokens",
                  "num_accepted_tokens", "prev_num_draft_tokens", "cpu_num_computed_tokens")


def _mapping(n: int) -> dict[str, int]:
    """A ``prev_req_id_to_index`` of ``n`` requests."""
    return {f"r{i}": i for i in range(n)}


def test_an_npz_field_dict_of_many_keys_is_refused_before_it_is_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``.npz`` whose ``__metadata__`` gives ``prev_req_id_to_index`` 70,000 keys (within
    the file's caps on characters and containers) was parsed whole (a dict of a million
    keys, each ``{}``: 2.2 s and 250 MB) before its record was judged; its keys are counted
    first (colons outside strings), and the file refused unparsed in one line naming it, the
    member and the count."""
    import json

    from forensics.importers import npz

    monkeypatch.setattr(npz, "strict_object", lambda *a: pytest.fail("parsed"))
    meta = {"site": "batch_change", "step": 3, "prev_req_id_to_index": _mapping(MANY)}
    source = tmp_path / "keys.npz"
    np.savez(source, __metadata__=np.array(json.dumps(meta)),
             **{name: np.zeros(2, np.int32) for name in CHANGE_TENSORS})
    refused(source, tmp_path, capsys, "member '__metadata__.npy'", "holds 70003 JSON object keys",
            "past the 65559", "counted before they are parsed")


def test_an_npz_metadata_of_a_million_empty_objects_is_refused_before_it_is_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``.npz`` ``__metadata__`` of a million ``{}`` (3 MB, within the containers cap of
    1,048,576 it was) took 0.74 s and 228 MB (0.5 s and 100 MB once the nesting check was
    cheap) before its record was refused; the containers one record holds are now four
    fields' of 65,536 rows, counted first: refused unparsed in one line."""
    from forensics.importers import npz

    monkeypatch.setattr(npz, "strict_object", lambda *a: pytest.fail("parsed"))
    text = '{"site": "batch_change", "step": 3, "prev_req_id_to_index": [' + \
        ",".join(["{}"] * 1_000_000) + "]}"
    source = tmp_path / "empties.npz"
    np.savez(source, __metadata__=np.array(text))
    refused(source, tmp_path, capsys, "member '__metadata__.npy'", "holds 1000002 JSON lists "
            "and objects, past the 262144")


def test_a_safetensors_field_dict_of_many_keys_is_refused_before_it_is_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``.safetensors`` whose ``__metadata__`` string of ``prev_req_id_to_index`` holds a
    JSON object of 70,000 keys: counted before it is parsed, refused in one line."""
    import json

    from safetensors.numpy import save_file

    from forensics.importers import safetensors_

    real = safetensors_.strict_json
    monkeypatch.setattr(safetensors_, "strict_json",
                        lambda text: pytest.fail("parsed") if text.startswith('{"r0"')
                        else real(text))
    source = tmp_path / "keys.safetensors"
    save_file({name: np.zeros(2, np.int32) for name in CHANGE_TENSORS}, str(source),
              metadata={"site": "batch_change", "step": "3",
                        "prev_req_id_to_index": json.dumps(_mapping(MANY))})
    refused(source, tmp_path, capsys, "__metadata__['prev_req_id_to_index'] holds 70000 JSON "
            "object keys", "past the 65559")


def test_a_pt_field_dict_of_many_keys_is_refused_from_its_pickle(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``.pt`` record whose ``prev_req_id_to_index`` has 70,000 keys (a field's value, not
    a record: the record cap does not see it) was built by torch's unpickler whole; the
    pickle's keys set into that dict are counted, and the file refused before torch loads
    it."""
    import torch

    torch.save({"site": "batch_change", "step": 3, "prev_req_id_to_index": _mapping(MANY),
                **{name: torch.zeros(2, dtype=torch.int32) for name in CHANGE_TENSORS}},
               tmp_path / "keys.pt")
    loads = _spy(monkeypatch, torch, "load")
    refused(tmp_path / "keys.pt", tmp_path, capsys, "its pickle sets keys 66000 times in one "
            "dict, before anything is loaded: past the 65559")
    assert loads == []


def test_a_field_dict_of_as_many_keys_as_a_batch_holds_is_imported(tmp_path: Path) -> None:
    """A ``prev_req_id_to_index`` of 65,536 requests imports from each format."""
    import json

    import torch
    from safetensors.numpy import save_file

    from forensics.importers import read_source

    n = 1 << 16
    meta = {"site": "batch_change", "step": 3, "prev_req_id_to_index": _mapping(n)}
    np.savez(tmp_path / "ok.npz", __metadata__=np.array(json.dumps(meta)),
             **{name: np.zeros(2, np.int32) for name in CHANGE_TENSORS})
    save_file({name: np.zeros(2, np.int32) for name in CHANGE_TENSORS},
              str(tmp_path / "ok.safetensors"),
              metadata={"site": "batch_change", "step": "3",
                        "prev_req_id_to_index": json.dumps(_mapping(n))})
    torch.save({**meta, **{name: torch.zeros(2, dtype=torch.int32) for name in CHANGE_TENSORS}},
               tmp_path / "ok.pt")
    for name in ("ok.npz", "ok.safetensors", "ok.pt"):
        (record,) = read_source(tmp_path / name).records
        assert len(record.fields["prev_req_id_to_index"]) == n, name


def test_the_nesting_check_of_a_million_containers_takes_little_memory() -> None:
    """The nesting check of an ``.npz`` metadata text of a million ``{}`` (3 MB, within the
    containers cap) grew the peak memory by 80 MB (each bracket became a string of its own;
    0.74 s and 228 MB reported with the rest of the import); it now counts in pieces, under
    16 MB."""
    from test_round4_store import peak_growth

    from forensics.store.json_in import check_nesting

    text = '{"site": "x", "k": [' + ",".join(["{}"] * 1_000_000) + "]}"
    assert peak_growth(lambda: check_nesting(text)) < 16 << 20


#: texts of ``n`` containers or keys whose nesting and keys are counted
COUNTED = {
    "empty objects": lambda n: "[" + ",".join(["{}"] * n) + "]",
    "keys": lambda n: "{" + ",".join(f'"k{i}":{{"a":"[\\\\\\"{{"}}' for i in range(n)) + "}",
}


@pytest.mark.parametrize("case", list(COUNTED))
def test_the_nesting_and_key_counts_are_linear(case: str, tmp_path: Path) -> None:
    """4x the text costs under 6x the instructions of the nesting check and the key count."""
    from tests.instructions import assert_linear, scaling

    make_work(case, 1_000, tmp_path)()
    assert_linear(scaling(__file__, dict.fromkeys(COUNTED, 50_000), tmp_path)[case])


def make_work(case: str, size: int, scratch: Path) -> Any:
    """The nesting check and key count of ``COUNTED[case](size)`` (:mod:`tests.instructions`)."""
    from forensics.store.json_in import check_nesting, keys_in

    text = COUNTED[case](size)
    return lambda: (check_nesting(text), keys_in(text))


def test_without_proc_the_probe_refuses_to_start_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's start, without ``/proc``: one line (ConfigurationError, so the engine
    refuses to start, as for a capture directory where no folder can be made) naming
    ``FORENSICS_DIR``, the folder and the fix; the empty folder it made is removed."""
    from forensics.errors import ConfigurationError
    from forensics.probe import plugin
    from forensics.probe.settings import Settings

    directory = tmp_path / "captures"
    directory.mkdir()
    _no_proc(monkeypatch)
    try:
        with pytest.raises(ConfigurationError) as refused_start:
            plugin.start(Settings(directory=directory, capture=directory / "run.capture",
                                  ring=8, flush_every=1))
    finally:
        if plugin._SESSION is not None:  # started all the same (before the fix)
            plugin.stop()
    line = str(refused_start.value)
    assert "\n" not in line, line
    assert line.startswith(f"FORENSICS_DIR='{directory}': capture folder {directory}"), line
    assert "mount /proc" in line and list(directory.iterdir()) == [], line
