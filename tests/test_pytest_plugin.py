"""The pytest plugin, driven through pytester: pass, fail with an obtained file, regenerate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.share import expectations
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
                  "--forensics-variant", "vllm")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*variant 'vllm' is not in expected.json*regenerate*"])


def test_a_variant_no_name_registers_fails_naming_it(pytester: pytest.Pytester,
                                                     captures: Path) -> None:
    """Regenerating with a variant that does not exist could only fail: no such hint."""
    result = _run(pytester, "--forensics-captures", str(captures),
                  "--forensics-variant", "mine")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*unknown variant 'mine'*"])
    result.stdout.no_fnmatch_line("*regenerate*")


def test_ini_option_collects_too(pytester: pytest.Pytester, captures: Path) -> None:
    pytester.makeini(f"[pytest]\nforensics_captures = {captures}\n")
    result = _run(pytester)
    result.assert_outcomes(passed=2)


def test_captures_are_collected_and_listed_with_their_path(pytester: pytest.Pytester,
                                                           captures: Path) -> None:
    result = _run(pytester, "--forensics-captures", str(captures), "--collect-only", "-q")
    result.stdout.fnmatch_lines([f"{captures / 'sink.capture'}", "*2 tests collected*"])
    plain = _run(pytester, "--forensics-captures", str(captures))
    plain.stdout.fnmatch_lines(["collected 2 items"])
    verbose = _run(pytester, "--forensics-captures", str(captures), "-v")
    verbose.stdout.fnmatch_lines([f"*/{captures.name}/sink.capture PASSED*"])


def test_a_capture_without_expected_fails_first_then_passes(pytester: pytest.Pytester,
                                                            captures: Path) -> None:
    expected = captures / "sink.capture" / "expected.json"
    expected.unlink()
    first = _run(pytester, "--forensics-captures", str(captures))
    first.assert_outcomes(passed=1, failed=1)
    first.stdout.fnmatch_lines(["*no expected.json yet; wrote*", f"wrote {expected}"])
    assert expected.exists()
    _run(pytester, "--forensics-captures", str(captures)).assert_outcomes(passed=2)


def test_regen_lists_every_file_it_wrote(pytester: pytest.Pytester, captures: Path,
                                         make_capture) -> None:
    other = make_capture("second", embedding_records())
    result = _run(pytester, "--forensics-captures", str(captures), "--forensics-regen")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*forensics: expected.json written*",
                                 f"wrote {captures / 'second.capture' / 'expected.json'}",
                                 f"wrote {captures / 'sink.capture' / 'expected.json'}"])
    assert (other / "expected.json").exists()


def test_check_accept_writes_one_capture_baseline(make_capture,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.cli import main

    path = make_capture("fresh", embedding_records(bad_step=1))
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no expected results" in err and f"`forensics check {path} --accept`" in err
    assert "forensics-regen" not in err  # issue 42 point 8: the command, not the plugin
    assert main(["check", str(path), "--accept"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {path / 'expected.json'}"
    assert main(["check", str(path)]) == 0
    expected = json.loads((path / "expected.json").read_text())
    expected["verdicts"]["patched"]["embedding"] = "ok"
    (path / "expected.json").write_text(json.dumps(expected))
    assert main(["check", str(path)]) == 1
    assert f"to accept it: forensics check {path} --accept" in capsys.readouterr().out


def test_bare_pytest_with_captures_outside_the_repo_collects_without_errors(
        tmp_path: Path, captures: Path) -> None:
    import subprocess
    import sys
    from pathlib import Path as P

    root = P(__file__).resolve().parents[1]
    pytest_bin = P(sys.executable).with_name("pytest")
    run = subprocess.run([str(pytest_bin), "-p", "no:cacheprovider", "--forensics-captures",
                          str(captures), "-m", "forensics_capture", "--collect-only", "-q"],
                         cwd=root, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "error" not in run.stdout.lower() and f"{captures / 'sink.capture'}" in run.stdout
