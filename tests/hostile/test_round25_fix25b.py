"""Round 25 of hostile input, fix 25b: round 24's leftovers: a guard event that contradicts its
own bound, a sentinel inside padded embedding rows, byte-identical segments of two processes,
interleaved EngineDeadError reports, and the probe's tags across hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli

# ------------------------------ T157a: a guard event whose value is inside its own bound


def _self_contradicting(tmp_path: Path, value: int = 2, bound: int = 4) -> Path:
    """A simulated clean capture whose guard_violation names prev_positions = ``value`` at
    batch_change with bound ``bound`` (2 inside [0, 4): an event that contradicts itself)."""
    capture = tmp_path / "forged.capture"
    code = __import__("forensics.cli", fromlist=["main"]).main(
        ["simulate", "clean", "-o", str(capture), "--steps", "6"])
    assert code == 0
    message = (f"forensics guard: site 'batch_change' step 4 rank 0 row 3: prev_positions value "
               f"{value} is outside [0, {bound}) (bound {bound})")
    events = [{"kind": "probe_start", "process": "w0", "pid": 5, "rank": 0, "step": 0},
              {"kind": "guard_violation", "process": "w0", "pid": 5, "rank": 0, "step": 4,
               "site": "batch_change", "row": 3, "tensor": "prev_positions", "value": value,
               "bound": bound, "message": message}]
    (capture / "events-w0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return capture


def test_a_guard_event_inside_its_own_bound_is_not_relayed_as_a_violation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A guard_violation naming prev_positions = 2 with bound 4 (2 is inside [0, 4)) was titled
    "its guard_violation event names prev_positions = 2 out of range at batch_change", and the
    next step said the guard already raised. It is said to be inside its own bound, naming no
    value out of range (not judged); the next step asks for guard mode; findings name none."""
    capture = _self_contradicting(tmp_path)
    code, out, err = run_cli(capsys, "summary", capture)
    assert code == 0, err
    said = " ".join(out.split())
    assert "out of range at batch_change" not in said, said
    assert ("though its guard_violation event's prev_positions = 2 at batch_change is inside its "
            "own bound 4: it names no value out of range (not judged)") in said, said
    assert "guard already raised" not in said
    assert "rerun with the probe in guard mode" in said
    code, out, err = run_cli(capsys, "summary", capture, "--format", "json")
    assert code == 0, err
    assert "inside its own bound 4" in json.loads(out)["guard_claim"]
    code, out, err = run_cli(capsys, "findings", capture)
    assert code == 0, err
    assert "prev_positions" not in out


def test_guard_events_inside_and_outside_their_bounds_are_counted_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Beside a guard event that names a value outside its bound (9, bound 8), two that
    contradict their own are counted apart: the claim is the first's alone."""
    capture = _self_contradicting(tmp_path)
    events = capture / "events-w0.jsonl"
    lines = events.read_text().splitlines()
    forged = json.loads(lines[1])
    twin = {**forged, "step": 5, "value": 1}
    honest = {**forged, "step": 3, "value": 9, "bound": 8}
    events.write_text("\n".join([*lines, json.dumps(twin), json.dumps(honest)]) + "\n")
    code, out, err = run_cli(capsys, "summary", capture)
    assert code == 0, err
    said = " ".join(out.split())
    assert ("its guard_violation event names prev_positions = 9 out of range at batch_change; "
            "its 2 guard events whose values are inside their own bounds name no value out of "
            "range (not judged), the first prev_positions = 2 at batch_change (bound 4)") in said
    assert "guard already raised" in said


# ------------------------------ T157b: the vocab_size sentinel inside padded embedding rows


def _padded(tmp_path: Path, capsys: pytest.CaptureFixture[str], vocab: int) -> Path:
    """A capture of one embedding record of 1,000 rows read at ids 11, 900 and 7, its manifest
    naming a vocabulary of ``vocab``."""
    import torch

    dump = tmp_path / "d.pt"
    torch.save([{"site": "embedding", "step": 13, "num_embeddings": 1000,
                 "input_ids": torch.tensor([11, 900, 7], dtype=torch.int64)}], dump)
    capture = tmp_path / f"d{vocab}.capture"
    code, _, err = run_cli(capsys, "import", dump, "-o", capture, "--set",
                           f"model.vocab_size={vocab}")
    assert code == 0, err
    return capture


def test_the_sentinel_inside_padded_rows_is_a_wrong_input_not_a_crash(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A vocabulary of 900 padded to 1,000 embedding rows, read at id 900 (the vocab_size
    rejection sentinel, in range of the rows): nothing was found, and the known issues said
    "the capture shows no failure to report". vLLM reads the padded row (zeros): a wrong input,
    not a crash; replay and summary say so."""
    capture = _padded(tmp_path, capsys, 900)
    code, out, err = run_cli(capsys, "replay", capture)
    assert code == 0, err
    said = " ".join(out.split())
    assert ("the embedding received id 900 at input_ids[1], the vocab_size rejection sentinel of "
            "the manifest's vocabulary of 900, inside its 1000 rows: it read a padded row, which "
            "no token has (vLLM fills it with zeros): a wrong input, silently, not a crash"
            ) in said, said
    assert "fed silently: 1 slot(s)" in out
    code, out, err = run_cli(capsys, "summary", capture)
    assert code == 0, err
    said = " ".join(out.split())
    assert "no failure to report" not in said, said
    assert "the embedding read 1 id(s) in padded rows past the vocabulary" in said


@pytest.mark.parametrize("vocab", [800, 1000])
def test_an_id_past_the_vocabulary_in_padded_rows_is_said_and_one_of_it_is_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], vocab: int) -> None:
    """Id 900 of a vocabulary of 800 (1,000 rows) is past the vocabulary, in a padded row; of a
    vocabulary of the rows' size it is a token, said nowhere."""
    code, out, err = run_cli(capsys, "replay", _padded(tmp_path, capsys, vocab), "--json")
    assert code == 0, err
    slots = json.loads(out)["silent_inputs"]
    if vocab == 1000:
        assert slots == []
        return
    assert [(s["fed"], s["element"], s["vocab_size"], s["rows"]) for s in slots] == [
        (900, 1, 800, 1000)]


# ------------------------------ T157c: two processes' byte-identical segments are no copy


def _two_processes(tmp_path: Path) -> Path:
    """A capture of two processes, w0 and w1, each writing the same embedding record of step 1
    rank 0: segments of byte-identical batches (their headers name their processes)."""
    import numpy as np

    from forensics.records import Record
    from forensics.store.writer import CaptureWriter, write_capture

    record = Record("embedding", 1, 0, {"input_ids": np.array([5, 6, 7], np.int64),
                                        "num_embeddings": 32000})
    path = write_capture(tmp_path / "two.capture", [record])
    with CaptureWriter(path, process="w1") as writer:
        writer.append(record)
    return path


def test_two_processes_byte_identical_segments_are_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two processes that wrote the same records (the same bytes) made `summary` refuse the
    capture: "segments ... hold the same batches (a copied file would count every record
    twice); delete the copy". Each process's segment is its own: both are read."""
    capture = _two_processes(tmp_path)
    code, out, err = run_cli(capsys, "summary", capture, "--format", "text")
    assert code == 0, err
    assert "same batches" not in err
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 0, err


def test_a_copy_of_a_segment_is_still_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A segment copied as its own process's next one is refused as before, one line naming
    both files, exit 2; one linked under another process's name is refused as it is opened
    (its header names its process)."""
    import os
    import shutil

    capture = _two_processes(tmp_path)
    first, second = sorted(capture.glob("*.arrows"))
    second.unlink()
    os.link(first, second)
    code, _, err = run_cli(capsys, "summary", capture)
    assert code == 2
    assert "schema says site 'embedding' rank 0 process 'w0'; the file name disagrees" in err
    second.unlink()
    copy = capture / first.name.replace(".0000.", ".0001.")
    shutil.move(f"{second}.idx", f"{copy}.idx")
    copy.write_bytes(first.read_bytes())
    code, _, err = run_cli(capsys, "summary", capture)
    assert code == 2
    assert f"segments '{first.name}' and '{copy.name}'" in err and "same batches" in err, err
    assert len(err.strip().splitlines()) == 1, err


# ------------------------------ T157d: two API servers' EngineDeadError reports interleaved


def test_two_servers_reports_interleaved_are_both_counted(tmp_path: Path) -> None:
    """Two engines' worker tracebacks, then their API servers' EngineDeadError reports, the
    second server's chain opened before the first's and read after it: the first report joined
    the second's chain while it was open, and went when that chain joined its crash (one
    report counted of two). Every report is counted, as when written one after the other."""
    from test_round24_attack24a import REPORT, WORKER

    from forensics.importers import read_source
    from forensics.importers.tracebacks import death_lines

    one, two = ([f"(EngineCore_DP{r} pid={100 + r}) ERROR 12-02 10:46:44 [core.py:9] {line}"
                 for line in WORKER] for r in (0, 1))
    first, second = ([f"(APIServer pid={r}) ERROR 12-02 10:46:45 [serving_chat.py:1] {line}"
                      for line in REPORT] for r in (1, 2))
    mixed = [x for pair in zip(one, two, strict=True) for x in pair]
    for lines in ([*mixed, second[0], first[0], *first[1:], *second[1:]],
                  [*mixed, second[0], first[0], *first[1:], first[0], *first[1:],
                   *second[1:]]):
        log = tmp_path / "engine.log"
        log.write_text("\n".join(lines) + "\n")
        events = read_source(log).events
        reports = sum(lines.count(x) for x in (first[0], second[0]))
        assert [e["kind"] for e in events] == ["illegal_memory_access"] * 2, events
        assert sum(e.get("engine_dead", {}).get("count", 1) for e in events
                   if "engine_dead" in e) == reports, events
        assert death_lines(events[-1]) == f"{reports} lines report a death (lines, not deaths)"


# ------------------------------ T157e: the probe's tags in a folder shared across hosts


class _Folder:
    """A stand-in session whose capture folder is held open as ``fd``."""

    def __init__(self, path: Path) -> None:
        import os

        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)

    def folder(self) -> _Folder:
        return self


def test_two_hosts_tags_that_read_alike_are_two_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Host ``vm``'s second session of pid 4242 took ``vm-2-4242`` and wrote nothing yet; host
    ``vm-2``'s pid 4242 then took ``vm-2-4242`` too (one events file for both). A tag is claimed
    by making its events file new, so the second takes another; and two that list the folder
    before either claims (a stale listing) still take two tags."""
    from forensics.probe import tags

    folder = tmp_path / "c.capture"
    folder.mkdir()
    (folder / "events-vm-4242.jsonl").write_text("")  # host vm's first session
    session = _Folder(folder)
    monkeypatch.setattr(tags, "process_tag", lambda: "vm-4242")
    second = tags.unclaimed(session)
    monkeypatch.setattr(tags, "process_tag", lambda: "vm-2-4242")
    other = tags.unclaimed(session)
    assert second == "vm-2-4242" and other != second, (second, other)
    assert (folder / f"events-{other}.jsonl").exists()
    monkeypatch.setattr(tags, "_taken", lambda names: set())  # both listed an empty folder
    monkeypatch.setattr(tags, "process_tag", lambda: "vm-4242")
    third = tags.unclaimed(session)
    assert third not in ("vm-4242", second, other), third
    assert len({path.name for path in folder.iterdir()}) == 4
    tags.let_go(session, session.fd)  # the last claim, still empty, goes as the session ends
    assert not (folder / f"events-{third}.jsonl").exists()
    assert (folder / f"events-{other}.jsonl").exists()
