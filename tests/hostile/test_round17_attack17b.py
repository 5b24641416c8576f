"""Round 17's attack17b (issue 38): a segment read into memory (T92a, T92c) whose message header
claims more bytes than the file stores, or whose batch head is rewritten in place after the
capture was opened (T95a, T95b of docs/threat-model.md)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from test_round4_store import peak_growth
from test_round14_fix14 import plugin_captures  # noqa: F401  (a fixture)

from forensics.errors import CaptureFormatError
from forensics.records import Record
from forensics.store.index import ENTRY, MAGIC
from forensics.store.writer import write_capture

#: what a hostile header claims: far more than the 12 KiB the segment stores
CLAIMED = 256 << 20


def _capture(tmp_path: Path) -> tuple[Path, Path, np.ndarray]:
    """A capture of three embedding records: its folder, its segment and its index entries."""
    capture = write_capture(tmp_path / "s.capture", [
        Record("embedding", s, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                   "num_embeddings": 10}) for s in range(3)])
    segment = next(capture.glob("*.arrows"))
    entries = np.fromfile(segment.with_name(segment.name + ".idx"), dtype=ENTRY,
                          offset=len(MAGIC))
    return capture, segment, entries


def _append_head(segment: Path, entries: np.ndarray, meta: int, hole: int) -> None:
    """Drop the segment's index; append a message head claiming a header of ``meta`` bytes,
    then ``hole`` bytes of hole (nothing stored)."""
    os.unlink(segment.with_name(segment.name + ".idx"))
    end = int(entries[-1]["offset"] + entries[-1]["length"])
    with open(segment, "r+b") as f:
        f.truncate(end)
        f.seek(end)
        f.write(b"\xff\xff\xff\xff" + meta.to_bytes(4, "little"))
        f.truncate(end + 8 + hole)


@pytest.mark.parametrize("mapped", [False, True])
def test_a_header_claimed_over_a_hole_is_refused_before_it_is_read(
        mapped: bool, tmp_path: Path) -> None:
    """A segment (no index) whose last message's head claims a header of 256 MiB, the file
    extended over a hole past it (12 KiB stored): opened without a map (every command since
    T92a), the header's claimed bytes were taken and read (a bytearray, then a copy of it:
    512 MiB held; a 2 GiB claim took `inspect` to 4.3 GB and 7 s) before it was found to be
    no message. Its bytes are found unstored first: one line, nothing read. Mapped, pyarrow
    reads it through the map and refuses it."""
    import forensics

    capture, segment, entries = _capture(tmp_path)
    _append_head(segment, entries, CLAIMED, CLAIMED + 1)

    def load() -> None:
        with pytest.raises(CaptureFormatError) as raised:
            forensics.load(capture, mapped=mapped)
        said = str(raised.value)
        assert "\n" not in said and f"'{segment.name}' of 's.capture'" in said, said
        if not mapped:
            assert f"claims a header of {CLAIMED} bytes but the file stores only" in said, said

    assert peak_growth(load) < 16 << 20


def test_a_header_past_the_read_cap_is_refused_before_it_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A message head claiming a header past ``MAX_READ_BYTES`` (1 GiB; here made 64 KiB),
    its bytes stored (4 MiB of them): the header was read (twice its size held) before the
    message's size was checked against the cap, and then the line said it was a bad message.
    The cap is checked first: the line says the message takes more than one may read, and
    no read of the header's size is made."""
    import forensics
    from forensics.store import segment as segment_module

    capture, segment, entries = _capture(tmp_path)
    meta = 4 << 20
    _append_head(segment, entries, meta, 0)
    with open(segment, "ab") as f:
        f.write(b"\x01" * (meta + 1))  # stored, not a hole
    monkeypatch.setattr(segment_module, "MAX_READ_BYTES", 64 << 10)
    reads: list[int] = []
    real = segment_module.Segment._read_at

    def spied(self: segment_module.Segment, offset: int, length: int, what: str = ""
              ) -> bytearray:
        reads.append(length)
        return real(self, offset, length, what)

    monkeypatch.setattr(segment_module.Segment, "_read_at", spied)
    with pytest.raises(CaptureFormatError, match=f"takes {8 + meta} bytes, past the 65536 one"):
        forensics.load(capture)
    assert max(reads) < 64 << 10, reads


@pytest.mark.parametrize("reader", ["batches", "check_index"])
def test_a_batch_head_rewritten_after_open_is_refused_before_its_header_is_read(
        reader: str, tmp_path: Path) -> None:
    """A batch whose head (its header's length) another user rewrites in place, after the
    capture was opened (its head then checked to fit its index entry) and before the batch or
    its index claims are read: the new length was taken as is (a bytearray of 256 MiB made,
    of 4 GiB for ``inspect``'s index check), and the line said the segment 'was truncated
    while it was read', which it was not. The head is checked again to fit its entry: one
    line saying the batch, or the entry, does not match; nothing of that length is made."""
    import forensics

    capture, segment, entries = _capture(tmp_path)
    opened = forensics.load(capture)
    with open(segment, "r+b") as f:
        f.seek(int(entries[0]["offset"]) + 4)
        f.write(CLAIMED.to_bytes(4, "little"))
    expected = "batch 0 at byte \\d+ does not match the index" if reader == "batches" else \
        "index entry 0 claims 3 record\\(s\\) of steps 0..2, but the segment holds no Arrow " \
        "message that fits the entry there"

    def read() -> None:
        with pytest.raises(CaptureFormatError, match=expected):
            list(opened.batches()) if reader == "batches" else opened.check_index()

    assert peak_growth(read) < 16 << 20


def _engine_of_two_calls(root: Path, changed: int | None) -> list[Path]:
    """The two rank captures of one engine whose embedding is called twice at step 5 (the
    second call's ids each one more than the first's), alike on both ranks; ``changed``: the
    element of rank 1's second call made to differ."""
    from typing import cast

    from forensics.fleet.generate import _manifest, _scenario, without_positions
    from forensics.simulator.runs import simulate

    sc = _scenario("clean", 12, 4, ranks=2)
    records: list[Record] = []
    for record in without_positions(cast(list[Record], simulate(sc, seed=3))):
        records.append(record)
        if record.site == "embedding" and record.step == 5:
            ids = (np.array(record.fields["input_ids"]) + 1) % sc.vocab
            if changed is not None and record.rank == 1:
                ids[changed] = (ids[changed] + 7) % sc.vocab
            records.append(Record(record.site, record.step, record.rank,
                                  {**record.fields, "input_ids": ids}))
    root.mkdir()
    paths = []
    for rank in (0, 1):
        entries = _manifest(1, "engine-x", sc, 3, f"node-x{rank}", rank, "engine-x")
        paths.append(write_capture(root / f"engine-x-rank{rank}.capture",
                                   [r for r in records if r.rank == rank], entries,
                                   validated=True))
    return paths


@pytest.mark.parametrize("changed", [None, 2])
def test_ranks_of_several_calls_at_a_step_are_compared_call_by_call(
        changed: int | None, tmp_path: Path) -> None:
    """Two ranks of one engine each holding two embedding records at step 5 (two calls),
    alike: the triage compared each rank-1 record with rank 0's first, and said "rank
    divergence at step 5: embedding input_ids[0] = X on rank 0, X+1 on rank 1" of two honest
    captures (rank 1's second call against rank 0's first); with rank 1's second call
    differing at element 2, it named element 0 and those values. Each rank's n-th record of a
    step is compared with the other's n-th: alike, no divergence; else the element and values
    that differ."""
    from forensics.fleet.stitch import first_divergence

    rank0, rank1 = _engine_of_two_calls(tmp_path / "fleet", changed)
    hit = first_divergence([str(rank0), str(rank1)])
    if changed is None:
        assert hit is None, hit
        return
    import forensics

    second = [[r for r in forensics.load(p).records(site="embedding", steps=5)][1]
              for p in (rank0, rank1)]
    values = [int(r.fields["input_ids"][changed]) for r in second]
    assert hit is not None and (hit["step"], hit["element"], hit["values"]) == \
        (5, changed, values), hit


def _manifest_nested(capture: Path, levels: int) -> None:
    """Give ``capture``'s manifest a ``shrink`` history nested ``levels`` deep (a capture
    shrunk that many times, each keeping the last's as ``before``)."""
    import json

    path = capture / "manifest.json"
    manifest = json.loads(path.read_text())
    history: dict[str, object] = {"records_kept": 4}
    for _ in range(levels):
        history = {"before": history}
    manifest["shrink"] = history
    path.write_text(json.dumps(manifest))


def test_a_shrink_whose_manifest_would_be_unreadable_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose manifest nests 100 deep (the most forensics reads: its shrink history),
    shrunk: the shrink wrote the capture, with its history one level deeper, then its own
    check of it refused it: "manifest '/proc/self/fd/3/.small.capture.tmp-N/manifest.json':
    lists and objects nested 101 deep ... remove the nested value or replace the file with the
    one its producer wrote", a file the user never saw, and a fix for a file not at fault. The
    manifest is checked as it is written: one line saying that the manifest to write would
    nest past what forensics reads, and which entries to shorten; nothing left."""
    import shutil

    from test_round2 import run_cli

    capture = tmp_path / "deep.capture"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "placeholder-leak.capture",
                    capture)
    _manifest_nested(capture, 98)
    assert run_cli(capsys, "inspect", capture)[0] == 0  # read as it is
    code, _, err = run_cli(capsys, "shrink", capture, "-o", tmp_path / "small.capture")
    assert code == 2, err
    said = err.strip()
    assert "\n" not in said and "/proc/" not in said and ".tmp-" not in said, said
    assert "the manifest.json to write nests its lists and objects past the 100 levels" in \
        said, said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep.capture"]


@pytest.mark.parametrize("entry", ["large", "non-ascii", "containers"])
def test_a_manifest_its_readers_would_refuse_is_not_written(entry: str, tmp_path: Path) -> None:
    """A capture written with manifest entries its readers refuse once written (indented JSON
    past 16 MiB from a 5 MB list; non-ASCII text escaped to three times its bytes; more lists
    and objects than a manifest may hold): ``write_capture`` (``shrink``, ``redact``,
    ``import``) wrote a capture no command could open ("is 18201159 bytes; at most 16777216 are
    read"). It is refused as the manifest is written, naming why; nothing is left."""
    from forensics.store.manifest import MAX_CONTAINERS

    value = {"large": [0] * 2_600_000, "non-ascii": "\U0001f600" * 1_500_000,
             "containers": [[]] * MAX_CONTAINERS}[entry]
    why = {"large": "takes \\d+ bytes, past the 16777216",
           "non-ascii": "takes \\d+ bytes, past the 16777216",
           "containers": "holds \\d+ JSON lists and objects, past the "
                         f"{MAX_CONTAINERS}"}[entry]
    with pytest.raises(CaptureFormatError, match=f"the manifest.json to write {why} "
                                                 "forensics reads"):
        write_capture(tmp_path / "w.capture", [], manifest={"extra": value})
    assert list(tmp_path.iterdir()) == []


def test_a_divergence_in_a_two_dimensional_tensor_names_its_row_and_column(
        tmp_path: Path) -> None:
    """Two ranks of one engine whose ``sampled_token_ids_cpu`` ([p, k]: 2 requests, 3 tokens
    each, as with speculative decoding) differ at row 1, column 1 at step 5: the divergence
    was named by its flat element, ``sampled_token_ids_cpu[4]``, which reads as row 4 (there
    are two); the findings of a replay name such an element ``[1, 1]``. It is named so."""
    from typing import cast

    from forensics.fleet.generate import _manifest, _scenario, without_positions
    from forensics.fleet.stitch import divergence_text, first_divergence
    from forensics.simulator.runs import simulate

    sc = _scenario("clean", 12, 4, ranks=2)
    records: list[Record] = []
    for record in without_positions(cast(list[Record], simulate(sc, seed=3))):
        if record.site == "async_output" and record.step == 5:
            ids = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
            if record.rank == 1:
                ids[1, 1] = 9
            record = Record(record.site, record.step, record.rank,
                            {**record.fields, "sampled_token_ids_cpu": ids})
        records.append(record)
    root = tmp_path / "fleet"
    root.mkdir()
    paths = []
    for rank in (0, 1):
        entries = _manifest(1, "engine-x", sc, 3, f"node-x{rank}", rank, "engine-x")
        paths.append(str(write_capture(root / f"engine-x-rank{rank}.capture",
                                       [r for r in records if r.rank == rank], entries,
                                       validated=True)))
    hit = first_divergence(paths)
    assert hit is not None and (hit["step"], hit["site"]) == (5, "async_output"), hit
    assert "async_output sampled_token_ids_cpu[1, 1] = 5 on rank 0" in divergence_text(hit), hit
    assert "9 on rank 1" in divergence_text(hit), hit


def test_the_records_of_a_site_not_installed_are_counted_as_their_batches_hold(
        plugin_captures: dict[str, Path], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    """A capture of a plugin's site this install does not know (three records in one batch),
    its ``.idx`` entry forged to claim 40 records of steps 0..900: ``inspect`` said "(and 40
    of sites not known to this install)" and every replay "not judged: 40 record(s) of site
    'toy_gather'", from the entry alone (T83b checked the entries of known sites only, and no
    batch of an unknown site is read). Its entries are checked against their batches as they
    are counted: one line naming the entry, what it claims and what the batch holds."""
    import shutil

    from test_round2 import run_cli

    capture = tmp_path / "only.capture"
    shutil.copytree(plugin_captures["only"], capture)
    index = next(capture.glob("toy_gather*.idx"))
    entries = np.fromfile(index, dtype=ENTRY, offset=len(MAGIC))
    entries[0]["rows"], entries[0]["step_max"] = 40, 900
    index.write_bytes(MAGIC + entries.tobytes())
    for command in ("inspect", "replay"):
        code, _, err = run_cli(capsys, command, capture)
        assert code == 2, (command, err)
        assert "index entry 0 claims 40 record(s) of steps 0..900, but the segment holds 3 " \
            "record(s) of steps 0..2 there" in err, err


def test_redact_says_it_dropped_the_records_of_a_site_not_installed(
        plugin_captures: dict[str, Path], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    """``redact`` of a capture holding three records of a plugin's site this install does not
    know, beside an embedding record: the redacted capture held the embedding record alone,
    and the line and its manifest's ``redaction.dropped`` said nothing of the three (only
    ``notes``): records lost in silence. They go (which of their fields hold token ids is
    not known here), named with their count where the dropped fields are."""
    import json

    from test_round2 import run_cli

    out = tmp_path / "shared.capture"
    code, said, err = run_cli(capsys, "redact", plugin_captures["both"], "-o", out)
    assert code == 0, err
    dropped = "3 record(s) of site 'toy_gather' (not known to this install)"
    assert dropped in said, said
    assert dropped in json.loads((out / "manifest.json").read_text())["redaction"]["dropped"]


def test_copied_segments_stretched_over_a_hole_are_not_read_whole(tmp_path: Path) -> None:
    """Two segments of one site and rank with the same batch table (a copy), whose last
    ``.idx`` entry is stretched by 512 MiB over a hole (4 KiB stored each): opening the
    capture (every command) digests both to find the copy, and each entry's whole length was
    read (1.66 GB resident, 6.6 s of CPU) past T92c, which checked the header first only
    where a batch is read. The copy check reads each batch as a reader does, its header
    first: the entry is refused in one line before the hole is read."""
    import shutil

    import forensics

    capture, segment, entries = _capture(tmp_path)
    index = segment.with_name(segment.name + ".idx")
    entries[-1]["length"] += 512 << 20
    index.write_bytes(MAGIC + entries.tobytes())
    size = int(entries[-1]["offset"] + entries[-1]["length"])
    os.truncate(segment, size)
    copy = segment.with_name(segment.name.replace(".0000.", ".0001."))
    with open(segment, "rb") as source, open(copy, "wb") as target:
        target.write(source.read(4096))
        target.truncate(size)
    shutil.copy(index, copy.with_name(copy.name + ".idx"))

    def load() -> None:
        with pytest.raises(CaptureFormatError,
                           match=f"batch {len(entries) - 1} at byte \\d+ does not match"):
            forensics.load(capture)

    assert peak_growth(load) < 16 << 20


def test_events_written_again_past_the_readers_caps_name_no_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture written again (``shrink``, ``redact``: its events the input's, non-ASCII
    text escaped to three times its bytes) whose events pass what a reader opens (64 MiB;
    here made 64 KiB): the line named "events file '/proc/self/fd/3/.OUT.tmp-N/
    events-w0.jsonl' is full", a file the user never saw, and told a probe's fix (fewer
    kernel steps). It says the events of the capture being written are full, and to keep
    fewer events in the input capture or shorten their text; nothing is left."""
    from forensics.store import guarded
    from forensics.store.events import EventsFullError

    monkeypatch.setitem(guarded.LIMITS, "events file", 64 << 10)
    events = [{"kind": "note", "step": 1, "rank": 0, "message": "\U0001f600" * 1000}] * 20
    with pytest.raises(EventsFullError) as raised:
        write_capture(tmp_path / "again.capture", [], events=events)
    said = str(raised.value)
    assert "/proc/" not in said and ".tmp-" not in said, said
    assert said.startswith("the events of the capture being written (shrink, redact"), said
    assert "keep fewer events in the input capture, or shorten their text" in said, said
    assert list(tmp_path.iterdir()) == []
