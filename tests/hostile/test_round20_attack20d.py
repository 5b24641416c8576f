"""Round 20, attack 20d: triage, redact, report and plot over hostile and odd-but-legal
captures; what no variant judged survives a redaction (T121a)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_round2 import check_said, run_cli
from test_round14_fix14 import plugin_captures  # noqa: F401  (a fixture)
from test_round18_attack18b import _dropped_capture

#: what is said of the 1,200 events the probe left out of its full events file
LEFT_OUT = "1200 event(s) left out by the probe, its events file full"


def test_a_redacted_capture_says_the_events_its_probe_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`redact` of a capture whose probe left 1,200 events out of its full events file (its
    ``probe_stop``'s ``events_dropped``) dropped that count (no key of the closed
    vocabulary): the redacted capture's replay said "the capture shows no failure to report"
    where the original's says whether it shows one is not known. The count is kept."""
    original = _dropped_capture(tmp_path)
    code, said, err = run_cli(capsys, "redact", original, "-o", tmp_path / "red.capture")
    assert code == 0, err
    for capture in (original, tmp_path / "red.capture"):
        code, said, err = run_cli(capsys, "replay", capture)
        assert code == 0, err
        said = " ".join(said.split())
        assert f"(not judged: {LEFT_OUT})" in said, said
        assert "shows no failure to report" not in said, said



@pytest.mark.parametrize("kind", ["only", "both"])
def test_a_redacted_capture_says_the_records_of_a_site_not_known_it_could_not_keep(
        plugin_captures: dict[str, Path], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str], kind: str) -> None:
    """`redact` of a capture holding 3 records of a site this install does not know drops them
    (which of their fields hold token ids is not known): the redacted capture's replay said
    "No known signature matches, and the capture shows no failure to report" where the
    original's says whether it shows one is not known, and a triage of the redacted capture of
    those records only said "holds no records: nothing to replay (the probe saw no call, or its
    segments were removed)". Each says what was not kept."""
    out = tmp_path / "red.capture"
    code, said, err = run_cli(capsys, "redact", plugin_captures[kind], "-o", out)
    assert code == 0, err
    check_said(capsys, ("replay", out),
               "No variant judged 3 record(s) of site 'toy_gather' (not known to the install "
               "that redacted it), in the capture this one was redacted from (not kept by the "
               "redaction)", ("shows no failure to report",))
    for command in ("known", "findings", "triage"):
        code, said, err = run_cli(capsys, command, out)
        assert "3 record(s) of site 'toy_gather'" in " ".join(said.split()), (command, said)


def test_a_redacted_capture_says_a_file_cut_short_it_could_not_keep(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`redact` of a capture whose events file's last line was cut short (not read) wrote a
    whole one: its replay said nothing of the cut where the original's says "Not read: the end
    of events file ...". It says the original held a file cut short (not its name: a file's
    name holds its host and pid), and so does a redaction of the redacted capture; `redact`
    says it dropped the cut end; triage's group is not titled "sites not known to this
    install"."""
    original = _dropped_capture(tmp_path)
    with (original / "events-w0.jsonl").open("a") as events:
        events.write('{"kind": "probe_st')
    red, again = tmp_path / "red.capture", tmp_path / "again.capture"
    code, said, err = run_cli(capsys, "redact", original, "-o", red)
    assert code == 0 and "the ends of 1 file(s) cut short (not read)" in said, (said, err)
    code, said, err = run_cli(capsys, "redact", red, "-o", again)
    assert code == 0, err
    for capture in (red, again):
        code, said, err = run_cli(capsys, "replay", capture)
        assert code == 0, err
        said = " ".join(said.split())
        assert ("No variant judged the ends of 1 file(s) cut short, in the capture this one "
                "was redacted from (not kept by the redaction)") in said, said
    code, said, err = run_cli(capsys, "triage", red)
    assert code == 0, err
    assert "records not judged (events left out, records its redaction did not keep)" in said, \
        said
