"""``forensics inspect`` shows where every event comes from: a log line, or a step and rank."""

from __future__ import annotations

from forensics.commands.inspect import event_origin, render


def test_probe_events_show_process_step_and_rank() -> None:
    assert event_origin({"kind": "probe_start", "process": "vm-42", "pid": 42, "step": 0,
                         "rank": 1}) == "vm-42 step 0 rank 1"
    assert event_origin({"kind": "probe_error", "pid": 42}) == "42"


def test_log_events_keep_file_and_line_with_the_step_and_rank_when_known() -> None:
    assert event_origin({"source": "engine.log", "line": 12, "step": 3}) == \
        "engine.log:12 step 3"
    assert event_origin({"source": "engine.log", "line": 12, "step": 3, "rank": 1}) == \
        "engine.log:12 step 3 rank 1"
    assert event_origin({"source": "engine.log", "line": 12}) == "engine.log:12"


def test_the_table_has_no_unknown_origin() -> None:
    summary = {"name": "x", "records": 0, "segments": 0, "steps": None, "ranks": [], "sites": {},
               "site_steps": {}, "truncated": False,
               "events": [{"kind": "guard_passed_on", "process": "vm-7", "step": 9, "rank": 0,
                           "message": "forensics guard: ..."}]}
    assert "vm-7 step 9 rank 0" in render(summary) and ":?" not in render(summary)


def test_event_messages_are_shown_whole() -> None:
    message = ("Indexing.cu:1515: indexSelectSmallIndex: Assertion `srcIndex < "
               "srcSelectDimSize` failed.")
    summary = {"name": "x", "records": 0, "segments": 0, "steps": None, "ranks": [], "sites": {},
               "site_steps": {}, "truncated": False,
               "events": [{"kind": "assert", "source": "engine.log", "line": 7,
                           "message": message}]}
    assert message in render(summary)
    summary["events"][0]["detail"] = "srcIndex < srcSelectDimSize"  # the message still wins
    assert message in render(summary)
