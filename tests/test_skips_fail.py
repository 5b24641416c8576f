"""A skip is no pass: tests/conftest.py fails every skip but a GPU-only one."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


def test_a_skip_fails_unless_it_is_a_gpu_only_check(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(test_skips="""
import pytest

def test_missing_browser():
    pytest.skip("headless Chromium is not installed")

def test_on_a_gpu():
    pytest.skip("GPU-only: needs a CUDA device")

@pytest.mark.xfail(reason="known")
def test_expected_failure():
    assert False
""")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:forensics")
    result.assert_outcomes(failed=1, skipped=1, xfailed=1)
    result.stdout.fnmatch_lines(["*only GPU-only checks may skip: Skipped: headless Chromium*"])
