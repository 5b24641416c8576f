"""Round 24 of hostile input, fix 24a: round 23's leftovers: the draft title beside several
guard events, ``redact`` of a guard event's message, runs of combining marks, and the pytest
plugin's item of an empty ``--forensics-captures``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_round23_fix23a import _guarded, _title

pytest_plugins = ["pytester"]

# ------------------------------ T146a: the draft's title names every guard event's count


def _forged(step: int, tensor: str, value: int, site: str) -> dict[str, object]:
    """A forged ``guard_violation`` of ``tensor`` = ``value`` at ``site``, step ``step``."""
    return {"kind": "guard_violation", "process": "w0", "rank": 0, "step": step,
            "site": site, "row": 0, "tensor": tensor, "value": value, "bound": 4}


def _events(capture: Path, *events: dict[str, object]) -> None:
    """``capture``'s events: ``events`` alone, then the probe's stop."""
    stop = {"kind": "probe_stop", "process": "w0", "pid": 5, "rank": 0, "step": 12}
    (capture / "events-w0.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in [*events, stop]))


def test_the_draft_title_counts_the_guard_events_and_names_the_first_two(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Of a capture whose (clean) records show no value out of range and whose events hold
    two guard events naming different tensors and values, the draft's title named the first
    alone ("its guard_violation event names prev_positions = 9 ..."), as if it were the only
    claim. It counts them and names the first two (the guard that raised first), the rest
    counted; of one event, it names that one as before."""
    capture = _guarded(tmp_path)
    head = "**Title**: [Bug]: engine crash with no captured index value out of range, though "
    _events(capture, _forged(3, "input_ids", 70000, "embedding"))
    assert _title(capsys, capture) == (
        f"{head}its guard_violation event names input_ids = 70000 out of range at embedding")
    _events(capture, _forged(3, "input_ids", 70000, "embedding"),
            _forged(2, "prev_positions", 9, "batch_change"))
    assert _title(capsys, capture) == (
        f"{head}its 2 guard events name values out of range: prev_positions = 9 at batch_change "
        "(guard_violation), input_ids = 70000 at embedding (guard_violation)")
    _events(capture, _forged(3, "input_ids", 70000, "embedding"),
            _forged(2, "prev_positions", 9, "batch_change"),
            _forged(4, "out.output_token_ids", 32001, "async_output"))
    assert _title(capsys, capture) == (
        f"{head}its 3 guard events name values out of range: prev_positions = 9 at batch_change "
        "(guard_violation), input_ids = 70000 at embedding (guard_violation) and 1 more")


# ------------------------------ T146b: redact's guard message says the value as its field


def test_redact_says_a_guard_event_s_value_in_its_message_as_its_field_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``redact`` mapped a guard event's ``value`` (of a token tensor) as the records' ids are,
    but its kept message still said the real id ("input_ids[2] value 1234 is outside ..."),
    beside the mapped one in the field. The message says the mapped value after ``value``; a
    number that is the event's row or bound after its word is kept; the id anywhere else, and
    the value of a tensor its site does not name (its field dropped), read ``<value>``."""
    from forensics.probe.guard import bounds_error
    from forensics.sites import Violation
    from tests.hostile.test_round2 import run_cli

    def guard(tensor: str, row: int, value: int, message: str = "") -> dict[str, object]:
        raised = Violation("embedding", row, tensor, value, 0, 4)
        return {"kind": "guard_violation", "process": "w0", "rank": 0, "step": 8,
                "site": "embedding", "row": row, "tensor": tensor, "value": value, "bound": 4,
                "message": message or str(bounds_error(raised, 8, 0, None))}

    capture = _guarded(tmp_path, guard("input_ids[2]", 2, 1234),
                       guard("input_ids", 1234, 1234, "row 1234 read token 1234 (bound 4)"),
                       guard("nope", 2, 1234))
    shared = tmp_path / "shared.capture"
    code, out, err = run_cli(capsys, "redact", capture, "-o", shared)
    assert code == 0, err
    events = [json.loads(line) for line in (shared / "events-w0.jsonl").read_text().splitlines()]
    probe, forged, unknown = [e for e in events if e["kind"].startswith("guard")][2:]
    mapped = probe["value"]
    assert mapped != 1234 and forged["value"] == mapped and "value" not in unknown
    assert probe["message"].startswith(
        f"forensics guard: site 'embedding' step 8 rank 0 row 2: input_ids[2] value {mapped} is "
        "outside [0, 4) (bound 4)"), probe
    assert forged["message"] == "row 1234 read token <value> (bound 4)", forged
    assert unknown["message"].startswith(
        "forensics guard: site 'embedding' step 8 rank 0 row 2: nope value <value> is outside"), \
        unknown
    assert "1234" not in json.dumps([probe, unknown]) and forged["row"] == 1234


# ------------------------------ T146c: the pytest plugin's item of an empty root says ''


def test_the_plugin_s_item_of_an_empty_root_is_named_as_given(
        pytester: pytest.Pytester) -> None:
    """``pytest --forensics-captures ""`` failed an item whose id was ``.`` (the working
    directory, which the root is not) while its line said the path '' is empty. Its id is
    ``forensics-captures['']``; an empty root and ``.`` given together are two items."""
    pytester.makepyfile(test_other="def test_other():\n    assert True\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA",
                                          "--forensics-captures", "")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "FAILED forensics-captures[''] - --forensics-captures" in out and "FAILED . " not in out
    both = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA",
                                        "--forensics-captures", "", "--forensics-captures", ".")
    both.assert_outcomes(passed=1, failed=2)
    assert "FAILED forensics-captures[''] - " in both.stdout.str()
    assert "FAILED . - '.' (--forensics-captures" in both.stdout.str()
