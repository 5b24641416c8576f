"""Round 17's fix17 (issue 38): a segment truncated in the moment between the reader's check
and its read, under every command that reads a capture and under a triage's workers (T92a,
T92b of docs/threat-model.md; T84d made the triage's plan and stitch read so)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from segment_cut import run_cut

DATA = Path(__file__).resolve().parents[2] / "data"
SEGMENT = "embedding.r0.w0.0000.arrows"

#: each command that reads a capture, and what else it is given (paths in its folder)
COMMANDS = {"replay": [], "inspect": [], "report": ["-o", "out.html"], "findings": [],
            "summary": [], "shrink": ["-o", "small.capture"],
            "redact": ["-o", "shareable.capture"]}


def _copied(name: str, folder: Path, as_name: str | None = None) -> Path:
    """A copy of the bundled capture ``name`` in ``folder`` (named ``as_name``)."""
    target = folder / f"{as_name or name}.capture"
    shutil.copytree(DATA / f"{name}.capture", target)
    return target


@pytest.mark.parametrize(("command", "at"), [
    *((c, "open") for c in COMMANDS), *((c, "batch") for c in COMMANDS if c != "inspect")])
def test_a_segment_cut_under_a_command_is_one_line(command: str, at: str,
                                                   tmp_path: Path) -> None:
    """A segment truncated to nothing just after the check that finds it whole (as the capture
    is opened, or before a batch of it is read) and before the read: the command read it
    through a memory map, and the page past the cut end raised SIGBUS and ended it (exit -7,
    no word said). It reads the segment with ordinary reads into its own memory: exit 2, one
    line naming the segment and its capture, that it was truncated while it was read, and
    to read the capture again once nothing writes to it."""
    capture = _copied("placeholder-leak", tmp_path)
    target = capture / SEGMENT
    done = run_cut([command, str(capture), *COMMANDS[command]], target, at, tmp_path)
    assert target.stat().st_size == 0, (done.returncode, done.stderr[-2000:])  # it was cut
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    said = done.stderr.strip()
    assert "\n" not in said, said
    assert f"'{SEGMENT}' of 'placeholder-leak.capture' was truncated" in said, said
    assert "read the capture again" in said, said


@pytest.mark.parametrize("at", ["open", "batch"])
def test_a_segment_cut_under_a_triage_worker_is_its_row(at: str, tmp_path: Path) -> None:
    """In a triage, one capture's segment cut in its worker process (a spawned process that
    replays it) between the check and the read: the worker died of SIGBUS and its row said
    ``task failed: BrokenProcessPool: its process died (SIGBUS)``. The row says the capture
    changed while the triage ran, naming the segment; the other capture's row is as it is
    without the cut."""
    from forensics.fleet.triage import triage

    folder = tmp_path / "fleet"
    folder.mkdir()
    cut, other = _copied("placeholder-leak", folder, "a"), _copied("stale-prev-row", folder, "b")
    before = {r["name"]: r for r in triage([folder], workers=1).rows}
    done = run_cut(["triage", str(folder), "--workers", "1", "--format", "json"], cut / SEGMENT,
                   at, tmp_path, where="worker")
    assert (cut / SEGMENT).stat().st_size == 0, (done.returncode, done.stderr[-2000:])
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    rows = {r["name"]: r for r in json.loads(done.stdout)["rows"]}
    assert rows[cut.name]["error"].startswith("'a.capture' changed while the triage ran: "), rows
    assert f"'{SEGMENT}' of 'a.capture' was truncated while it was read" in \
        rows[cut.name]["error"], rows
    assert not rows[other.name]["error"], rows
    assert rows[other.name]["conclusion"] == before[other.name]["conclusion"], rows


def test_an_index_entry_stretched_over_a_hole_is_refused_before_the_hole_is_read(
        tmp_path: Path) -> None:
    """A segment's last ``.idx`` entry stretched by 512 MiB over a hole appended to the file
    (12 KiB stored): read into memory (T84d's triage, every command since T92a), the batch's
    whole claimed length was taken and read (512 MiB of zeros held) before its message was
    found shorter. Its header is read first: the entry is refused, naming the batch, before
    its body is read."""
    import os

    import numpy as np
    from test_round4_store import peak_growth

    from forensics.errors import CaptureFormatError
    from forensics.records import Record
    from forensics.store.index import ENTRY, MAGIC
    from forensics.store.reader import load
    from forensics.store.writer import write_capture

    capture = write_capture(tmp_path / "s.capture", [
        Record("embedding", s, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                   "num_embeddings": 10}) for s in range(3)])
    segment = next(capture.glob("*.arrows"))
    index = segment.with_name(segment.name + ".idx")
    entries = np.fromfile(index, dtype=ENTRY, offset=len(MAGIC))
    hole = 512 << 20
    entries[-1]["length"] += hole
    index.write_bytes(MAGIC + entries.tobytes())
    os.truncate(segment, int(entries[-1]["offset"] + entries[-1]["length"]))  # a hole
    opened = load(capture, mapped=False)  # the default since T92a

    def read() -> None:
        with pytest.raises(CaptureFormatError, match=f"batch {len(entries) - 1} at byte "
                                                     r"\d+ does not match the index"):
            list(opened.batches())

    assert peak_growth(read) < 16 << 20
