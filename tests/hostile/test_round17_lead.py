"""Hostile input, round 17 (the lead's): what ``check`` and the pytest plugin vouch for in a
capture that holds recorded kernel launches."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.test_round4_kernels import b64, launch, write_capture

pytest_plugins = ["pytester"]

# ------------------------------------------ T98a: a check's match names the launches it skips


def _launches_only(root: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A capture of one recorded launch whose ``idx_mapping`` holds request slot 7 of 4
    (``forensics kernels`` finds it and exits 1), and the expected.json ``--accept`` wrote."""
    from forensics.cli import main

    capture = write_capture(root / "k.capture", [launch(data=b64(b"\0\0\0\0\7\0\0\0"))])
    assert main(["check", str(capture), "--accept"]) == 0
    assert "not checked: its 1 recorded kernel launch(es)" in capsys.readouterr().err
    return capture


def test_a_check_of_launches_says_it_did_not_check_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``check`` replays a capture's records; no replay judges its recorded kernel launches.
    Of a capture whose one launch breaks the request-slot bound it printed
    "k.capture: matches expected.json" (exit 0). It still matches (expected.json holds the
    records' replay), and the line says the launches were not checked and what judges them."""
    from forensics.cli import main

    capture = _launches_only(tmp_path, capsys)
    assert main(["check", str(capture)]) == 0
    out = capsys.readouterr().out
    assert out.strip() == (
        f"k.capture: matches expected.json in its records; not checked: its 1 recorded kernel "
        f"launch(es) (expected.json holds the records' replay only): `forensics kernels "
        f"{capture}` judges them"), out
    assert main(["check", str(capture), "--json"]) == 0
    assert '"launches_not_checked": 1' in capsys.readouterr().out


def test_the_plugins_pass_of_launches_warns_that_they_were_not_checked(
        tmp_path: Path, pytester: pytest.Pytester,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The pytest plugin's item of that capture passed in silence; it passes (its records
    match) with a warning naming the launches it did not check."""
    capture = _launches_only(tmp_path, capsys)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-o", "forensics_captures=",
                                          "--forensics-captures", str(capture.parent))
    result.assert_outcomes(passed=1, warnings=1)
    assert "not checked: its 1 recorded kernel launch(es)" in "\n".join(result.outlines)


# ------------------------------- T98b: a bad kernel record is named by its events file and line


def test_a_bad_launch_is_named_by_its_events_file_and_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture of two processes' events files whose second file's second launch is of an
    unknown format: ``kernels`` named "kernel_launch event 3" (its rank among all launches),
    which no file of the capture says where to find. The line names the file and its line."""
    import json

    from forensics.cli import main

    bad = {**launch(), "format": 0}
    capture = write_capture(tmp_path / "k.capture", [launch(), launch()])
    (capture / "events-h-2.jsonl").write_text(f"{json.dumps(launch())}\n{json.dumps(bad)}\n")
    assert main(["kernels", str(capture)]) == 2
    err = capsys.readouterr().err
    assert (f"capture '{capture}' events file 'events-h-2.jsonl' line 2, kernel_launch event 3: "
            "field 'format' must be 1") in err, err


# ------------------------------ T98c: a full disk as a process joins its engine's capture folder


@pytest.mark.parametrize("full", ["ENOSPC", "EDQUOT"])
def test_a_full_disk_as_a_process_joins_keeps_the_folder_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        full: str) -> None:
    """A worker joining its engine's capture folder on a full disk (or quota) could not leave
    its join mark: it logged that "the folder was removed as it was joined", which was false
    (the folder is there), and then tried a new folder, which the full disk refused too: the
    worker did not start. It joins the folder without the mark, in one line saying so."""
    import errno
    import logging
    import os

    from forensics.probe import owned
    from forensics.probe.settings import from_env

    first = from_env({"FORENSICS_DIR": str(tmp_path)})
    assert first is not None
    first = owned.claim(first)
    monkeypatch.setattr(owned, "_MADE_HERE", set())  # another process: it joins, not makes
    real_open = os.open

    def full_disk(path: object, *args: object, **kwargs: object) -> int:
        if str(path).startswith(owned.JOINED_MARK):
            raise OSError(getattr(errno, full), os.strerror(getattr(errno, full)))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", full_disk)
    monkeypatch.setattr(os, "mkdir", lambda *a, **k: full_disk(owned.JOINED_MARK))
    with caplog.at_level(logging.WARNING, logger="forensics.probe"):
        joined = owned.claim(first)
    assert joined.capture == first.capture and first.capture.is_dir()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "is joined without its join mark" in lines[0], lines
    assert "removed" not in lines[0].split("(")[0], lines


# -------------------------------- T98d: the writer process's command line shows no manifest


def test_the_writer_processs_command_line_holds_no_manifest(tmp_path: Path) -> None:
    """The probe's writer process took the capture's manifest (model, engine id, host, pid) on
    its command line, which every local user reads (``ps``, ``/proc/PID/cmdline``); it reads
    it from an unnamed file it inherits, and writes it into the capture as before."""
    import json
    import os

    from forensics.probe.channel import WriterChannel, available
    from forensics.probe.owned import open_folder

    assert available()
    folder = tmp_path / "c.capture"
    folder.mkdir(mode=0o700)
    fd = open_folder(folder)
    channel = WriterChannel(1 << 16)
    secret = "model-of-a-secret-name"
    try:
        channel.start(fd, "p1", {"format": 1, "model": {"name": secret}})
        assert channel.proc is not None
        cmdline = b""
        while b"writer_process" not in cmdline and channel.proc.poll() is None:
            cmdline = Path(f"/proc/{channel.proc.pid}/cmdline").read_bytes()  # after its exec
    finally:
        assert channel.close()
        os.close(fd)
    assert secret.encode() not in cmdline and b"--manifest-fd" in cmdline, cmdline
    written = json.loads((folder / "manifest.json").read_text())
    assert written["model"]["name"] == secret, written


# ------------------- T98e: the step a dead process reached is its own, not the capture's last


def _two_processes(root: Path, dead_events: list[dict[str, object]]) -> Path:
    """A capture whose records (steps 0 to 19) process ``h-1`` wrote and stopped, and whose
    process ``h-2`` (no records) has ``dead_events`` after its probe's start, and no stop."""
    import json

    from forensics.store.writer import CaptureWriter
    from forensics.store.writer import write_capture as write_records
    from tests.incident_records import clean_step

    records = [r for step in range(20) for r in clean_step(step, ["a", "b"])]
    capture = write_records(root, [], manifest={"notes": "n"})
    with CaptureWriter(capture, process="h-1") as writer:  # its segments name it
        writer.extend(records)
    stopped = [{"kind": "probe_start", "step": 0}, {"kind": "probe_stop", "step": 19}]
    dead = [{"kind": "probe_start"}, *dead_events]  # no step yet
    for process, events in (("h-1", stopped), ("h-2", dead)):
        (capture / f"events-{process}.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in events))
    return capture


@pytest.mark.parametrize("dead, said", [
    ([{"kind": "engine_exception", "step": 12, "message": "boom"}], "after step 12"),
    ([], "at a step not known (the process that stopped recorded no step)")])
def test_a_dead_process_is_said_to_stop_at_its_own_last_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        dead: list[dict[str, object]], said: str) -> None:
    """Of two processes, the one that recorded every step stopped; the other died at step 12
    (or recorded no step at all). ``replay`` and ``summary`` said the engine stopped "after
    step 19", the capture's last step, which the dead process never reached."""
    from forensics.cli import main

    capture = _two_processes(tmp_path / "two.capture", dead)
    assert main(["replay", str(capture)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"The engine stopped without the probe's stop (killed or crashed) {said}" in out, out
    assert "after step 19" not in out, out
    assert main(["summary", str(capture)]) == 0  # its list of facts names it in words
    written = capsys.readouterr().out
    step = "12" if dead else "unknown"
    assert f"- engine stopped after step: `{step}`" in written, written
    assert "stopped_after" not in written, written


# ------------- T98f: batches that each span every step are decoded once in pipeline order

_HELD = """
import resource, sys
import numpy as np
from forensics.records import Record
from forensics.store.reader import load
from forensics.store.writer import CaptureWriter
path, interleaved = sys.argv[1], sys.argv[2] == "interleaved"
batches, steps = 64, 2048
ids = np.array([1, 2, 3, 4], np.int64)
with CaptureWriter(path, manifest={"notes": "x"}) as writer:
    for outer in range(batches if interleaved else steps):
        for inner in range(steps if interleaved else batches):
            step = inner if interleaved else outer
            writer.append(Record("embedding", step, 0, {"input_ids": ids, "num_embeddings": 10}))
        if interleaved or (outer + 1) * batches % steps == 0:
            writer.flush()
capture = load(path)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
held = list(capture.records(site="embedding"))
assert [r.step for r in held] == sorted(r.step for r in held)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


def test_records_of_batches_spanning_every_step_are_held_as_the_same_records_in_order(
        tmp_path: Path) -> None:
    """A capture of 64 batches that each hold steps 0 to 2047 (a writer's layout no engine
    makes, but any capture author can): reading its records in pipeline order decoded each
    batch again for every 4,096 records, and each record held its whole batch's buffers:
    `replay` of 64 batches of 16,384 steps reached 18 GB before it was killed (a 76 MB
    capture). Each batch is decoded once, and the records take what the same records laid out
    step by step take (peak memory growth within 1.5 times and 24 MB)."""
    import subprocess
    import sys

    grown = {}
    for layout in ("interleaved", "step by step"):
        done = subprocess.run([sys.executable, "-c", _HELD, str(tmp_path / f"{layout}.capture"),
                               layout], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        grown[layout] = int(done.stdout.split()[-1])
    assert grown["interleaved"] < 1.5 * grown["step by step"] + 24_000, grown


def test_records_read_in_pipeline_order_are_those_read_one_by_one(tmp_path: Path) -> None:
    """The records of interleaved batches, read in pipeline order (the batches held once),
    filtered by step and site, are the records read one at a time."""
    import numpy as np

    from forensics.records import Record
    from forensics.store.reader import load
    from forensics.store.writer import CaptureWriter

    with CaptureWriter(tmp_path / "i.capture", manifest={"notes": "x"}) as writer:
        for batch in range(5):
            for step in range(3000):
                ids = np.array([batch, step % 10], np.int64)
                writer.append(Record("embedding", step, 0,
                                     {"input_ids": ids, "num_embeddings": 10_000}))
            writer.flush()
    capture = load(tmp_path / "i.capture")
    for records in (capture.records(site="embedding"), capture.records(steps=range(5, 2900, 7))):
        read = [(r.step, r["input_ids"].tolist()) for r in records]
        one_by_one = [(records[i].step, records[i]["input_ids"].tolist())
                      for i in range(len(records))]
        assert read == one_by_one and len(read) == len(records), read[:3]


# ------------- T98g: triage reads the runner as `known` does: from the sites a capture records


def test_triage_names_the_runner_the_recorded_sites_show_as_known_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A V1 capture whose manifest states no runner (every bundled one): `known` said the
    runner "is v1, not v2" (the sites recorded are V1's own), while the triage row and its
    group heading said "runner unknown" of the same capture."""
    from forensics.cli import main

    assert main(["known", "data/clean.capture"]) in (0, 1)
    assert "runner is v1, not v2" in capsys.readouterr().out
    assert main(["triage", "data/clean.capture", "-o", str(tmp_path / "t.csv")]) in (0, 1)
    out = capsys.readouterr().out
    assert "runner v1," in out and "runner unknown" not in out, out


# ----------- T98h: a forked copy of the engine writes none of its parent's kernel launches


class _Jit:
    """What the recorder reads of a Triton kernel object (a vLLM worker kernel)."""

    @staticmethod
    def fn(ptr, n, BLOCK: int = 4):  # noqa: N803 (a kernel's signature)
        """A kernel's signature."""


_Jit.fn.__module__ = "vllm.v1.worker.gpu.stand_in"


class _Events:
    """A probe session that keeps the events handed to it, in a file (a fork's too)."""

    step, rank = 3, 0

    def __init__(self, path: Path) -> None:
        self.path = path

    def keep_event(self, kind: str, **fields: object) -> None:
        import json
        import os

        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"kind": kind, "pid": os.getpid()}) + "\n")


def test_a_forked_copy_writes_none_of_its_parents_launches(tmp_path: Path) -> None:
    """A pool's worker forked from the engine inherits the recorder's kept launches; when it
    was ended by SIGTERM (or exited through ``atexit``), it wrote them as its own process's
    ``kernel_launch`` events, which `forensics kernels` then reads twice (a loaded CI run once
    read steps 0-3 twice in the sanitizer's tests: one way this happens, not confirmed as
    that run's). The copy drops what it inherited and writes nothing until it launches a
    kernel of its own; the engine writes its launches once."""
    import json
    import os

    import torch

    from forensics.probe import kernels

    events = tmp_path / "events.jsonl"
    recorder = kernels.FlightRecorder(("*",), 2, 64, _Events(events))
    recorder._torch = torch
    pending = recorder.before(recorder.kernel(_Jit()), (torch.arange(4, dtype=torch.int32), 4),
                              {}, (1,))
    recorder.after(pending)
    kernels.RECORDER = recorder
    try:
        child = os.fork()
        if child == 0:  # the copy: dump as a SIGTERM would, then leave at once
            os._exit(kernels.dump("signal SIGTERM"))
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0  # it wrote no launch
        assert kernels.dump("the probe closed") == 1
    finally:
        kernels.RECORDER = None
    written = [json.loads(line) for line in events.read_text().splitlines()]
    assert {e["pid"] for e in written} == {os.getpid()}, written
    assert [e["kind"] for e in written] == ["kernel_launch", "kernel_summary"], written
