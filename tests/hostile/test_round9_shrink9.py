"""Hostile input, round 9 (issue 38, "Hostile input, round 3"): ``shrink``, ``redact``,
``summary`` and ``findings`` against a hostile capture author.

T44a: the round-8 chain (every step needed while it keeps all its records) was left whole by
``shrink`` past about 32 steps: ddmin over its steps could drop none, and ddmin over its
records spent its budget before it dropped any. The records that witness the evidence are
now replayed alone when all the records of their steps do not keep it: the chain keeps 3.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_round4_kernels import KERNEL, MODULE, launch
from test_round8_shrink import chain

import forensics
from forensics.cli import main
from forensics.outcome import Outcome
from forensics.records import Record
from forensics.share.evidence import differences, evidence_of
from forensics.share.shrinking import shrink
from forensics.store.writer import write_capture
from tests.conftest import DATA


def _same(a: object, b: object) -> bool:
    return not differences(evidence_of(forensics.replay(a), crash=True),
                           evidence_of(forensics.replay(b), crash=True))


# ------------------------------------------------------------------ T44a: the witnesses alone

@pytest.mark.parametrize("steps", [33, 64])
def test_a_chain_of_needed_steps_shrinks_to_its_witness_records(tmp_path: Path,
                                                                steps: int) -> None:
    """Measured before (CPU): 32 steps 15.7 s kept 94 of 96 records, 64 steps 22.4 s kept
    192 of 192 (the search stopped at its budget); now 3 records, the search complete, and
    the records replayed in all fewer than the capture holds (11,997 and 24,564 before)."""
    source = write_capture(tmp_path / "chain.capture", chain(steps))
    result = shrink(source, tmp_path / "small.capture")
    assert result.complete and result.records_kept == 3, result
    assert result.records_replayed < result.records_before
    assert _same(source, result.path)
    kept = list(forensics.load(result.path))
    for drop in range(len(kept)):  # 1-minimal: each kept record is needed
        assert not _same(kept, kept[:drop] + kept[drop + 1:]), drop


def test_shrinking_the_chain_costs_a_few_replays_of_it(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """64 steps: the whole shrink (reference replay, search, write, verify) replays under 8
    times the records of the capture (128 times before: 24,564 records of 192 in the search
    alone, 22.4 s of CPU). Records replayed, not seconds: the same count on any load."""
    import forensics.replaying

    source = write_capture(tmp_path / "chain.capture", chain(64))
    replayed: list[int] = []
    real = forensics.replaying.replay

    def counted(*args: object, **kwargs: object) -> object:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        replayed.append(len(result.records))
        return result

    monkeypatch.setattr(forensics.replaying, "replay", counted)
    shrink(source, tmp_path / "small.capture")
    assert replayed[0] == 192 and sum(replayed) < 8 * 192, replayed


# ------------------------------------------------------------------ the capture's events

def _with_kernel_events(tmp_path: Path) -> Path:
    """A copy of the bundled vocab-sentinel incident with a ``kernel_launch`` and a
    ``kernel_summary`` event of the flight recorder in its events file."""
    source = tmp_path / "kernels.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", source)
    with (source / "events-w0.jsonl").open("a") as out:
        out.write(json.dumps(launch(14)) + "\n")
        out.write(json.dumps({"kind": "kernel_summary", "step": 14, "rank": 0,
                              "kernels_seen": {f"{MODULE}.{KERNEL}": 1},
                              "graph_only": []}) + "\n")
    return source


def _without_process(events: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "process"} for e in events]


def test_shrink_keeps_the_kernel_launches(tmp_path: Path) -> None:
    """T44b: ``shrink`` wrote the timeline events only: the flight recorder's launches were
    lost without a word (``forensics kernels`` on the result: "holds no kernel_launch
    event"). They are kept, as every other event."""
    source = _with_kernel_events(tmp_path)
    result = shrink(source, tmp_path / "small.capture")
    assert result.records_kept < result.records_before
    kept = forensics.load(result.path).kernel_events
    assert _without_process(kept) == _without_process(forensics.load(source).kernel_events)
    assert [e["kind"] for e in kept] == ["kernel_launch", "kernel_summary"]


def test_redact_names_the_kernel_launches_it_drops(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """T44c: ``redact`` dropped the flight recorder's events (their tensors hold token ids)
    and its line of what it dropped did not say so; it does, and so does the manifest."""
    source = _with_kernel_events(tmp_path)
    out = tmp_path / "shared.capture"
    assert main(["redact", str(source), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "kernel_launch events" in printed and "kernel_summary events" in printed
    assert not forensics.load(out).kernel_events
    dropped = forensics.load(out).manifest["redaction"]["dropped"]
    assert {"kernel_launch events", "kernel_summary events"} <= set(dropped)


def test_the_redacted_manifest_names_what_went_from_the_events(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T44d: the manifest's ``redaction.dropped`` was written before the records and events
    were redacted: it lacked what went from them (an event's ``host`` and ``source``)
    while the command's line named them. It is written again at the end: the
    two lists are the same."""
    source = tmp_path / "private.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", source)
    with (source / "events-w0.jsonl").open("a") as out:
        out.write(json.dumps({"kind": "cuda_assert", "step": 14, "rank": 0,
                              "host": "alice-box", "source": "/home/alice/x"}) + "\n")
    out = tmp_path / "shared.capture"
    assert main(["redact", str(source), "-o", str(out)]) == 0
    printed = capsys.readouterr().out.strip()
    dropped = forensics.load(out).manifest["redaction"]["dropped"]
    assert {"events.host", "events.source"} <= set(dropped)
    assert f"dropped: {', '.join(dropped)} (" in printed


def _two_processes(tmp_path: Path, first: str, second: str) -> Path:
    """The bundled vocab-sentinel incident written by two processes: ``first`` started and
    died without the probe's stop, ``second`` started and stopped (its stop read after)."""
    source = tmp_path / "two.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", source)
    (source / "events-w0.jsonl").unlink()
    start, stop = {"kind": "probe_start", "step": 0}, {"kind": "probe_stop", "step": 14}
    (source / f"events-{first}.jsonl").write_text(json.dumps(start) + "\n")
    (source / f"events-{second}.jsonl").write_text(
        json.dumps(start) + "\n" + json.dumps(stop) + "\n")
    return source


def test_redact_keeps_apart_the_processes_that_wrote_events(tmp_path: Path) -> None:
    """T44e: ``redact`` dropped each event's ``process`` (a host and pid): every event became
    the one process's of the capture written again, so the stop of one process hid the
    death of another, and the capture was refused ("crash verdict: expected 'explained', got
    'no crash'", exit 1). Each process is a pseudonym ``process-<n>`` now: the death reads
    the same, and no host or pid is written."""
    source = _two_processes(tmp_path, "hosta-101", "hostb-202")
    out = tmp_path / "shared.capture"
    assert main(["redact", str(source), "-o", str(out)]) == 0
    events = forensics.load(out).events
    assert [(e["process"], e["kind"]) for e in events] == [
        ("process-0", "probe_start"), ("process-1", "probe_start"), ("process-1", "probe_stop")]
    assert _same(source, out)
    text = "".join(f.read_text(errors="replace") for f in out.iterdir() if f.is_file())
    assert "hosta" not in text and "hostb" not in text and "101" not in text


# ------------------------------------------------------------------ a replay that raises

class _Raising:
    """``upstream``, except that the embedding of step 7 raises (as real code may on a
    record: not an IndexError, so an ``error`` outcome)."""

    name = "raising"

    def __init__(self) -> None:
        from forensics.variants.models import UpstreamVariant

        self.upstream = UpstreamVariant()

    def run(self, record: Record) -> Outcome:
        if record.site == "embedding" and record.step == 7:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return self.upstream.run(record)


def test_a_capture_whose_replay_raises_is_shrunk_to_the_record_that_raises(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """T44f: a replay whose only evidence is a site that raised (verdict ``error``, no
    finding) was refused: "has no finding ...: there is no evidence to keep". It is evidence:
    the capture shrinks to one record a site, the raising one among them, same verdicts."""
    from forensics.variants import registry

    monkeypatch.setitem(registry._entries, "raising", _Raising)
    source = DATA / "clean.capture"
    result = shrink(source, tmp_path / "small.capture", ["raising"])
    assert result.evidence.verdicts["raising"]["embedding"] == "error"
    assert result.steps_kept == [7] and result.records_kept == 4
    assert not differences(evidence_of(forensics.replay(source, variants=["raising"])),
                           evidence_of(forensics.replay(result.path, variants=["raising"])))


def test_a_shrunk_capture_shrunk_again_keeps_what_was_done_first(tmp_path: Path) -> None:
    """T44g: the manifest's ``shrink`` entry of a capture shrunk again replaced the first
    one: the size of the capture it came from was lost. The first stays, as ``before``."""
    source = write_capture(tmp_path / "chain.capture", chain(12))
    once = shrink(source, tmp_path / "once.capture")
    twice = shrink(once.path, tmp_path / "twice.capture")
    entry = forensics.load(twice.path).manifest["shrink"]
    assert entry["records_before"] == once.records_kept
    assert entry["before"]["records_before"] == 36 == once.records_before
    assert entry["before"]["steps_kept"] == once.steps_kept
