"""Hostile input, round 16 (attack 16): the importers other than the crash dump, ``shrink``,
``simulate``, ``plot``, ``schema`` and ``summary`` with hostile options and captures."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_round4_importers import refused

from forensics.cli import main


def _npz(path: Path, members: dict[str, np.ndarray]) -> Path:
    """An ``.npz`` of ``members`` (deflated, as ``numpy.savez_compressed`` writes)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, array in members.items():
            raw = io.BytesIO()
            np.save(raw, array)
            archive.writestr(f"{name}.npy", raw.getvalue())
    return path


# ------------------------------------------------------------------ T85a: .npz string members


def test_npz_string_members_are_held_to_one_budget_together(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each string member was held to 5,000,000 strings alone, so a 351 KB file of six such
    members became 30 million Python strings (2.4 GiB, 10 s) before any field was checked: the
    string members of one file are held to the cap together (lowered here so the test stays
    cheap: the check is the same at 5,000,000), naming the member that goes past it."""
    from forensics.importers import npz

    monkeypatch.setattr(npz, "MAX_VALUES", 1000)
    ids = np.array([f"r{k}" for k in range(600)])
    base = {"site": np.array("batch_change"), "step": np.array(1)}
    source = _npz(tmp_path / "two.npz", {**base, "req_ids": ids, "prev_req_ids": ids})
    refused(source, tmp_path, capsys, "'prev_req_ids.npy'", "1200 strings", "1000 strings")
    fine = _npz(tmp_path / "fine.npz", {"site": np.array("embedding"), "step": np.array(1),
                                        "input_ids": np.arange(900) % 10,
                                        "req_ids": ids.repeat(2)[:900],
                                        "num_embeddings": np.array(10)})
    assert main(["import", str(fine), "-o", str(tmp_path / "fine.capture")]) == 0


def test_npz_json_texts_count_their_lists_before_they_are_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A 0-d JSON text of 16 Mi characters ``[[],[],...]`` (a 130 KB file) parsed into 5.6
    million lists, 633 MiB and 5 s, where a ``.safetensors`` ``__metadata__`` text counts its
    lists and objects first: an ``.npz``'s JSON texts are counted so too, together (the cap
    lowered here so the test stays cheap), naming the member past it."""
    from forensics.importers import common

    monkeypatch.setattr(common, "MAX_CONTAINERS", 1000)
    rows = np.array("[" + ",".join(["[]"] * 600) + "]")
    base = {"site": np.array("async_output"), "step": np.array(1),
            "req_ids": np.array([f"r{k}" for k in range(600)])}
    source = _npz(tmp_path / "lists.npz", {**base, "output_token_ids": rows, "output_tail": rows})
    refused(source, tmp_path, capsys, "'output_tail.npy'", "1202 JSON lists and objects",
            "past the 1000")


# ------------------------------------------------------------------ T85b: known issues not judged


@pytest.fixture(scope="module")
def stale(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated capture whose upstream replay matches a known issue (stale-prev-row)."""
    from forensics.simulator.runs import simulate

    out = tmp_path_factory.mktemp("stale") / "stale.capture"
    simulate("stale-prev-row", steps=100, seed=0, out=out)
    return out


def test_summary_says_known_issues_not_judged_without_the_engines_code(
        stale: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Replayed through the fix alone, ``summary --format text`` ended in "known issues: none"
    of a capture that matches stale-prev-positions-row (``known`` and the paragraph say the
    signatures were not judged), and ``--format json`` / ``known --json`` gave ``matches: []``
    with nothing saying so: now "not judged" and ``"judged": false``."""
    import json

    assert main(["summary", str(stale), "--variant", "patched", "--format", "text"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith("known issues: not judged (no variant of the engine's code, upstream "
                         "or vllm, was replayed: replay with upstream too)"), last
    assert main(["summary", str(stale), "--variant", "patched", "--format", "json"]) == 0
    known = json.loads(capsys.readouterr().out)["known"]
    assert known["judged"] is False and known["matches"] == []
    assert main(["known", str(stale), "--variant", "patched", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["judged"] is False
    assert main(["summary", str(stale), "--format", "text"]) == 0
    assert capsys.readouterr().out.strip().endswith("known issues: stale-prev-positions-row")
    assert main(["known", str(stale), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["judged"] is True and answer["matches"] == ["stale-prev-positions-row"]


# ------------------------------------------------------------------ T85c: simulate's notes


@pytest.mark.parametrize("scenario", ["vocab-sentinel", "v2-negative-draft",
                                      "v2-wrong-last-token", "v2-zeroed-combine"])
def test_simulate_refuses_a_draft_fault_without_drafts(
        scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``simulate vocab-sentinel --spec-tokens 0`` wrote a capture with no fault in it (every
    variant "no violation") whose notes, shown by ``inspect`` and ``replay``, said "synthetic
    run: rejected slots carry vocab_size; async_output writes it": its fault acts on drafts.
    Refused in one line naming the option, nothing written."""
    out = tmp_path / "x.capture"
    assert main(["simulate", scenario, "-o", str(out), "--spec-tokens", "0",
                 "--steps", "40"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert scenario in err and "--spec-tokens 1" in err and not out.exists(), err


def test_simulate_keeps_faults_that_need_no_drafts_without_drafts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario with a fault that acts on no draft (a placeholder leak, a stale row, soak's
    mixed ones) still runs without drafts, and its fault is there."""
    out = tmp_path / "leak.capture"
    assert main(["simulate", "placeholder-leak", "-o", str(out), "--spec-tokens", "0",
                 "--steps", "400"]) == 0
    assert main(["summary", str(out), "--format", "text"]) == 0
    assert "upstream: violation at" in capsys.readouterr().out
    assert main(["simulate", "soak", "-o", str(tmp_path / "soak.capture"), "--spec-tokens", "0",
                 "--steps", "40"]) == 0


# ------------------------------------------------------------------ T85d: zip members that inflate


def _zip(entries: list[tuple[str, int, bytes, int, int]]) -> bytes:
    """A zip archive written by hand: each entry ``(name, method, stream, declared size,
    crc)`` as it is, its sizes unchecked (a writer that lies about them)."""
    import struct

    body, directory = bytearray(), bytearray()
    for name, method, stream, size, crc in entries:
        raw, offset = name.encode(), len(body)
        body += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0, crc,
                            len(stream), size, len(raw), 0) + raw + stream
        directory += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, method, 0,
                                 0, crc, len(stream), size, len(raw), 0, 0, 0, 0, 0,
                                 offset) + raw
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries),
                      len(directory), len(body), 0)
    return bytes(body + directory + end)


def _npy_bytes(array: np.ndarray) -> bytes:
    raw = io.BytesIO()
    np.save(raw, array)
    return raw.getvalue()


def test_an_npz_member_in_bzip2_is_refused_unread(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """zipfile inflates each 4 KiB of a bzip2 (or LZMA) member at once, whatever size the
    member declares: a 1.5 KB ``.npz`` whose ``input_ids`` declared 160 bytes held 1 GiB of
    zeros in 883 bytes of bzip2 and took 2.2 GiB and 10 s (4 KiB of it hold 4.7 GiB). numpy
    writes only stored and deflated members: another method is refused before any is read."""
    import bz2
    import zlib

    head = _npy_bytes(np.arange(4))
    stream = bz2.compress(head + b"\0" * (64 << 20), 9)  # 64 MiB here: the same path
    entries = [(f"{name}.npy", 0, raw, len(raw), zlib.crc32(raw)) for name, raw in (
        ("site", _npy_bytes(np.array("embedding"))), ("step", _npy_bytes(np.array(1))),
        ("num_embeddings", _npy_bytes(np.array(10))))]
    entries.append(("input_ids.npy", 12, stream, len(head), zlib.crc32(head)))
    source = tmp_path / "bomb.npz"
    source.write_bytes(_zip(entries))
    refused(source, tmp_path, capsys, "'input_ids.npy'", "zip method 12", "refused unread")


def test_a_pt_pickle_inflating_past_its_declared_size_is_read_to_that_size(
        tmp_path: Path) -> None:
    """A ``.pt`` whose ``data.pkl`` declared its own size but deflated from a stream holding
    1 GiB more (a 1 MB file) took 2.7 GiB and 10 s: the pickle was read with ``ZipFile.read``,
    which inflates a member at once. It is read in pieces up to its declared size (here 256
    MiB past it: the import's peak stays far below that)."""
    import tracemalloc
    import zlib

    import torch

    from forensics.importers import read_source

    saved = io.BytesIO()
    torch.save({"site": "embedding", "step": 1, "input_ids": torch.tensor([1, 2]),
                "num_embeddings": 10}, saved)
    entries = []
    with zipfile.ZipFile(saved) as archive:
        for info in archive.infolist():
            raw = archive.read(info)
            if info.filename.endswith(".pkl"):
                packer = zlib.compressobj(9, zlib.DEFLATED, -15)
                stream = packer.compress(raw) + packer.compress(b"\0" * (256 << 20))
                entries.append((info.filename, 8, stream + packer.flush(), len(raw),
                                zlib.crc32(raw)))
            else:
                entries.append((info.filename, 0, raw, len(raw), zlib.crc32(raw)))
    source = tmp_path / "inflating.pt"
    source.write_bytes(_zip(entries))
    tracemalloc.start()
    try:
        records = read_source(source).records
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r.site for r in records] == ["embedding"]
    assert peak < 64 << 20, f"peak {peak} bytes"


# ------------------------------------------------------------------ T85e: replay's variant line


def test_replay_does_not_say_no_violation_of_a_variant_in_violation(
        stale: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Of a stale-prev-row capture the patched replay leaves five tokens substituted at the
    embedding (its verdict there: ``violation``), and its line said "5 findings (0 resolved);
    no unresolved violation": the first violation it names is the first unresolved out-of-bounds
    finding, and the line now says that there is none of those."""
    assert main(["replay", str(stale)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:3] == ["embedding", "violation", "violation"] for line in lines)
    patched = next(line for line in lines if line.startswith("patched: "))
    assert patched.endswith("5 findings (0 resolved at their origin); no unresolved "
                            "out-of-bounds finding"), patched
    assert "no unresolved violation" not in "\n".join(lines)


# ------------------------------------------------------------------ T85f: a lone surrogate


@pytest.mark.parametrize("suffix", [".npz", ".pt", ".safetensors"])
def test_a_lone_surrogate_is_refused_naming_the_source(
        suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A request id holding a lone surrogate (``\\ud800``: a producer's undecodable byte) was
    refused by the capture's writer, naming "record 0 appended to '.out.capture.tmp-PID'", a
    temporary folder the user never named, not the source: now the source, record and field,
    and the fix."""
    import json
    import struct

    import torch

    source = tmp_path / f"ids{suffix}"
    ids = ["\ud800", "b"]
    if suffix == ".npz":
        _npz(source, {"site": np.array("embedding"), "step": np.array(1),
                      "input_ids": np.array([1, 2]), "num_embeddings": np.array(10),
                      "req_ids": np.array(ids)})
    elif suffix == ".pt":
        torch.save({"site": "embedding", "step": 1, "input_ids": torch.tensor([1, 2]),
                    "num_embeddings": 10, "req_ids": ids}, source)
    else:
        meta = {"site": "embedding", "step": "1", "num_embeddings": "10",
                "req_ids": json.dumps(ids)}
        header = json.dumps({"__metadata__": meta, "input_ids": {
            "dtype": "I64", "shape": [2], "data_offsets": [0, 16]}}).encode()
        source.write_bytes(struct.pack("<Q", len(header)) + header
                           + np.array([1, 2], "<i8").tobytes())
    err = refused(source, tmp_path, capsys, f"record 0 in 'ids{suffix}'", "'req_ids'",
                  "lone surrogate", "write it as UTF-8")
    assert "tmp" not in err, err
