"""The pytest plugin, driven through pytester: pass, fail with an obtained file, regenerate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics import expectations
from tests.conftest import embedding_records

pytest_plugins = ["pytester"]


@pytest.fixture
def captures(tmp_path: Path, make_capture) -> Path:
    path = make_capture("sink", embedding_records(bad_step=2))
    expectations.regenerate(path)
    return path.parent


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_other="def test_other():\n    assert True\n")
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def test_expected_file_holds_the_replayed_verdicts(captures: Path) -> None:
    data = json.loads((captures / "sink.capture/expected.json").read_text())
    assert data["verdicts"]["upstream"]["embedding"] == "violation"
    assert data["first_finding"]["upstream"]["step"] == 2
    assert data["first_finding"]["upstream"]["value"] == 248320


def test_a_matching_capture_passes(pytester: pytest.Pytester, captures: Path) -> None:
    result = _run(pytester, "--forensics-captures", str(captures))
    result.assert_outcomes(passed=2)


def test_marker_selects_exactly_the_captures(pytester: pytest.Pytester, captures: Path) -> None:
    result = _run(pytester, "--forensics-captures", str(captures), "-m", "forensics_capture")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*1 passed, 1 deselected*"])


def test_a_changed_capture_fails_then_regen_accepts(pytester: pytest.Pytester,
                                                     captures: Path) -> None:
    capture = captures / "sink.capture"
    expected = json.loads((capture / "expected.json").read_text())
    expected["verdicts"]["patched"]["embedding"] = "ok"
    (capture / "expected.json").write_text(json.dumps(expected))

    failed = _run(pytester, "--forensics-captures", str(captures))
    failed.assert_outcomes(passed=1, failed=1)
    failed.stdout.fnmatch_lines(["*patched/embedding: expected verdict 'ok', got 'violation'*",
                                 "*--forensics-regen*"])
    assert (capture / "expected.obtained.json").exists()

    _run(pytester, "--forensics-captures", str(captures), "--forensics-regen")
    again = _run(pytester, "--forensics-captures", str(captures))
    again.assert_outcomes(passed=2)
    assert not (capture / "expected.obtained.json").exists()


def test_a_variant_missing_from_expected_fails_with_a_hint(pytester: pytest.Pytester,
                                                           captures: Path) -> None:
    result = _run(pytester, "--forensics-captures", str(captures),
                  "--forensics-variant", "mine")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*variant 'mine' is not in expected.json*regenerate*"])


def test_ini_option_collects_too(pytester: pytest.Pytester, captures: Path) -> None:
    pytester.makeini(f"[pytest]\nforensics_captures = {captures}\n")
    result = _run(pytester)
    result.assert_outcomes(passed=2)
