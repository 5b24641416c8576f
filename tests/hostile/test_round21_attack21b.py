"""Round 21, attack 21b: the probe's folder and counts under signals, caps and deadlines."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.hostile.test_round2 import run_cli

PROBE_TESTS = Path(__file__).parents[1] / "probe"

#: the head of the child scripts below: the probe's test fakes on the path (argv[2]), and with
#: argv[3] "vllm" a SIGINT handler like vLLM's workers' (``SystemExit``)
CHILD_HEAD = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[2])
    from probe_fakes import record_batch_changes

    def handler(signum, frame):
        raise SystemExit()
    # Python's own, or vLLM's; Python's is set too: a child of a shell's background job starts
    # with SIGINT ignored, and Python then installs no handler of its own
    signal.signal(signal.SIGINT, handler if sys.argv[3] == "vllm" else signal.default_int_handler)
""")

# ------------------------------------------------ T124a: a signal's handler inside a flush
#: an engine records 6 records (the writer thread backend, no flush due), then flushes them in
#: its main thread (argv[4]: a waited flush, or the close); a SIGINT comes just as the capture's
#: fsync returns: Python's own handler (``KeyboardInterrupt``) or one like vLLM's workers'
#: (``SystemExit``), argv[3]
INTERRUPTED = CHILD_HEAD + textwrap.dedent("""
    from pathlib import Path
    from forensics.probe import plugin
    from forensics.probe.settings import Settings
    from forensics.probe.thread_backend import default_writer

    class Interrupted:
        def __init__(self, real):
            self.real, self.sent = real, False

        def flush(self):
            self.real.flush()
            if not self.sent:  # the signal comes as the fsync returns
                self.sent = True
                os.kill(os.getpid(), signal.SIGINT)

        def __getattr__(self, name):
            return getattr(self.real, name)

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=64, writer="thread"),
                           writer_factory=lambda s: Interrupted(default_writer(s)))
    record_batch_changes(session, [[0, 1]] * 6)
    try:
        session.flush(wait=True) if sys.argv[4] == "flush" else plugin.stop()
    except (KeyboardInterrupt, SystemExit):
        print("interrupted")
    plugin.stop()
""")


@pytest.mark.parametrize("handler", ["python", "vllm"])
@pytest.mark.parametrize("where", ["flush", "close"])
def test_a_signal_inside_the_main_threads_flush_leaves_counts_that_are_true(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], handler: str, where: str) -> None:
    """T124a: the records a flush of the engine's main thread (a waited flush, the close)
    wrote before a signal's handler raised are counted as written in ``probe_stop``: the
    signal is handled once the flush, or the close, is over. They were not: after a waited
    flush ``summary`` said the 6 records in the capture were "never written" and not read;
    inside the close, no ``probe_stop`` was written (the process read as dead)."""
    capture = tmp_path / "x.capture"
    child = subprocess.run([sys.executable, "-c", INTERRUPTED, str(capture), str(PROBE_TESTS),
                            handler, where], timeout=300, capture_output=True, text=True)
    assert child.returncode == 0 and "interrupted" in child.stdout, child.stderr[-3000:]
    (events,) = capture.glob("events-*.jsonl")
    (stop,) = [e for e in map(json.loads, events.read_text().splitlines())
               if e["kind"] == "probe_stop"]
    assert (stop["records"], stop["written"], stop["dropped"]) == (6, 6, 0)
    code, out, err = run_cli(capsys, "summary", capture, "--format", "text")
    assert code == 0, err
    assert "never written" not in out and "not read" not in out


#: the writer process, its batch hand-off: a SIGINT comes as the probe frames the block of the
#: 6 records for it (Python's own handler, or one like vLLM's workers', argv[3])
FRAMING_INTERRUPTED = CHILD_HEAD + textwrap.dedent("""
    from pathlib import Path
    from forensics.probe import frames, plugin
    from forensics.probe.settings import Settings
    real, sent = frames.put_block, []

    def put_block(*args, **kwargs):
        if not sent:  # the signal comes as the frame is written
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    frames.put_block = put_block
    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=1 << 10,
                                    flush_every=64, writer="process", handoff="batch"))
    record_batch_changes(session, [[0, 1]] * 6)
    try:
        session.flush(wait=True)
    except (KeyboardInterrupt, SystemExit):
        print("interrupted")
    plugin.stop()
""")


@pytest.mark.parametrize("handler", ["python", "vllm"])
def test_a_signal_as_the_probe_frames_a_batch_loses_none_of_it(
        tmp_path: Path, handler: str) -> None:
    """T124a: with the writer process and its batch hand-off, a signal whose handler raises as
    the engine's thread frames a batch is handled once the batch is framed: its 6 records are
    written. They were lost (taken from the ring, never framed), neither written nor dropped."""
    capture = tmp_path / "x.capture"
    child = subprocess.run([sys.executable, "-c", FRAMING_INTERRUPTED, str(capture),
                            str(PROBE_TESTS), handler], timeout=300, capture_output=True,
                           text=True)
    assert child.returncode == 0 and "interrupted" in child.stdout, child.stderr[-3000:]
    (events,) = capture.glob("events-*.jsonl")
    (stop,) = [e for e in map(json.loads, events.read_text().splitlines())
               if e["kind"] == "probe_stop"]
    assert (stop["records"], stop["written"], stop["dropped"]) == (6, 6, 0)


FORKED_WHILE_HELD = textwrap.dedent("""
    import os, signal, sys, threading
    from forensics.probe.held import signals_held

    signal.signal(signal.SIGINT, signal.default_int_handler)  # SIGINT may start ignored

    def fork():
        pid = os.fork()
        if pid == 0:
            os._exit(0 if signal.getsignal(signal.SIGINT) is signal.default_int_handler else 3)
        print(os.waitpid(pid, 0)[1])

    with signals_held():
        thread = threading.Thread(target=fork)
        thread.start()
        thread.join()
    print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
""")


def test_a_copy_forked_while_the_main_thread_holds_its_signals_handles_them() -> None:
    """T124a: a copy another thread forks while the main thread holds its signals (inside a
    flush) has its handlers back (it never ends that hold); the main thread's come back as
    the hold ends."""
    child = subprocess.run([sys.executable, "-c", FORKED_WHILE_HELD], timeout=120,
                           capture_output=True, text=True)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split() == ["0", "True"]


# -------------------------- T124b: the kernel recorder's signal dump inside the probe's framing
#: FORENSICS_KERNELS on, the writer process (argv[3]: the hand-off); the engine's SIGINT and
#: SIGTERM handlers return (as vLLM's engine core's do); the signals argv[4] names come as the
#: probe frames a block of records
KERNELS_INTERRUPTED = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    os.environ["FORENSICS_KERNELS"] = "all"
    from forensics.probe import frames, plugin
    from forensics.probe.settings import Settings

    sys.path.insert(0, sys.argv[2])
    from probe_fakes import record_batch_changes

    real, sent = frames.put_block, []

    def put_block(*args, **kwargs):
        if not sent:  # the signals come as the frame is written
            sent.append(1)
            for name in sys.argv[4].split(","):
                os.kill(os.getpid(), getattr(signal, name))
        return real(*args, **kwargs)

    frames.put_block = put_block
    for name in ("SIGINT", "SIGTERM"):
        signal.signal(getattr(signal, name), lambda signum, frame: print("engine", signum))
    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=1 << 10,
                                    flush_every=64, writer="process", handoff=sys.argv[3]))
    record_batch_changes(session, [[0, 1]] * 6)
    session.flush(wait=True)
    plugin.stop()
""")


@pytest.mark.parametrize(("handoff", "signals"), [("batch", "SIGINT"), ("record", "SIGINT"),
                                                   ("batch", "SIGINT,SIGTERM")])
def test_the_kernel_recorders_dump_on_a_signal_waits_for_the_probes_framing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], handoff: str, signals: str) -> None:
    """T124b: with ``FORENSICS_KERNELS``, a SIGINT (or SIGTERM) that comes while the probe
    frames records for its writer process has the kernel recorder's dump run once the framing
    is over: every record is written, no frame is broken. The dump ran inside it: its events
    were framed where the interrupted block was being written, the writer process read
    "a frame of 1 bytes", and the 6 records (every record after, with the per-record hand-off)
    were lost, neither written nor dropped. Two signals in one framing: both handled."""
    import signal

    capture = tmp_path / "x.capture"
    child = subprocess.run([sys.executable, "-c", KERNELS_INTERRUPTED, str(capture),
                            str(PROBE_TESTS), handoff, signals], timeout=300,
                           capture_output=True, text=True)
    assert child.returncode == 0, child.stderr[-3000:]
    handled = {f"engine {int(getattr(signal, name))}" for name in signals.split(",")}
    assert handled <= set(child.stdout.splitlines()), child.stdout
    (events,) = capture.glob("events-*.jsonl")
    kept = [json.loads(line) for line in events.read_text().splitlines()]
    assert not [e for e in kept if e["kind"] == "probe_error"]
    (stop,) = [e for e in kept if e["kind"] == "probe_stop"]
    assert (stop["records"], stop["written"], stop["dropped"]) == (6, 6, 0)
    assert "signal SIGINT" in [e.get("reason") for e in kept if e["kind"] == "kernel_summary"]
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 0 and "6 records" in out, err


# ------------------------------- T124c: what the code a kernel worker runs prints is no answer
def _printing_kernels(tmp_path: Path) -> Path:
    """A patched copy of vLLM's V2 kernels module (as ``vllm+PATH.diff`` makes one) that
    prints as it is imported and as its kernels run: a developer's debug prints."""
    import vllm.v1.worker.gpu.input_batch as installed

    root = tmp_path / "patched"
    copy = root / "vllm" / "v1" / "worker" / "gpu" / "input_batch.py"
    copy.parent.mkdir(parents=True)
    source = Path(installed.__file__).read_text(encoding="utf-8")
    copy.write_text('print("debugging my fix")\nprint(\'{"ready": false}\')\n' + source
                    + '\nimport builtins, os\nos.write(1, b"from C: 1\\n")\n',
                    encoding="utf-8")
    return root


def test_what_the_v2_workers_code_prints_is_never_read_as_its_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """T124c: ``replay --variant vllm`` (and ``vllm+PATH.diff``): lines the code the V2 kernel
    worker runs writes to its stdout (vLLM's logger writes there; a diff's debug print) are
    never read as the worker's answers: the record is judged. The first printed line was read
    as the worker's ``ready``: ``json.loads`` raised (a traceback), or a JSON-looking line was
    taken as the answer ("cannot run in Triton's interpreter here")."""
    from forensics.variants import triton_kernels

    sys.path.insert(0, str(Path(__file__).parent))
    from test_round16_lead import _combine_record  # noqa: PLC0415

    root = _printing_kernels(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[2]))  # this tree's worker
    worker = triton_kernels.KernelWorker()
    worker._command = lambda: [  # type: ignore[method-assign]
        sys.executable, "-P", "-m", "forensics.variants.triton_worker", "--patched", str(root)]
    try:
        assert [o.status for o in worker.run_many([_combine_record([3, 0]),
                                                   _combine_record([9, 0])])] \
            == ["ok", "index_error"]
    finally:
        worker.close()


def test_a_workers_answer_stream_holds_its_answers_alone() -> None:
    """T124c: after :func:`~forensics.child_answers.answer_stream` (both kernel workers call it
    first), a print, a log line to ``sys.stdout`` and a C-level write to descriptor 1 go to the
    worker's stderr; its stdout holds its answers alone."""
    script = textwrap.dedent("""
        import logging, os, sys
        from forensics.child_answers import answer_stream
        out = answer_stream()
        print("a print")
        logging.basicConfig(stream=sys.stdout, level=logging.INFO)
        logging.info("a log line")
        os.write(1, b"from C\\n")
        print('{"ready": true}', file=out)
    """)
    child = subprocess.run([sys.executable, "-c", script], timeout=120, capture_output=True,
                           text=True)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout == '{"ready": true}\n'
    assert ["a print", "INFO:root:a log line", "from C"] == child.stderr.split("\n")[:3]


# ------------------------------- T124d: a V2 kernel worker stuck as it starts is said to be
def test_a_v2_worker_stuck_as_it_starts_times_out_its_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """T124d: a V2 kernel worker that gives no ``ready`` within its start's deadline (a vLLM
    import that hangs, a loaded machine) is ended; the records it was to run are each
    ``error: ... timed out after N s`` and the replay goes on; it is not started again. It
    stopped the replay with "vLLM's Triton kernels cannot run in Triton's interpreter here (it
    exited); ... needs vLLM and Triton installed": it had not exited, and they were."""
    from forensics.outcome import ERROR
    from forensics.records import Record
    from forensics.variants import triton_kernels

    monkeypatch.setattr(triton_kernels, "_START_TIMEOUT", 1.0)
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "1")
    starts: list[int] = []
    worker = triton_kernels.KernelWorker()

    def stuck() -> list[str]:
        starts.append(1)
        return [sys.executable, "-c", "import time; time.sleep(60)"]

    worker._command = stuck  # type: ignore[method-assign]
    try:
        outcomes = worker.run_many([Record("combine_tokens", 0, 0, {})] * 2) \
            + worker.run_many([Record("combine_tokens", 1, 0, {})])
    finally:
        worker.close()
    assert [o.status for o in outcomes] == [ERROR] * 3 and len(starts) == 1
    assert all("timed out after 1 s" in o.message and "exited" not in o.message
               for o in outcomes), outcomes
