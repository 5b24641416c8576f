"""Records survive SIGKILL (flushed ones), SIGTERM and exit; a full disk is an event."""

from __future__ import annotations

import errno
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from probe_fakes import batch_args, plain_batch_change

import forensics
from forensics.probe import hooks, plugin
from forensics.probe.settings import Settings
from forensics.probe.thread_backend import default_writer

CHILD = textwrap.dedent("""
    import sys, time, torch
    from pathlib import Path
    from forensics.probe import hooks, plugin
    from forensics.probe.settings import Settings

    def plain(num_computed_tokens, num_accepted_tokens, prev_positions,
              valid_sampled_token_count, prev_num_draft_tokens, cpu_num_computed_tokens):
        valid = valid_sampled_token_count[prev_positions.clamp(min=0)]
        num_accepted_tokens.copy_(valid)

    capture = Path(sys.argv[1])
    plugin.start(Settings(directory=capture.parent, capture=capture, ring=64, flush_every=4,
                          handoff="batch"))  # records leave every 4: the last 2 are held
    wrapped = hooks.wrap_batch_change(plain)
    session = plugin.session()
    for _ in range(10):
        session.begin_step()
        i32 = torch.int32
        wrapped(torch.zeros(4, dtype=i32), torch.ones(2, dtype=i32), torch.tensor([0, 1]),
                torch.tensor([2, 3], dtype=i32), torch.ones(4, dtype=i32),
                torch.zeros(2, dtype=i32))
    session.drain(timeout=60)  # the writer thread wrote the batches of 4 and 8
    print("ready", flush=True)
    if sys.argv[2] == "wait":
        time.sleep(600)
""")


def run_child(tmp_path: Path, how: str, sig: int | None) -> Path:
    capture = tmp_path / "child.capture"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(capture), how],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        if sig is not None:
            child.send_signal(sig)
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    return capture


def test_sigkill_keeps_every_flushed_record(tmp_path: Path) -> None:
    capture = forensics.load(run_child(tmp_path, "wait", signal.SIGKILL))
    assert [r.step for r in capture] == list(range(8))  # flushed at 4 and 8; 2 were in memory
    assert list(capture)[7]["num_accepted_tokens_after"].tolist() == [2, 3]


def test_sigterm_flushes_everything(tmp_path: Path) -> None:
    capture = forensics.load(run_child(tmp_path, "wait", signal.SIGTERM))
    assert [r.step for r in capture] == list(range(10))
    assert any(e["kind"] == "probe_stop" for e in capture.events)


def test_exit_flushes_everything(tmp_path: Path) -> None:
    capture = forensics.load(run_child(tmp_path, "exit", None))
    assert [r.step for r in capture] == list(range(10))
    assert {seg.name.split(".")[0] for seg in capture.path.iterdir()} >= {"batch_change",
                                                                            "manifest"}
    assert capture.manifest["probe"]["mode"] == "record"


def test_full_disk_never_reaches_the_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.store import writer as store_writer

    calls = {"n": 0}
    real_write = store_writer._SegmentFile.write_batch

    def write_batch(self, batch):  # every batch, written column-wise or per record
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, batch)

    monkeypatch.setattr(store_writer._SegmentFile, "write_batch", write_batch)
    capture = tmp_path / "full.capture"  # the in-process writer: the patch is this process's
    session = plugin.start(Settings(directory=tmp_path, capture=capture, ring=8, flush_every=1),
                           writer_factory=default_writer)
    try:
        wrapped = hooks.wrap_batch_change(plain_batch_change)
        args = batch_args([0])
        wrapped(*args)
        assert args[1].tolist() == [2]
        assert session.drain(timeout=30)
        wrapped(*batch_args([0]))
    finally:
        plugin.stop()
    assert session.counts["errors"] == 1
    from forensics.cli import main

    assert main(["inspect", str(capture), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == 1
    errors = [e for e in summary["events"] if e["kind"] == "probe_error"]
    assert len(errors) == 1 and "No space left on device" in errors[0]["error"]


#: a process recording one batch_change call per step with the default settings (a writer
#: process, records handed off as they are made), that dies at step ``argv[3]`` right after
#: its record: of SIGSEGV (a real null dereference), SIGABRT (``abort()``) or SIGKILL
HARD_CRASH = textwrap.dedent("""
    import ctypes, os, signal, sys, torch
    from pathlib import Path
    from forensics.probe import hooks, plugin
    from forensics.probe.settings import Settings

    def plain(num_computed_tokens, num_accepted_tokens, prev_positions,
              valid_sampled_token_count, prev_num_draft_tokens, cpu_num_computed_tokens):
        num_accepted_tokens.copy_(valid_sampled_token_count[prev_positions.clamp(min=0)])

    capture, handoff, how, last = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    session = plugin.start(Settings(directory=capture.parent, capture=capture,
                                    handoff=handoff))
    wrapped = hooks.wrap_batch_change(plain)
    i32 = torch.int32
    for step in range(last + 5):
        session.begin_step()
        wrapped(torch.zeros(4, dtype=i32), torch.ones(2, dtype=i32), torch.tensor([0, 1]),
                torch.tensor([step, 3], dtype=i32), torch.ones(4, dtype=i32),
                torch.zeros(2, dtype=i32))
        if step == 0:
            print(session.backend.channel.proc.pid, flush=True)  # the writer process
        if step == last:
            if how == "segv":
                ctypes.string_at(0)  # a real invalid read: the kernel sends SIGSEGV
            elif how == "abort":
                os.abort()
            os.kill(os.getpid(), signal.SIGKILL)
""")


def gone(pid: int) -> bool:
    """Whether process ``pid`` ended (a zombie no one reaps counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def crash_child(tmp_path: Path, how: str, last: int, handoff: str = "record") -> Path:
    """Run :data:`HARD_CRASH`; wait for it and for its writer process; return the capture."""
    import time

    capture = tmp_path / f"{how}-{handoff}.capture"
    child = subprocess.Popen([sys.executable, "-c", HARD_CRASH, str(capture), handoff, how,
                              str(last)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        writer = int(child.stdout.readline())
        code = child.wait(timeout=180)
    finally:
        if child.poll() is None:
            child.kill()
    expected = {"segv": signal.SIGSEGV, "abort": signal.SIGABRT, "kill": signal.SIGKILL}[how]
    assert code == -expected  # it really died of the signal
    deadline = time.monotonic() + 60
    while not gone(writer) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(writer)  # the writer process saw its engine go and finished
    return capture


@pytest.mark.parametrize("how", ["segv", "abort", "kill"])
def test_a_hard_crash_keeps_every_step_before_it_and_the_record_of_its_step(
        tmp_path: Path, how: str) -> None:
    capture = forensics.load(crash_child(tmp_path, how, last=6))
    assert [r.step for r in capture] == list(range(7))  # nothing was lost
    assert [r["valid_sampled_token_count"].tolist()[0] for r in capture] == list(range(7))
    kinds = [e["kind"] for e in capture.events]
    assert "probe_start" in kinds and "probe_stop" not in kinds
    from forensics.present.conclusion import conclude

    text = conclude(forensics.replay(capture.path)).paragraph()
    assert ("The engine stopped without the probe's stop (killed or crashed) after step 6"
            in text)
    assert "no failure" not in text and "0 crash event(s)" in text  # probe_start is none


def test_records_handed_off_in_batches_die_with_the_engine(tmp_path: Path) -> None:
    """The old hand-off (every FLUSH_EVERY records) loses what the engine still held: the
    test above can fail."""
    capture = forensics.load(crash_child(tmp_path, "kill", last=6, handoff="batch"))
    assert len(list(capture)) == 0
