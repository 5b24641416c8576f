"""Round 14, attack B: the probe, the diff variant's name, a triage's pieces and processes.

- The probe appended events without bound, and every reader refuses a capture whose events
  file passes 64 MiB (or whose events pass 200,000): a flight recorder with
  ``FORENSICS_KERNELS_KEEP=all`` (launches of up to 900 KB each) or a long run of guard
  findings made the whole capture, records and all, one that no command opens (T69a).
- A diff variant was named by one read of the diff and built from another (T69b).
- A triage's step ranges covered the steps the capture held when cut, whatever it held when
  they ran (T69c).
- The probe's writer process and a triage's pool processes imported from the working
  directory (T69d, T69e).
- A relative ``FORENSICS_DIR`` split one engine's capture in two (T69f).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from forensics.errors import CaptureFormatError
from forensics.probe.writer_process import WriterChild
from forensics.store.events import EventLog, EventsFullError
from forensics.store.guarded import LIMITS
from forensics.store.paths import WRITTEN_AGAIN
from forensics.store.reader import load
from forensics.store.writer import CaptureWriter

#: a kernel launch's event as large as the flight recorder writes one (about 900 KB)
BIG = 900_000


def _launch(step: int) -> dict[str, object]:
    return {"kind": "kernel_launch", "step": step, "rank": 0, "pad": "A" * BIG}


def test_a_probes_events_past_a_readers_caps_keep_the_capture_readable(tmp_path: Path) -> None:
    capture = tmp_path / "engine.capture"
    writer = CaptureWriter(capture, {"creator": "forensics.probe"}, process="host-7")
    child = WriterChild(memoryview(bytearray(64)), writer, -1, 7, {})
    child.add_event({"kind": "probe_start", "step": 0, "rank": 0})
    launches = LIMITS["events file"] // BIG + 8  # past the events file's 64 MiB
    for step in range(launches):
        child.add_event(_launch(step))
    child.add_event({"kind": "engine_exception", "step": launches, "rank": 0,
                     "error": "RuntimeError: CUDA error: device-side assert triggered"})
    child.add_event({"kind": "probe_stop", "step": launches, "rank": 0})
    writer.close()
    opened = load(capture)  # it was refused whole: "is N bytes; at most 67108864"
    events = sorted([*opened.events, *opened.kernel_events], key=lambda e: e["step"])
    kinds = [event["kind"] for event in events]
    assert kinds[0] == "probe_start" and kinds[-2:] == ["engine_exception", "probe_stop"]
    kept = kinds.count("kernel_launch")
    assert 0 < kept < launches
    assert events[-1]["events_dropped"] == launches - kept  # the stop says what went
    assert child.counts["errors"] == 0  # no probe_error per dropped event


def test_a_capture_written_again_past_the_caps_is_one_line(tmp_path: Path) -> None:
    log = EventLog(tmp_path, WRITTEN_AGAIN)
    with pytest.raises(CaptureFormatError) as caught:
        for step in range(LIMITS["events file"] // BIG + 8):
            log.append(_launch(step))
    log.close()
    message = str(caught.value)
    assert "\n" not in message and "the events of the capture being written" in message \
        and "at most" in message  # the file is the temporary build's: the capture is named
    assert log.dropped == 0  # a command's output is refused, never silently thinned


def _kept(folder: Path, process: str, runs: tuple[int, ...]) -> int:
    """The launches an events file keeps when ``runs`` writers append that many in turn."""
    step = 0
    for count in runs:
        log = EventLog(folder, process)
        for _ in range(count):
            with contextlib.suppress(EventsFullError):
                log.append(_launch(step))
            step += 1
        log.close()
    return (folder / f"events-{process}.jsonl").read_bytes().count(b"kernel_launch")


def test_a_reopened_events_file_counts_what_it_holds(tmp_path: Path) -> None:
    alone = _kept(tmp_path, "host-8", (100,))
    assert 0 < alone < 100
    assert _kept(tmp_path, "host-9", (40, 60)) == alone  # the second writer counted the first's


# -- T69b: a diff's shared name is the digest of the code that runs --------------------------

PATCHES = Path(__file__).resolve().parents[2] / "data" / "patches"


def test_a_diff_changed_after_it_was_named_is_refused(tmp_path: Path) -> None:
    from forensics.errors import PatchApplyError
    from forensics.variants import diffs_named, registry, shared_diffs

    diff = tmp_path / "fix.diff"
    diff.write_bytes((PATCHES / "vocab-guard.diff").read_bytes())
    names, diffs = shared_diffs([f"vllm+{diff}"])
    with diffs_named(diffs):
        assert registry.create(names[0]).name == names[0]  # unchanged: built, so named
    diff.write_bytes((PATCHES / "stale-prev-rows.diff").read_bytes())  # edited meanwhile
    with diffs_named(diffs), pytest.raises(PatchApplyError) as caught:
        registry.create(names[0])  # was built, named by the old digest, running the new code
    message = str(caught.value)
    assert "\n" not in message and "changed after it was named" in message
    assert names[0] in message and shared_diffs([f"vllm+{diff}"])[0][0] in message


# -- T69c: a capture cut into step ranges is checked by each range ---------------------------

def _simulated(path: Path, steps: int, seed: int) -> Path:
    from forensics.cli import main

    assert main(["simulate", "vocab-sentinel", "-o", str(path), "--steps", str(steps),
                 "--seed", str(seed)]) == 0
    return path


def test_a_capture_replaced_after_the_triage_cut_it_is_its_error_row(tmp_path: Path) -> None:
    import os

    from forensics.fleet.runners import run_local
    from forensics.fleet.tasks import plan
    from forensics.fleet.triage import decoded, merged

    capture = _simulated(tmp_path / "x.capture", 300, 0)  # 1,200 records: two ranges
    newer = _simulated(tmp_path / "newer.capture", 900, 3)  # 3,600 records
    tasks = plan([capture], 1_000)
    assert len(tasks) == 2
    os.rename(capture, tmp_path / "old.capture")
    os.rename(newer, capture)  # `simulate --force`, `shrink --force`: replaced whole
    rows = merged(tasks, decoded(tasks, run_local(tasks, workers=1)))
    # the row said 1,200 records and 32 findings of a capture of 3,600 and 97: steps
    # 301-900 were in no range
    assert len(rows) == 1 and rows[0]["conclusion"] == "unreadable", rows
    error = rows[0]["error"]
    assert "changed while the triage ran" in error and "1200 records" in error
    assert "3600 over steps 1-900" in error and "\n" not in error


def test_a_capture_still_written_after_the_triage_cut_it_is_its_error_row(
        tmp_path: Path) -> None:
    from forensics.fleet.piece import replay_piece
    from forensics.fleet.tasks import plan
    from forensics.fleet.triage import decoded, merged

    capture = _simulated(tmp_path / "x.capture", 300, 0)
    tasks = plan([capture], 1_000)
    later = load(_simulated(tmp_path / "later.capture", 400, 1))
    writer = CaptureWriter(capture, process="host-2")  # the engine goes on writing
    writer.extend([r for r in later.records() if r.step > 300])
    writer.close()
    results = [replay_piece(t.path, t.start, t.stop, t.window, planned=t.planned)
               for t in tasks]
    rows = merged(tasks, decoded(tasks, results))
    assert "changed while the triage ran" in rows[0]["error"], rows


# -- T69d: the probe's writer process imports nothing from the engine's working directory ----

PLANTED = """import os, pathlib
pathlib.Path(os.environ["PLANTED_MARK"]).write_text("ran")
raise SystemExit(9)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("module", ["argparse.py", "forensics/__init__.py"])
def test_the_writer_process_runs_no_module_planted_where_the_engine_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """An engine started in a shared folder (``/tmp``, a project checkout others write to):
    ``python -m`` put that folder first on the writer process's path, so a planted
    ``argparse.py`` (or ``forensics/``) ran there with the engine's rights."""
    import os

    from forensics.probe.channel import WriterChannel

    cwd, capture = tmp_path / "shared", tmp_path / "c.capture"
    (cwd / module).parent.mkdir(parents=True, exist_ok=True)
    (cwd / module).write_text(PLANTED)
    capture.mkdir()
    mark = tmp_path / "planted-ran"
    monkeypatch.setenv("PLANTED_MARK", str(mark))
    monkeypatch.chdir(cwd)
    channel = WriterChannel(size=1 << 16)
    folder = os.open(capture, os.O_RDONLY | os.O_DIRECTORY)
    try:
        channel.start(folder, "host-3", {"creator": "forensics.probe"})
        assert channel.proc is not None and channel.proc.stdin is not None
        channel.proc.stdin.close()  # no poke: the writer process ends
        code = channel.proc.wait(60)
    finally:
        os.close(folder)
    assert not mark.exists(), "the planted module ran in the writer process"
    assert code == 0


# -- T69e: a triage's processes import nothing from the folder it was run in -----------------

@pytest.mark.timeout(300)
def test_a_triage_run_in_a_shared_folder_runs_no_module_planted_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cd /shared/captures && forensics triage .``: each pool process starts as ``python -c
    'from multiprocessing.spawn import ...'``, which put the folder first on its path: a
    ``multiprocessing/`` planted beside the captures ran with the user's rights."""
    from forensics.cli import main

    shared = tmp_path / "captures"
    _simulated(shared / "one.capture", 3, 0)
    (shared / "multiprocessing").mkdir()
    (shared / "multiprocessing" / "__init__.py").write_text(PLANTED)
    mark = tmp_path / "planted-ran"
    monkeypatch.setenv("PLANTED_MARK", str(mark))
    monkeypatch.chdir(shared)
    assert main(["triage", ".", "--workers", "1", "--format", "json"]) == 0
    assert not mark.exists(), "the planted module ran in a triage process"


# -- T69f: a relative FORENSICS_DIR names one folder for every process of the engine ---------

def test_a_relative_capture_directory_is_one_capture_wherever_a_process_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``FORENSICS_DIR=caps vllm serve ...`` with workers that run in another working
    directory (Ray's): the first process passed its capture down as ``caps/NAME.capture``, so
    a worker elsewhere did not find it and made a second capture under its own ``caps/``."""
    from forensics.probe import owned
    from forensics.probe.settings import export, from_env

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    environ = {"FORENSICS_DIR": "caps"}
    monkeypatch.chdir(tmp_path / "a")
    first = from_env(environ)
    assert first is not None
    first = owned.claim(first)
    export(first, environ)
    monkeypatch.chdir(tmp_path / "b")  # a worker of the same engine, elsewhere
    child = from_env(environ)
    assert child is not None
    with caplog.at_level("WARNING", logger="forensics.probe"):
        joined = owned.claim(child)
    assert "not joined" not in caplog.text
    assert joined.capture == first.capture == tmp_path / "a" / "caps" / first.capture.name
    assert not (tmp_path / "b" / "caps").exists()
