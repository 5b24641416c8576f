"""A capture whose engine ended without the probe's stop says so; the probe's own start and
stop events are never counted as crash events (issue 41)."""

from __future__ import annotations

from typing import Any

from forensics.known.evidence import crashed, unstopped
from forensics.present.capture_facts import facts_sentence, summary_facts


def summary(events: list[dict[str, Any]], steps: list[int] | None) -> dict[str, Any]:
    """The parts of ``Capture.summary()`` the facts read."""
    return {"manifest": {}, "ranks": [0], "steps": steps, "events": events}


START = {"kind": "probe_start", "process": "vm-1", "step": 0, "rank": 0}
STOP = {"kind": "probe_stop", "process": "vm-1", "step": 9, "rank": 0}


def test_a_probe_that_never_stopped_is_a_crash_and_says_after_which_step() -> None:
    events = [START, {"kind": "probe_error", "process": "vm-1", "step": 3}]
    assert unstopped(events) == ["vm-1"] and crashed(events)
    text = facts_sentence(summary_facts(summary(events, [0, 6])))
    assert "The engine stopped without the probe's stop (killed or crashed) after step 6" in text
    assert "0 crash event(s)" in text  # neither probe_start nor probe_error is a crash event


def test_a_probe_that_stopped_is_no_crash_and_its_events_are_not_counted() -> None:
    events = [START, STOP]
    assert unstopped(events) == [] and not crashed(events)
    text = facts_sentence(summary_facts(summary(events, [0, 9])))
    assert "stopped without" not in text and "0 crash event(s)" in text


def test_one_rank_that_died_among_ranks_that_stopped() -> None:
    other = {**START, "process": "vm-2", "rank": 1}
    events = [START, STOP, other, {"kind": "engine_dead", "process": "vm-2", "step": 4}]
    assert unstopped(events) == ["vm-2"]
    text = facts_sentence(summary_facts(summary(events, [0, 3])))
    assert "after step 4" in text and "1 crash event(s), the first engine_dead" in text
