"""Hostile input, round 16 (attack D): the share bundle (``redact``), the write-up and the
pytest plugin, as a hostile capture's author would write them."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

from forensics.records import Record
from forensics.store.writer import write_capture


def _files_text(folder: Path) -> bytes:
    """Every byte of every file under ``folder``."""
    return b"".join(f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file())


def test_redact_drops_ids_an_event_or_the_manifest_holds_under_a_field_name(
        tmp_path: Path) -> None:
    """T91a: a token id or a request id under a record field's name (``input_ids``, ``min``,
    ``req_ids``) in an event or the manifest was kept as it was (a known key, numbers or a
    version-like string), while the records' ids were permuted and pseudonymised."""
    from forensics.share.redaction import redact

    records = [Record("embedding", step, 0, {
        "input_ids": np.array([5, 6], dtype=np.int64), "num_embeddings": 32000,
        "req_ids": ["1.2.3", "4.5.6"]}) for step in range(2)]
    events = [{"kind": "index_error", "step": 1, "rank": 0, "input_ids": [12345, 23456],
               "input_ids_after": 13579, "req_ids": ["1.2.3"], "min": 24680}]
    capture = write_capture(tmp_path / "s.capture", records, events=events,
                            manifest={"model": {"input_ids": [11111, 22222]}})
    result = redact(capture, tmp_path / "r.capture")
    text = _files_text(result.path)
    for private in (b"12345", b"23456", b"13579", b"24680", b"11111", b"22222", b"1.2.3",
                    b"4.5.6"):
        assert private not in text, private
    assert {"events.input_ids", "events.input_ids_after", "events.req_ids", "events.min",
            "model.input_ids"} <= set(result.dropped), result.dropped


def _embedding_repro(tmp_path: Path) -> types.ModuleType:
    """The repro module of a capture whose embedding's ``input_ids[1] = 40000`` is past its
    32000 rows (imported, as pytest would)."""
    import importlib.util

    from forensics.cli import main

    records = [Record("embedding", step, 0, {
        "input_ids": np.array([5, 40000 if step == 1 else 6], dtype=np.int64),
        "num_embeddings": 32000}) for step in range(3)]
    capture = write_capture(tmp_path / "e.capture", records)
    script = tmp_path / "test_repro.py"
    assert main(["repro", str(capture), "-o", str(script)]) == 0
    spec = importlib.util.spec_from_file_location("repro_t91b", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("element", "value", "says"), [
    (1, 40000, "the capture's input_ids[1] = 40000 is outside [0, 32000)"),
    (0, 5, "names input_ids[0], which holds 5, inside [0, 32000): which index is out of "
           "range is unknown"),
    (99, 40000, "names input_ids[99], which the record does not hold: which index is out of "
                "range is unknown")])
def test_the_repro_says_no_element_outside_its_bound_that_the_record_does_not_hold_so(
        tmp_path: Path, element: int, value: int, says: str) -> None:
    """T91b: a forged data file whose finding names an element inside its bound, or one past
    the tensor, made the failing test say "the capture's input_ids[0] = 5 is outside [0,
    32000)" (5 is inside) and "input_ids[99] = 40000" (the record holds 2 ids)."""
    module = _embedding_repro(tmp_path)
    case = module.DATA["cases"][0]
    case["finding"].update(element=element, value=value)
    text = module.held(case, module.record(case))
    assert says in text, text


def _summary(capture: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``forensics summary CAPTURE`` (Markdown)."""
    from forensics.cli import main

    capsys.readouterr()
    assert main(["summary", str(capture)]) == 0
    return capsys.readouterr().out


def test_the_write_up_of_a_capture_of_no_records_says_nothing_was_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T91c: a crash with no record captured read "**upstream**: no unresolved out-of-bounds
    finding" and the draft's title "engine crash with every captured index value in range",
    as if values had been judged clean."""
    capture = write_capture(tmp_path / "empty.capture", [], events=[
        {"kind": "engine_dead", "step": 0, "rank": 0, "message": "EngineDeadError"}])
    text = _summary(capture, capsys)
    assert "no unresolved out-of-bounds finding" not in text
    assert "every captured index value in range" not in text
    assert "- **upstream**: The capture holds no records: no variant judged anything" in text
    assert "**Title**: [Bug]: engine crash with no index value captured" in text, text
    assert "the capture's crash events are listed under Capture below" in text


def test_the_draft_of_a_capture_without_a_crash_event_lists_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T91c: a violation without a crash event (a probe's ``index_error`` is none) drafted
    "the capture's events are listed under Capture below", where none was listed."""
    records = [Record("embedding", step, 0, {
        "input_ids": np.array([5, 40000 if step == 1 else 6], dtype=np.int64),
        "num_embeddings": 32000}) for step in range(3)]
    capture = write_capture(tmp_path / "v.capture", records, events=[
        {"kind": "index_error", "step": 1, "rank": 0, "message": "x"}])
    text = _summary(capture, capsys)
    assert "### Draft: a new vLLM issue" in text
    assert "listed under Capture below; its facts" not in text
    assert "**What happened**: the capture holds no crash event; its facts" in text
    assert "- event:" not in text


def test_the_write_up_says_none_found_only_in_the_records_judged(tmp_path: Path) -> None:
    """T91c: records of a site not known here are judged by no variant: the write-up says the
    records judged hold no finding, and titles the draft so, not "every captured index value
    in range"."""
    import dataclasses

    import forensics
    from forensics.present.conclusion import conclude
    from forensics.present.writeup import to_markdown

    records = [Record("embedding", step, 0, {"input_ids": np.array([5, 6], dtype=np.int64),
                                             "num_embeddings": 32000}) for step in range(2)]
    capture = write_capture(tmp_path / "c.capture", records, events=[
        {"kind": "engine_dead", "step": 1, "rank": 0, "message": "EngineDeadError"}])
    result = forensics.replay(capture)
    conclusion = dataclasses.replace(conclude(result), not_known={"toy": 3})
    text = to_markdown(result, conclusion)
    assert "- **upstream**: no unresolved out-of-bounds finding in the records judged (not all " \
           "were: see above)" in text, text
    assert "every captured index value in range" not in text


def test_the_write_up_offers_no_reproducer_where_repro_has_nothing_to_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T91d: the summary of a clean capture offered "A standalone reproducer ... fails until
    the fix is in" with ``forensics repro CAPTURE -o test_repro.py``, which refuses it ("nothing
    to reproduce", exit 2); a capture with a violation still gets the lines."""
    data = Path(__file__).parent.parent.parent / "data"
    clean = _summary(data / "clean.capture", capsys)
    assert "A standalone reproducer" not in clean and "-o test_repro.py" not in clean
    assert "No standalone reproducer: no variant leaves an index out of range" in clean
    failing = _summary(data / "placeholder-leak.capture", capsys)
    assert "A standalone reproducer" in failing and "No standalone reproducer" not in failing
    assert "-o test_repro.py" in failing


def test_redact_of_a_capture_without_token_ids_says_it_permuted_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T91a: a capture whose records hold no token id (none, or no site holding them) was said
    to have "token ids in [1, 0) permuted", in the line and the manifest."""
    import json

    from forensics.cli import main

    capture = write_capture(tmp_path / "e.capture", [], events=[
        {"kind": "engine_dead", "step": 0, "rank": 0, "message": "EngineDeadError"}])
    capsys.readouterr()
    assert main(["redact", str(capture), "-o", str(tmp_path / "r.capture")]) == 0
    out = capsys.readouterr().out
    assert "[1, 0)" not in out and "no token ids (no record holds any)" in out, out
    manifest = json.loads((tmp_path / "r.capture" / "manifest.json").read_text())
    assert manifest["redaction"]["token_ids"] == "none: no record holds token ids"
