"""Hostile input, round 17 (attack17c): ``.pt`` archives and pickles that torch's loader reads
otherwise than the checks before it (T96a-)."""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_round4_importers import refused

from tests.instructions import assert_linear, scaling


def _pairs(count: int) -> bytes:
    """``count`` keys (``BINUNICODE``) of 0 (``BININT1``), as a pickle's stack items."""
    return b"".join(b"X" + len(key).to_bytes(4, "little") + key + b"K\x00"
                    for key in (f"k{i}".encode() for i in range(count)))


def _pt(path: Path, body: bytes, pickle_name: str = "data.pkl") -> Path:
    """A torch zip archive whose pickle is ``body``, its member named ``pickle_name``."""
    import torch

    saved = io.BytesIO()
    torch.save({"a": 1}, saved)
    with zipfile.ZipFile(saved) as archive, zipfile.ZipFile(path, "w") as out:
        for info in archive.infolist():
            name, raw = info.filename, archive.read(info)
            if name.endswith("/data.pkl"):
                name, raw = name[:-len("data.pkl")] + pickle_name, body
            out.writestr(name, raw)
    return path


def _no_load(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """torch.load replaced by a recorder (its calls, none expected)."""
    import torch

    loaded: list[int] = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: loaded.append(1))
    return loaded


# ------------------------------------------------ T96a: the pickle's member name, any case


@pytest.mark.parametrize("name", ["DATA.PKL", "Data.pkl", "data.PkL"])
def test_a_pickle_named_in_capitals_is_scanned_as_torch_reads_it(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's zip reader finds ``data.pkl`` ignoring case: a pickle member named ``DATA.PKL``
    was loaded by torch and never scanned (24 MiB of ``EMPTY_LIST``: 19 s of CPU, 2.4 GB,
    then "wrote 0 records"; a record of 900,000 keys: 3.3 s, 744 MB). Its record dict is
    refused from the pickle, before torch loads it."""
    loaded = _no_load(monkeypatch)
    source = _pt(tmp_path / "caps.pt", b"\x80\x02}(" + _pairs(2_000) + b"u.", name)
    refused(source, tmp_path, capsys, "its pickle sets keys 2000 times in the dict at place 0")
    assert loaded == []


def test_a_pickle_named_in_capitals_is_held_to_the_pickle_size(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The 16 MiB a pickle may take holds for ``DATA.PKL`` too (here lowered to 1 KiB)."""
    from forensics.importers import pt

    loaded = _no_load(monkeypatch)
    monkeypatch.setattr(pt, "MAX_PICKLE", 1 << 10)
    source = _pt(tmp_path / "long.pt", b"\x80\x02" + b"]" * 2_000 + b".", "DATA.PKL")
    refused(source, tmp_path, capsys, "its pickle is over 1024 bytes")
    assert loaded == []


# ------------------------------------------ T96b: the members zipfile reads are torch's


def _torch_zip(body: bytes | None = None) -> bytes:
    """torch.save's archive of ``{"a": 1}``, its pickle replaced by ``body``."""
    import torch

    saved = io.BytesIO()
    torch.save({"a": 1}, saved)
    if body is None:
        return saved.getvalue()
    out = io.BytesIO()
    with zipfile.ZipFile(saved) as archive, zipfile.ZipFile(out, "w") as written:
        for info in archive.infolist():
            written.writestr(info.filename, body if info.filename.endswith("/data.pkl")
                             else archive.read(info))
    return out.getvalue()


def _directory(archive: bytes) -> tuple[bytes, list[bytearray]]:
    """An archive's members' bytes (before its central directory), and that directory's
    entries."""
    end = archive.rindex(b"PK\x05\x06")
    size, offset = struct.unpack("<II", archive[end + 12:end + 20])
    directory, entries, at = archive[offset:offset + size], [], 0
    while at < len(directory):
        lengths = struct.unpack("<HHH", directory[at + 28:at + 34])
        entries.append(bytearray(directory[at:at + 46 + sum(lengths)]))
        at += 46 + sum(lengths)
    return archive[:offset], entries


def _joined(entries: list[bytearray], shift: int, size: int) -> bytes:
    """Central directory ``entries``, their members moved by ``shift`` bytes, padded (the last
    entry's comment) to ``size`` bytes."""
    for entry in entries:
        entry[42:46] = struct.pack("<I", struct.unpack("<I", entry[42:46])[0] + shift)
    last, pad = entries[-1], size - sum(map(len, entries))
    last[32:34] = struct.pack("<H", struct.unpack("<H", last[32:34])[0] + pad)
    last += b" " * pad
    return b"".join(entries)


def _two_directories(loaded: bytes, scanned: bytes) -> bytes:
    """One file of two archives: torch's zip reader (miniz) reads ``loaded`` (the directory
    the end record names), zipfile ``scanned`` (the directory just before the end record,
    its members shifted by the bytes before it)."""
    loaded_members, loaded_dir = _directory(loaded)
    scanned_members, scanned_dir = _directory(scanned)
    size = max(sum(map(len, d)) for d in (loaded_dir, scanned_dir))
    gap = b"\0" * size
    start = len(loaded_members) + len(gap) + len(scanned_members)
    return (loaded_members + gap + scanned_members + _joined(loaded_dir, 0, size)
            + _joined(scanned_dir, len(loaded_members) + len(gap) - size, size)
            + b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, len(loaded_dir), len(loaded_dir),
                                          size, start, 0))


def test_an_archive_of_two_directories_is_refused_before_torch_reads_the_other(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """zipfile reads the central directory just before the end record (shifting the members
    by the bytes before it), torch's reader the one the end record names: a file of two
    archives had its small pickle scanned and the other loaded (24 MiB of ``EMPTY_LIST``: 17.5
    s of CPU, 2.4 GB, then "wrote 0 records"; every member limit unchecked). It is refused
    before torch loads it, and torch does read the other archive's pickle."""
    import torch

    body = b"\x80\x02}(" + _pairs(2_000) + b"u."
    source = tmp_path / "two.pt"
    source.write_bytes(_two_directories(_torch_zip(body), _torch_zip()))
    with zipfile.ZipFile(source) as archive:  # what zipfile reads: the small pickle
        assert len(archive.read("archive/data.pkl")) < 100
    assert len(torch.load(source, weights_only=True)) == 2_000  # what torch reads
    loaded = _no_load(monkeypatch)
    refused(source, tmp_path, capsys, "its zip directory is not where its end record names it")
    assert loaded == []


@pytest.mark.parametrize("where", ["before", "after"])
def test_bytes_around_a_torch_archive_are_refused(
        where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes before a torch archive (zipfile shifts its members by them; miniz does not) or
    after it are refused; torch.save's own archive is read (the other tests)."""
    loaded = _no_load(monkeypatch)
    archive = _torch_zip()
    source = tmp_path / "around.pt"
    source.write_bytes(b"junk" + archive if where == "before" else archive + b"junk")
    refused(source, tmp_path, capsys, "its zip directory is not where its end record names it")
    assert loaded == []


# ------------------------------------- T96c: a record made by a call on many items or keys


def _text(text: str) -> bytes:
    """``BINUNICODE`` of ``text``."""
    raw = text.encode()
    return b"X" + len(raw).to_bytes(4, "little") + raw


def _tuples(count: int) -> bytes:
    """``count`` (key, 0) pairs (``TUPLE2``) as a pickle's stack items."""
    return b"".join(_text(f"k{i}") + b"K\x00\x86" for i in range(count))


_ORDERED, _COUNTER = b"ccollections\nOrderedDict\n", b"ccollections\nCounter\n"
#: pickles (protocol 2) whose record is made by a call the loader allows on many keys or items,
#: given no key itself: each loads as a record of 2,000 keys
MADE = {
    # OrderedDict(d), d a dict of 2,000 keys
    "OrderedDict of a dict": _ORDERED + b"}(" + _pairs(2_000) + b"u\x85R.",
    # Counter(text), 2,000 distinct characters
    "Counter of a text": _COUNTER + _text("".join(chr(0x100 + i) for i in range(2_000)))
    + b"\x85R.",
    # torch._tensor._rebuild_from_type_v2(OrderedDict, OrderedDict, (d,), {})
    "rebuild_from_type_v2": b"ctorch._tensor\n_rebuild_from_type_v2\n(" + _ORDERED + _ORDERED
    + b"}(" + _pairs(2_000) + b"u\x85}tR.",
    # OrderedDict(*t), t = (l,) made when l was empty; l given 2,000 pairs after, from the memo
    "list changed after": b"]]q\x00\x85q\x01ah\x00(" + _tuples(2_000) + b"ea" + _ORDERED
    + b"h\x01R.",
    # a list of one such record (its dict made above the list, under no mark)
    "in a list": b"]" + _ORDERED + b"}(" + _pairs(2_000) + b"u\x85Rq\x00a.",
}


@pytest.mark.parametrize("case", MADE)
def test_a_record_made_by_a_call_on_many_keys_is_refused_from_its_pickle(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A record the loader makes by a call (``REDUCE``) on a dict, a list, a text of 2,000
    keys, items or characters, itself given none, passed the pickle's scan and torch loaded it
    (a record of 900,000 keys made so: 5.3 s of CPU and 870 MB before the field count refused
    it). It is refused from the pickle, naming the record, before torch loads the file."""
    import torch

    source = _pt(tmp_path / "made.pt", b"\x80\x02" + MADE[case])
    loaded = torch.load(source, weights_only=True)
    assert len(loaded[0] if isinstance(loaded, list) else loaded) == 2_000
    calls = _no_load(monkeypatch)
    refused(source, tmp_path, capsys, "record 0 in '", "made.pt': its pickle makes that record "
            "by a call (REDUCE) on 2000 items or characters, before anything is loaded")
    assert calls == []


def test_records_of_tensors_and_ordered_dicts_are_imported(tmp_path: Path) -> None:
    """torch.save's calls (an ``OrderedDict`` record, tensors of many elements, a ``Counter``
    and an ``OrderedDict`` made before them) pass the scan: the records are imported."""
    from collections import Counter, OrderedDict

    import torch

    from forensics.importers import read_source

    record = OrderedDict(site="embedding", step=1, input_ids=torch.arange(5_000),
                         num_embeddings=10)
    torch.save([record, record.copy()], tmp_path / "ok.pt")
    assert len(read_source(tmp_path / "ok.pt").records) == 2
    junk = (Counter(f"k{i}" for i in range(3_000)), OrderedDict.fromkeys(range(3_000)))
    torch.save({"junk": junk, **record}, tmp_path / "junk.pt")
    with pytest.raises(Exception, match="junk"):
        read_source(tmp_path / "junk.pt")  # refused as a field the site does not declare


# ------------------------------ T96d: a call's argument is not named as the record after it


def test_a_dict_given_as_a_calls_argument_is_not_named_as_a_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A list of two records, the second ``Counter(d)`` of a dict of 2,000 keys made in the
    list's items: the dict sits at the stack's place 4, above the global ``Counter``, and was
    named "record 2 (item 2 of the list saved)" (the list holds two); the record the call
    makes, item 1, is named."""
    loaded = _no_load(monkeypatch)
    body = b"\x80\x02](}" + _COUNTER + b"}(" + _pairs(2_000) + b"u\x85Re."
    err = refused(_pt(tmp_path / "call.pt", body), tmp_path, capsys, "record 1 in '",
                  "call.pt': its pickle makes that record by a call (REDUCE) on 2000 items")
    assert "record 2" not in err
    assert loaded == []


def test_a_field_dict_set_by_one_setitem_is_not_refused_as_a_record(tmp_path: Path) -> None:
    """A list of two records, the second given its one field (a dict of 2,000 keys) by
    ``SETITEM`` (no mark: Python's pickle of a dict of one key): the dict, above the record and
    its key, was refused as "record 3 (item 3 of the list saved)"; it is a field's value."""
    import torch

    from forensics.importers import pickle_scan

    body = b"\x80\x02](}}" + _text("field") + b"}(" + _pairs(2_000) + b"use."
    path = _pt(tmp_path / "field.pt", body)
    assert [len(r) for r in torch.load(path, weights_only=True)] == [0, 1]
    assert pickle_scan.count_made(body, 0, path) > 4_000


#: pickles scanned in linear time: many dicts past the cap in a list's items after a global
#: (each judged at STOP, none looked for again)
SCANNED = {
    "dicts after a global": lambda n: b"\x80\x02](" + _COUNTER + b"K\x00" * n + (
        b"}(" + _pairs(24) + b"u") * (n // 100) + b"e.",
}


@pytest.mark.parametrize("case", list(SCANNED))
def test_the_pickle_scan_takes_linear_time(tmp_path: Path, case: str) -> None:
    """A pickle 4x longer costs under 6x the instructions of its scan."""
    make_work(case, 1_000, tmp_path)()
    assert_linear(scaling(__file__, dict.fromkeys(SCANNED, 16_000), tmp_path)[case])


def make_work(case: str, size: int, scratch: Path) -> Callable[[], Any]:
    """The scan of ``case`` over an input of ``size`` (:mod:`tests.instructions`)."""
    from forensics.errors import CaptureFormatError
    from forensics.importers import pickle_scan

    data, path = SCANNED[case](size), scratch / f"{case}.pkl"

    def scan() -> None:
        try:
            pickle_scan.count_made(data, 0, path)
        except CaptureFormatError:
            pass

    return scan


# ----------------------------------------- T96e: a member's CRC, unchecked as torch reads it


def _record_pt(path: Path) -> Path:
    """torch.save of one embedding record."""
    import torch

    torch.save({"site": "embedding", "step": 1, "input_ids": torch.arange(4),
                "num_embeddings": 10}, path)
    return path


def test_a_torch_save_without_crc_is_imported(tmp_path: Path) -> None:
    """torch.save told not to compute CRC-32s (``torch.utils.serialization.config.save.
    compute_crc32 = False``) writes 0; torch reads the file without checking them, and so does
    the scan before it: the record is imported (it was refused as "not a torch zip archive
    but a bare or legacy pickle")."""
    import torch.utils.serialization as serialization

    from forensics.importers import read_source

    serialization.config.save.compute_crc32 = False
    try:
        source = _record_pt(tmp_path / "nocrc.pt")
    finally:
        serialization.config.save.compute_crc32 = True
    with zipfile.ZipFile(source) as archive:
        assert {i.CRC for i in archive.infolist()} == {0}
    assert [r.step for r in read_source(source).records] == [1]


def test_a_member_zipfile_cannot_read_is_not_called_a_bare_pickle(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A torch archive whose pickle's local header names another member (zipfile refuses to
    read it): one line saying it is not a readable torch file, not that it is no zip archive."""
    raw = bytearray(_record_pt(tmp_path / "named.pt").read_bytes())
    at = raw.index(b"PK\x03\x04") + 30  # the first local header's name: .../data.pkl
    raw[at:at + 7] = b"ARCHIVE"
    (tmp_path / "named.pt").write_bytes(bytes(raw))
    err = refused(tmp_path / "named.pt", tmp_path, capsys, "is not a readable torch file")
    assert "bare or legacy pickle" not in err
