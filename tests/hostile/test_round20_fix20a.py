"""Round 20, fix 20a: what no variant judged, composed once (forensics.store.unjudged) and
said by every output: the events the probe left out in ``summary --format text`` and ``check``
(T114a), the records of a site not known here in ``known``'s sentence (T114b), the records the
probe never wrote in ``findings`` (T114c); triage's JSON divergence of a row not compared,
saying so, its values never read as a divergence (T114d); a string list column's strings
counted before any is built (T114e)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rank_engines import engine_ranks
from test_round2 import run_cli
from test_round14_fix14 import plugin_captures  # noqa: F401  (a fixture)
from test_round18_attack18b import _dropped_capture, _lost_records_capture

#: what is said of the 1,200 events the probe left out of its full events file
LEFT_OUT = "1200 event(s) left out by the probe, its events file full"

# ------------------------------ T114a: the events the probe left out, in the text and the check


def test_summary_text_says_the_events_the_probe_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`summary --format text` of a capture whose probe left 1,200 events out (guard_passed_on
    events among the kinds it drops) said "upstream: no violation" alone, where the Markdown
    says the events may be missing: each variant's line says it, as it says the records the
    probe never wrote."""
    code, said, err = run_cli(capsys, "summary", _dropped_capture(tmp_path), "--format", "text")
    assert code == 0, err
    lines = said.splitlines()
    for line, variant in zip(lines, ("upstream", "patched"), strict=False):
        assert line.startswith(f"{variant}: no violation") and f"; not read: {LEFT_OUT}" in line, \
            said


def test_check_says_the_events_the_probe_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`check` of that capture said "matches expected.json" and nothing more (its crash verdict
    rests on events the probe never wrote); it says they were not checked."""
    code, said, err = run_cli(capsys, "check", _dropped_capture(tmp_path))
    assert code == 0, err
    assert "matches expected.json in the records read" in said, said
    assert f"not checked: {LEFT_OUT}; no variant judged what they held" in said, said


# ------------------------------ T114b: known, of records of a site not known to this install

#: what is said of the plugin captures' records of a site this install does not know
NOT_KNOWN = "3 record(s) of site 'toy_gather' (not known to this install)"


@pytest.mark.parametrize("command", ["known", "replay"])
def test_known_does_not_call_records_of_a_site_not_known_no_failure(
        plugin_captures: dict[str, Path],  # noqa: F811  (the fixture)
        capsys: pytest.CaptureFixture[str], command: str) -> None:
    """A capture of one embedding record and 3 records of a plugin's site this install lacks:
    `known` (and the conclusion's known-issue sentence) said "the capture shows no failure to
    report", of 3 records no variant judged. Whether it shows one is not known, naming them."""
    code, said, err = run_cli(capsys, command, plugin_captures["both"])
    assert code == 0, err
    said = " ".join(said.split())
    assert "shows no failure to report" not in said, said
    assert "No known signature matches the records judged; whether the capture shows a " \
        f"failure to report is not known (not judged: {NOT_KNOWN})" in said, said


def test_known_names_the_records_of_a_capture_of_a_site_not_known_only(
        plugin_captures: dict[str, Path],  # noqa: F811  (the fixture)
        capsys: pytest.CaptureFixture[str]) -> None:
    """Of a capture holding the plugin site's records only, `known` says it holds no record
    to judge, and names the records no variant judged."""
    code, said, err = run_cli(capsys, "known", plugin_captures["only"])
    assert code == 0, err
    said = " ".join(said.split())
    assert "the capture holds no record to judge: whether it shows a failure to report is not " \
        f"known (not judged: {NOT_KNOWN})" in said, said


# ------------------------------ T114c: findings, of the records the probe never wrote


def test_findings_says_the_records_the_probe_never_wrote(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`findings` of a capture whose probe recorded 100 records it never wrote said "no
    findings" alone; it says they were not read, as it says a file cut short."""
    code, said, err = run_cli(capsys, "findings", _lost_records_capture(tmp_path))
    assert code == 0, err
    assert said.splitlines()[0] == "no findings", said
    assert "not read: 100 record(s) recorded by the probe and never written (its ring full, or " \
        "its writer stalled or failing); what it held holds no finding" in said, said


# ------------------------------ T114d: triage's JSON, of a divergence not judged


def _json_rows(root: Path) -> dict[str, dict[str, Any]]:
    """The rows of ``triage --format json`` of the captures under ``root``, by name; each
    checked to carry, in the CSV table, its JSON divergence's ``text``."""
    import csv
    import json

    from forensics.fleet.output import render, write_table
    from forensics.fleet.triage import triage

    result = triage([root], workers=1)
    rows = {r["name"]: r for r in json.loads(render(result, "json"))["rows"]}
    with write_table(result, root.parent / "t.csv").open(encoding="utf-8") as held:
        for cell in csv.DictReader(held):
            said = (rows[cell["name"]]["divergence"] or {}).get("text", "")
            assert cell["divergence"] == said, (cell, rows[cell["name"]])
    return rows


def test_json_of_a_rank_compared_up_to_the_first_divergence_holds_no_values(
        tmp_path: Path) -> None:
    """Rank 2's ids differ at step 5, rank 1's at step 9: rank 1's row (`divergence not
    judged`) carried in JSON the divergence of ranks 0 and 2, its ``values`` those of the
    others' ids, marked ``stopped`` only: a consumer reading ``divergence.values`` read a
    divergence of rank 1 that was never compared. It says it was not judged, from which step
    and why, and what was compared (up to step 5, ranks 0 and 2), with no values."""
    engine_ranks(tmp_path / "fleet", 3, {0: 1, 1: 1, 2: 1}, [(2, 5), (1, 9)], [])
    rows = _json_rows(tmp_path / "fleet")
    stopped = rows["engine-x-rank1.capture"]["divergence"]
    assert stopped["judged"] is False and "values" not in stopped, stopped
    assert stopped["reason"] == "the engine's ranks were compared up to its first divergence " \
        "only", stopped
    assert stopped["not_compared"] == {"from_step": 5}, stopped
    assert (stopped["compared"]["up_to_step"], stopped["compared"]["ranks"]) == (5, [0, 2])
    assert "values" not in stopped["compared"], stopped
    found = rows["engine-x-rank0.capture"]["divergence"]
    assert found["judged"] is True and found["step"] == 5 and len(found["values"]) == 2, found


def test_json_of_a_step_not_compared_holds_its_record_counts_not_values(
        tmp_path: Path) -> None:
    """Rank 0 holds 2 embedding records at step 5, rank 1 3: the JSON ``values`` [2, 3] were
    record counts, read as a divergence's values; they are ``not_compared.records``, with the
    reason, ``judged`` false. So is the step not compared before a divergence (``before``)."""
    engine_ranks(tmp_path / "fleet", 2, {0: 2, 1: 3}, [], [])
    for row in _json_rows(tmp_path / "fleet").values():
        div = row["divergence"]
        assert div["judged"] is False and "values" not in div, div
        assert div["not_compared"]["records"] == [2, 3] and div["not_compared"]["step"] == 5
        assert div["reason"] == "more calls, or records dropped: no call can be paired with " \
            "its own", div
    engine_ranks(tmp_path / "other", 3, {0: 2, 1: 3, 2: 2}, [(2, 7)], [])
    found = _json_rows(tmp_path / "other")["engine-x-rank0.capture"]["divergence"]
    assert found["judged"] is True and found["step"] == 7, found
    assert found["before"]["judged"] is False and "values" not in found["before"], found


# ------------------------------ T114e: a string list of very many strings, counted first


@pytest.mark.parametrize("ids", [
    pytest.param(lambda: [""] * 3_000_000, id="three million empty strings"),
    pytest.param(lambda: [f"r{i}" for i in range(1_000_000)], id="a million distinct ids"),
])
def test_a_string_list_of_very_many_strings_is_refused_before_they_are_built(
        tmp_path: Path, ids: Any) -> None:
    """A capture whose record's ``req_ids`` holds three million empty strings (12 MB of
    offsets) or a million distinct ids: every reader built each string (20 million empty
    ones, a 77 MB capture: 2.7 s of CPU and 949 MiB peak; 8 million distinct, 91 MB: 8.2 s and
    2.05 GiB) before the record's check refused it. Each row's strings are counted from the
    column's offsets first (at most one per request of a batch, as a ragged field's lists):
    one line naming the segment, the row, the field, the count and the cap."""
    from test_round4_store import peak_growth
    from test_round19_fix19a import _async_capture

    import forensics
    from forensics.errors import CaptureFormatError

    value = ids()
    count = len(value)
    capture = _async_capture(tmp_path / "c.capture", req_ids=value)
    del value

    def read() -> None:
        with pytest.raises(CaptureFormatError, match="counted before") as caught:
            list(forensics.load(capture).records())
        message = str(caught.value)
        assert f"field 'req_ids' holds {count} strings, past the 262144" in message and \
            "row 0" in message and "async_output" in message, message

    assert peak_growth(read) < 48 << 20


def test_replay_and_the_writer_refuse_a_string_list_of_very_many_strings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`replay` (the columnar path) refuses that capture in one line; `write_capture`
    (validating) refuses such a record, naming the field, the count and the cap, and writes
    nothing: no writer of ours writes what a reader refuses."""
    from test_round19_fix19a import _async_capture

    from forensics.errors import CaptureFormatError
    from forensics.records import Record
    from forensics.store.writer import write_capture

    ids = [f"r{i}" for i in range(300_000)]
    capture = _async_capture(tmp_path / "c.capture", req_ids=ids)
    code, said, err = run_cli(capsys, "replay", capture)
    assert code == 2 and len(err.strip().splitlines()) == 1, (code, said, err)
    assert "field 'req_ids' holds 300000 strings, past the 262144" in err, err
    record = Record("async_output", 1, 0, {
        "req_ids": ids, "prev_req_id_to_index": {"a": 0}, "vocab_size": 100,
        "sampled_token_ids_cpu": np.zeros((1, 1), np.int32), "output_token_ids": [[1]]})
    with pytest.raises(CaptureFormatError) as caught:
        write_capture(tmp_path / "w.capture", [record])
    assert "field 'req_ids' holds 300000 strings, past the 262144" in str(caught.value)
    assert not (tmp_path / "w.capture").exists()
