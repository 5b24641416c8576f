"""Round 20's attack20b (issue 38, "Hostile input, round 3"): what a hostile capture author or a
careful user found in ``import`` of engine logs, ``check``, ``known``, ``summary``, ``report``
and ``repro`` (T116a.. of docs/threat-model.md).

- T116a: a traceback of the API server rooted in vLLM's ``RuntimeError: Engine core process NAME
  died unexpectedly.`` after the engine core's own exception was a second crash event
  (``process_died``): ``known`` and ``summary`` said "2 crash event(s)" of one death.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_round2 import run_cli

DATA = Path(__file__).resolve().parents[2] / "data"

#: the engine core's own exception, logged with its process tag
CORE_EXCEPTION = (
    "(EngineCore_DP0 pid=4242) SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=0 max=7\n"
    "(EngineCore_DP0 pid=4242) ERROR 12-02 10:46:44 [core.py:866] Traceback (most recent call "
    "last):\n"
    '(EngineCore_DP0 pid=4242) ERROR 12-02 10:46:44 [core.py:866]   File "/x/vllm/v1/engine/'
    'core.py", line 857, in run_engine_core\n'
    "(EngineCore_DP0 pid=4242) ERROR 12-02 10:46:44 [core.py:866]     engine_core.run_busy_loop()\n"
    "(EngineCore_DP0 pid=4242) ERROR 12-02 10:46:44 [core.py:866] IndexError: index 1000 is out "
    "of bounds for dimension 0 with size 1000\n")
#: the API server's traceback of the same death, rooted in its report that the core died
CORE_DIED = (
    "ERROR 12-02 10:46:45 [core_client.py:564] Traceback (most recent call last):\n"
    'ERROR 12-02 10:46:45 [core_client.py:564]   File "/x/vllm/v1/engine/core_client.py", '
    "line 560, in monitor\n"
    "ERROR 12-02 10:46:45 [core_client.py:564]     raise RuntimeError(msg)\n"
    "ERROR 12-02 10:46:45 [core_client.py:564] RuntimeError: Engine core process EngineCore_DP0 "
    "died unexpectedly.\n")


def _imported(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> Path:
    """The capture ``forensics import`` makes of a log of ``text``."""
    (tmp_path / "engine.log").write_text(text)
    out = tmp_path / "engine.capture"
    code, _, err = run_cli(capsys, "import", tmp_path / "engine.log", "-o", out, "--force")
    assert code == 0, err
    return out


def _events(capsys: pytest.CaptureFixture[str], capture: Path) -> list[dict[str, object]]:
    """The events ``forensics inspect --json`` lists of ``capture``."""
    code, shown, err = run_cli(capsys, "inspect", capture, "--json")
    assert code == 0, err
    return list(json.loads(shown)["events"])


# ------------------------------ T116a: one death, reported twice, is one crash event


def test_a_died_traceback_after_a_crash_is_that_crash(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """The API server's traceback rooted in ``Engine core process ... died unexpectedly`` after
    the core's exception is that exception's death (its ``died``), not a second crash."""
    capture = _imported(capsys, tmp_path, CORE_EXCEPTION + CORE_DIED)
    [event] = _events(capsys, capture)
    assert event["kind"] == "engine_exception" and event["line"] == 5
    assert event["died"]["line"] == 9  # type: ignore[index]
    for command in (("known",), ("summary", "--format", "text")):
        code, out, err = run_cli(capsys, *command, capture)
        assert code in (0, 1), err
        said = " ".join(out.split())
        assert "2 crash event(s)" not in said, said
    code, out, _ = run_cli(capsys, "known", capture)
    assert "1 crash event(s)" in " ".join(out.split())


def test_a_died_traceback_alone_is_still_a_crash(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    """Without a crash before it, the same traceback is the crash event (``process_died``)."""
    capture = _imported(capsys, tmp_path, CORE_EXCEPTION.splitlines(keepends=True)[0] + CORE_DIED)
    [event] = _events(capsys, capture)
    assert event["kind"] == "process_died" and event["line"] == 5
