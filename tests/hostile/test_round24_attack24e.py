"""Round 24 of hostile input, attack 24e: the sentences this round added, read against what the
capture holds (the guard's message echoed in the engine's exception)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile.test_round2 import check_said, run_cli

# ------------------------------ T155a: the guard's raise keeps no real id in the engine's exception


def _raised(tmp_path: Path, tensor: str) -> Path:
    """A simulated clean capture whose guard raised on ``tensor`` = 1234 at embedding (bound
    4), the engine's exception holding the guard's message as the probe keeps it."""
    capture = tmp_path / "raised.capture"
    assert __import__("forensics.cli", fromlist=["main"]).main(
        ["simulate", "clean", "-o", str(capture), "--steps", "4"]) == 0
    message = (f"forensics guard: site 'embedding' step 3 rank 0 row 2: {tensor} value 1234 is "
               "outside [0, 4) (bound 4); records up to this call are in /x/c.capture; run "
               "`forensics replay /x/c.capture` to trace it")
    events = [{"kind": "guard_violation", "process": "w0", "rank": 0, "step": 3,
               "site": "embedding", "row": 2, "tensor": tensor, "value": 1234, "bound": 4,
               "message": message},
              {"kind": "engine_exception", "process": "w0", "rank": 0, "step": 3,
               "where": "execute_model", "error": f"IndexBoundsError: {message}"},
              {"kind": "probe_stop", "process": "w0", "rank": 0, "step": 4}]
    (capture / "events-w0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return capture


@pytest.mark.parametrize("tensor", ["input_ids", "unnamed_tensor"])
def test_the_engine_s_exception_says_the_guard_s_value_as_its_event_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], tensor: str) -> None:
    """The guard raised on input_ids = 1234 (bound 4): redact mapped the guard event's value
    and its message's, but the engine's exception the raise left (engine_exception's error,
    the same message) kept "input_ids value 1234", the real id beside its mapping. It says
    the value as the guard event does: mapped, or ``<value>`` where the event's value went."""
    out = tmp_path / "shared.capture"
    code, _, err = run_cli(capsys, "redact", _raised(tmp_path, tensor), "-o", out)
    assert code == 0, err
    guard, raised = [json.loads(line) for line in
                     (out / "events-w0.jsonl").read_text().splitlines()[:2]]
    assert "1234" not in raised["error"], raised
    shown = guard.get("value", "<value>")
    assert shown != 1234
    assert f"{tensor} value {shown} is outside [0, 4) (bound 4)" in raised["error"], raised
    assert raised["error"] == f"IndexBoundsError: {guard['message']}"


# ------------------------------ T155b: a histogram of row indices draws no token id's sentinel


def test_a_histogram_of_row_indices_draws_no_rejection_sentinel(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The histogram of a simulated capture's batch_change (row indices 0 to 8, no token id)
    drew "vocab_size = 32000: rejection sentinel", the vocabulary its manifest names, on its
    axis of row indices, the axis widened to reach it. A site holding no token id draws no
    sentinel of a vocabulary; one holding token ids draws the manifest's as before."""
    import forensics
    from forensics.present.scene.histogram import histogram_data

    capture = tmp_path / "c.capture"
    code, _, err = run_cli(capsys, "simulate", "clean", "-o", capture, "--steps", "4")
    assert code == 0, err
    result = forensics.replay(capture, ["upstream"])
    rows = histogram_data(result, "batch_change", "upstream")
    assert [label for _, label, _ in rows.sentinels] == ["−1: async placeholder / new row"]
    assert rows.axis.window == 32
    ids = histogram_data(result, "embedding", "upstream")
    assert "vocab_size = 32000: rejection sentinel" in [label for _, label, _ in ids.sentinels]


# ------------------------------ T155c: the next steps do not ask for the guard that already raised


def test_the_next_steps_of_a_guard_s_raise_do_not_ask_to_rerun_in_guard_mode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A clean capture whose events hold the guard's guard_violation (prev_positions = 9 at
    batch_change, which its records do not show) was concluded "Not explained" with the next
    step "rerun with the probe in guard mode, which raises where an index is about to be used
    out of range": the guard had raised in that run. The step says the capture's event claims
    so and to read it; without a guard_violation, guard mode is asked for as before."""
    from test_round23_fix23a import _guarded

    capture = _guarded(tmp_path)
    check_said(capsys, ("replay", capture),
               "the capture's guard_violation event says the probe's guard already raised in "
               "guard mode (its claim of a site, tensor and value, which no replay of the "
               "records finds); read that event.", ("rerun with the probe in guard mode",))
    events = capture / "events-w0.jsonl"
    events.write_text(events.read_text().replace('"guard_violation"', '"engine_exception"'))
    code, out, err = run_cli(capsys, "replay", capture)
    assert code == 0, err
    assert "rerun with the probe in guard mode, which raises" in " ".join(out.split()), out
