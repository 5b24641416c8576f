"""Round 22 (fix22c): what attack22a and attack22b found and did not fix.

1. (T136a, a backtick written ``\\x60`` by ``escaping.terminal`` in every message, was
   reverted by the lead: it fixed no output shown to be wrong, and printed a CUDA assert's
   backticks as ``\\x60`` in the terminal.)
2. ``forensics.load("")`` read the working directory; ``load("x\\0")``, ``replay``, ``scan``
   raised a builtin ValueError, and ``check``/``import`` of such a path said "internal error":
   every path a user gives is refused in one line now (T136b).
3. A split triage's rerun replayed every origin step it was given (up to 65,536): at most as
   many as its own steps now, the latest, the rest said not searched (T136c).
4. The probe's thread backend: a SIGTERM that came as the main thread made the capture (for an
   event, outside a flush) closed the session with no writer yet: no ``probe_stop``, no event,
   and the empty folder removed. The signal waits for the capture and the event now (T136d).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_round2 import run_cli

import forensics
from forensics.errors import ConfigurationError
from forensics.escaping import terminal

# ---------------------------------------------- T136b: an empty path or one holding NUL


@pytest.mark.parametrize("path", ["", "x.capture\x00y"])
@pytest.mark.parametrize("entry", ["load", "replay", "scan"])
def test_the_api_refuses_an_empty_path_in_one_line(path: str, entry: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``forensics.load("")`` read the working directory ("'<cwd>' has no manifest.json"),
    ``load("x\\0")`` raised a builtin ValueError ("embedded null byte"): each is refused in
    one line naming the path and the fix."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError) as caught:
        getattr(forensics, entry)(path)
    said = str(caught.value)
    assert "\n" not in said and f"'{terminal(path)}'" in said and "names no file" in said
    assert str(tmp_path) not in said


@pytest.mark.parametrize("argv", [["check", "x\x00"], ["check", ""], ["replay", ""],
                                  ["import", "a\x00", "-o", "y.capture"]])
def test_the_cli_refuses_an_empty_path_in_one_line(argv: list[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``check 'x\\0'`` and ``import 'a\\0'`` said "internal error ValueError: embedded null
    byte; this is a bug"; ``check ""`` read the working directory's expected.json."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "names no file" in err and "internal error" not in err, err


# ------------------------------------------ T136c: a rerun replays a bounded number of origins


def test_a_rerun_replays_at_most_its_own_steps_of_origins() -> None:
    """A piece of 10 steps whose sink findings looked for 1,000 keys, each written at its own
    earlier step: it was given all 1,000 steps to replay again (65,536 at most, each with its
    records). It replays the latest 10 now, and is said not searched before the earliest."""
    from forensics.fleet.carry import reruns
    from forensics.fleet.piece import to_ipc
    from forensics.fleet.tasks import Task
    from forensics.fleet.triage import decoded

    def piece(start: int, wanted: list[list[Any]], keys: list[list[Any]]) -> bytes:
        return to_ipc([{"capture": "c", "name": "c", "start": start, "stop": start + 10,
                        "error": "", "origin_wanted": json.dumps({"keys": wanted,
                                                                  "cut": False}),
                        "origin_candidates": json.dumps({"keys": keys, "from": None})}])

    tasks = [Task("c", 0, 2000), Task("c", 2000, 2010)]
    results = [piece(0, [], [[0, -v, None, v] for v in range(1, 1001)]),
               piece(2000, [[0, -v, None] for v in range(1, 1001)], [])]
    again, unsearched = reruns(tasks, decoded(tasks, results))
    assert again[1].origins == tuple(range(991, 1001)) and unsearched == {1: 991}
    results[1] = piece(2000, [[0, -v, None] for v in range(995, 1001)], [])
    again, unsearched = reruns(tasks, decoded(tasks, results))
    assert again[1].origins == tuple(range(995, 1001)) and unsearched == {}


# ---------------------------- T136d: a SIGTERM as the capture is made for an event, in the main


#: the thread backend's capture made for an event (``keep_event``, no record yet); the
#: SIGTERM (the probe's handler, the default action after it) comes as it is being made
SIGTERM_AT_OPEN = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from forensics.probe import plugin
    from forensics.probe.settings import Settings
    from forensics.probe.thread_backend import default_writer

    def factory(session):
        os.kill(os.getpid(), signal.SIGTERM)
        return default_writer(session)

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=64, writer="thread"), writer_factory=factory)
    session.keep_event("my_event", detail="x")
    print("not ended", flush=True)
""")


def test_a_sigterm_as_the_capture_is_made_keeps_the_event_and_probe_stop(
        tmp_path: Path) -> None:
    """The SIGTERM's close found no writer yet: no ``probe_stop``, no event, and the empty
    capture folder was removed (nothing said the process was ever recorded). The signal is
    handled once the capture is made and the event kept."""
    capture = tmp_path / "x.capture"
    child = subprocess.run([sys.executable, "-c", SIGTERM_AT_OPEN, str(capture)], timeout=300,
                           capture_output=True, text=True)
    assert child.returncode == -15 and "not ended" not in child.stdout, child.stderr[-3000:]
    (events,) = capture.glob("events-*.jsonl")
    kinds = [json.loads(line)["kind"] for line in events.read_text().splitlines()]
    assert kinds == ["probe_start", "my_event", "probe_stop"], kinds
