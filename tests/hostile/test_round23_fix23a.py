"""Round 23 of hostile input, fix 23a: round 22's leftovers: ``redact`` of the probe's guard
message, the draft title beside a guard event, triage's entries not judged, and the count of
an imported log's worker deaths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_round21_fix21a

from forensics.probe.guard import bounds_error, passed_on_message
from forensics.sites import Violation
from tests.hostile.test_round2 import run_cli

DATA = Path(__file__).resolve().parents[2] / "data"
#: round 21's far origin (a fixture): a sink finding 30 steps past its origin
far_origin = test_round21_fix21a.far_origin


def _guarded(tmp_path: Path, *extra: dict[str, object]) -> Path:
    """A simulated clean capture with the two events the probe's guard writes, as it writes
    them (``Session.violation`` and ``Session.passed_on``): the value passed on in
    ``out.output_token_ids``, the one that raised in ``prev_positions``; ``extra`` events
    after them."""
    capture = tmp_path / "guarded.capture"
    code = __import__("forensics.cli", fromlist=["main"]).main(
        ["simulate", "clean", "-o", str(capture), "--steps", "12"])
    assert code == 0
    written = Violation("async_output", 1, "out.output_token_ids", 32000, 0, 32000)
    raised = Violation("batch_change", 3, "prev_positions", 9, 0, 8)
    events = [
        {"kind": "probe_start", "process": "w0", "pid": 5, "rank": 0, "step": 0},
        {"kind": "guard_passed_on", "process": "w0", "pid": 5, "rank": 0, "step": 5,
         "site": written.site, "row": written.row, "tensor": written.tensor,
         "value": written.value, "bound": written.upper,
         "message": passed_on_message(written, 5, 0, capture)},
        {"kind": "guard_violation", "process": "w0", "pid": 5, "rank": 0, "step": 7,
         "site": raised.site, "row": raised.row, "tensor": raised.tensor,
         "value": raised.value, "bound": raised.upper,
         "message": str(bounds_error(raised, 7, 0, capture))}, *extra]
    (capture / "events-w0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return capture


# ------------------------------ T138a: redact keeps the guard's tensor and words


def test_redact_keeps_the_guards_tensor_names_and_words_and_scrubs_hosts_and_paths(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The probe's guard message named its tensor ``out.output_token_ids``, which ``redact``
    read as a dotted host name (``<host>``), and its own words ``forensics``, ``goes`` and
    ``reaches`` became ``<text>`` (``prev_positions.clamp`` ``<host>``); the event's ``tensor``
    field was dropped. They are the
    toolkit's words and the sites' tensor names: kept, while the capture's path and a host in
    the same message are still scrubbed."""
    host = {"kind": "guard_violation", "process": "w0", "rank": 0, "step": 9,
            "site": "embedding", "tensor": "gpu7.corp.example",
            "message": "forensics guard on gpu7.corp.example wrote out.input_ids value -1 "
                       "(alice.private.lan:29500) at prev_positions.clamp(min=0) on "
                       "positions.corp.example"}
    capture = _guarded(tmp_path, host)
    shared = tmp_path / "shared.capture"
    code, out, err = run_cli(capsys, "redact", capture, "-o", shared)
    assert code == 0, err
    events = [json.loads(line) for line in (shared / "events-w0.jsonl").read_text().splitlines()]
    passed, raised, hosted = (e for e in events if e["kind"].startswith("guard"))
    assert passed["message"].startswith(
        "forensics guard: site 'async_output' step 5 rank 0 row 1 wrote out.output_token_ids "
        "value 32000 outside [0, 32000); not used as an index here, so the engine goes on "
        "(guard mode raises if it reaches an index); recorded in <path>"), passed
    assert raised["message"].startswith(
        "forensics guard: site 'batch_change' step 7 rank 0 row 3: prev_positions value 9 is "
        "outside [0, 8) (bound 8); records up to this call are in <path>; run `forensics "
        "replay <path>` to trace it"), raised
    assert (passed["tensor"], raised["tensor"]) == ("out.output_token_ids", "prev_positions")
    assert str(tmp_path) not in json.dumps(events)
    assert hosted["message"] == ("forensics guard on <host> wrote out.input_ids value -1 "
                                 "(<host>:29500) at prev_positions.clamp(min=0) on <host>"), hosted
    assert "tensor" not in hosted and "gpu7" not in json.dumps(events)


# ------------------------------ T138b: the draft's title beside a guard event


def _title(capsys: pytest.CaptureFixture[str], capture: Path) -> str:
    """The draft issue's title ``summary`` writes of ``capture``."""
    code, out, err = run_cli(capsys, "summary", capture)
    assert code in (0, 1), err
    return next(line for line in out.splitlines() if line.startswith("**Title**"))


def test_the_draft_title_says_what_a_guard_event_claims_beside_the_records(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose events hold the guard's ``guard_violation`` naming ``prev_positions``
    = 9 out of range, which its (clean) records do not show, was drafted "[Bug]: engine crash
    with every captured index value in range" beside that event. The title says what the
    records show and what the event claims (the one that raised first); of a capture whose
    only guard event is a ``guard_passed_on`` (no crash), the same; a forged event's fields
    are said as it claims them, each cut to 80 characters."""
    capture = _guarded(tmp_path)
    assert _title(capsys, capture) == (
        "**Title**: [Bug]: engine crash with no captured index value out of range, though its "
        "2 guard events name values out of range: prev_positions = 9 at batch_change "
        "(guard_violation), out.output_token_ids = 32000 at async_output (guard_passed_on)")
    events = capture / "events-w0.jsonl"
    passed = [line for line in events.read_text().splitlines()
              if '"guard_violation"' not in line]
    stop = {"kind": "probe_stop", "process": "w0", "pid": 5, "rank": 0, "step": 12}
    events.write_text("\n".join([*passed, json.dumps(stop)]) + "\n")
    assert _title(capsys, capture) == (
        "**Title**: [Bug]: no crash with no captured index value out of range, though "
        "its guard_passed_on event names out.output_token_ids = 32000 out of range at "
        "async_output")
    forged = {"kind": "guard_passed_on", "step": 1, "value": "9" * 200, "site": ["x"]}
    events.write_text(json.dumps(forged) + "\n" + json.dumps(stop) + "\n")
    assert _title(capsys, capture) == (
        "**Title**: [Bug]: no crash with no captured index value out of range, though "
        f"its guard_passed_on event names unknown = {'9' * 79}… out of range at ['x']")


# ------------------------------ T138c: the lines reporting a death, counted as lines


def _died(worker: int, hour: int) -> str:
    """vLLM's multiproc executor's line for worker ``worker``'s death at ``hour``."""
    return (f"(EngineCore_DP0 pid=4242) ERROR 12-02 {hour:02d}:46:44 [multiproc_executor.py:381] "
            f"Worker proc VllmWorker-{worker} died unexpectedly (exit code: -11)\n")


def test_every_line_reporting_a_death_is_counted_as_lines(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Two ``Worker proc ... died unexpectedly`` lines and no crash before them: one
    ``process_died`` event whose ``died`` held the second line alone (``count`` 1 of 2 lines).
    Its own line is its ``died``'s first (``count`` 2), and ``inspect`` says the count is of
    lines, not deaths (a second worker's death and a second report of one read alike)."""
    from tests.hostile.test_round19_attack19b import import_log

    step = ("(EngineCore_DP0 pid=4242) SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 "
            "min=0 max=7 step=1\n")
    said, capture, events = import_log(capsys, tmp_path, step + _died(0, 10) + _died(1, 11))
    assert "1 events" in said
    [event] = events
    died = event["died"]
    assert isinstance(died, dict)
    assert (event["kind"], event["line"], died["line"], died["count"]) == (
        "process_died", 2, 2, 2), event
    assert [r["line"] for r in died["more"]] == [3]
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 0, err
    assert out.count("[2 lines report a death (lines, not deaths)]") == 1, out


# ------------------------------ T138d: triage's rows name the known issues not judged


def test_a_known_issue_a_piece_could_not_judge_is_named_in_every_output(
        far_origin: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Split triage past its key cap (T130a): the piece whose sink finding's origin was not
    searched could not judge ``origin-none`` (an entry wanting origin ``none``), and the row
    listed matched ids only: the entry was simply absent. The row names it (``known`` keeps
    its type: the ids matched), in the text, Markdown and HTML tables, JSON, CSV and Parquet."""
    import csv

    import pyarrow.parquet as pq

    import forensics.fleet.carry as carry
    import forensics.fleet.origins as origins
    from forensics.fleet.output import render, write_html, write_table
    from forensics.fleet.signature import group_rows
    from forensics.fleet.tasks import plan
    from forensics.fleet.triage import Triage, rows_of
    from tests.hostile.test_round22_fix22a import _none_catalogue, _serial

    _none_catalogue(monkeypatch, tmp_path)
    monkeypatch.setattr(carry, "MAX_KEYS", 0)
    monkeypatch.setattr(origins, "MAX_KEYS", 0)
    tasks = plan([far_origin], test_round21_fix21a.SPLIT)
    rows = rows_of(tasks, _serial(tasks), _serial)
    assert (rows[0]["known"], rows[0]["known_not_judged"]) == ([], ["origin-none"])
    result = Triage(rows, group_rows(rows))
    said = "known issues not judged: origin-none"
    for fmt in ("text", "markdown"):
        assert said in render(result, fmt), fmt
    row = json.loads(render(result, "json"))["rows"][0]
    assert (row["known"], row["known_not_judged"]) == ([], ["origin-none"])
    [line] = csv.DictReader(write_table(result, tmp_path / "t.csv").open())
    assert (line["known"], line["known_not_judged"]) == ("", "origin-none")
    table = pq.read_table(write_table(result, tmp_path / "t.parquet"))
    assert str(table.schema.field("known").type) == "string"
    assert table.column("known_not_judged").to_pylist() == ["origin-none"]
    index = write_html(result, tmp_path / "html", report=lambda capture, out: None)
    assert said in index.read_text()


def test_pieces_whose_origins_were_all_searched_name_none_not_judged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same entry, judged by pieces whose origins were searched everywhere (no cap
    reached): it does not match, and it is not said to be not judged."""
    from forensics.fleet.tasks import plan
    from forensics.fleet.triage import rows_of
    from forensics.simulator.runs import simulate
    from tests.hostile.test_round22_fix22a import _none_catalogue, _serial

    _none_catalogue(monkeypatch, tmp_path)
    capture = Path(str(simulate("placeholder-leak", steps=60, out=tmp_path / "l.capture")))
    tasks = plan([capture], 100)
    [row] = rows_of(tasks, _serial(tasks), _serial)
    assert (row["known"], row["known_not_judged"]) == ([], [])
