"""Round 23 (attack23a): a held-out attack on hostile input (issue 38, round 3).

1. ``forensics simulate SCENARIO -o "$OUT"`` with ``OUT`` unset (and the Python API's
   ``simulate(..., out="")``) took the empty path for the working directory: "output '<cwd>'
   exists; pass --force (force=True) to replace it", and with ``--force`` it replaced an empty
   working directory (or a capture one worked in) by the new capture. It is refused in one
   line now, nothing written (T140a).
2. ``triage -o "" / --html ""`` wrote nothing and said nothing (exit 0), and ``findings -o ""``
   printed its table where a file was asked for: an empty output is refused in one line
   before any replay now (T140b).
3. The pytest plugin's ``--forensics-captures ""`` collected the working directory's captures
   (and wrote their ``expected.json``): an empty root names no capture now (T140c).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_round2 import run_cli

# ------------------------------------------------- T140a: simulate -o "" is no working directory


@pytest.mark.parametrize("force", [False, True])
def test_simulate_refuses_an_empty_output(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch, force: bool) -> None:
    """``simulate clean -o ""`` (``--force`` too) is one line naming the empty path, exit 2;
    the working directory is left as it was (it was replaced by the capture)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out, err = run_cli(capsys, "simulate", "clean", "-o", "", "--steps", 3,
                             *(["--force"] if force else []))
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "the path '' is empty" in err, err
    assert list(work.iterdir()) == [] and (work.stat().st_mode & 0o777) != 0o700


@pytest.mark.parametrize("scenario", ["clean", "v2-clean"])
def test_the_api_simulate_refuses_an_empty_output(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  scenario: str) -> None:
    """``forensics.simulate(..., out="", force=True)`` raises a ConfigurationError of one line;
    nothing is written in the working directory."""
    from forensics import simulate
    from forensics.errors import ConfigurationError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="the path '' is empty"):
        simulate(scenario, steps=3, out="", force=True)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------- T140b: triage's and findings' empty outputs refused


@pytest.mark.parametrize("option", ["-o", "--html"])
def test_triage_refuses_an_empty_output(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        option: str) -> None:
    """``triage CAPTURE -o ""`` (``--html ""``) is one line, exit 2, nothing replayed: it
    printed the table and wrote nothing, unsaid, exit 0."""
    from cases import capture

    path = capture(tmp_path, 2, "x")
    code, out, err = run_cli(capsys, "triage", path, option, "", "--workers", 1)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "the path '' is empty" in err, err


def test_findings_refuses_an_empty_output(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``findings CAPTURE -o ""`` is one line, exit 2: it printed the findings' table."""
    from cases import capture

    path = capture(tmp_path, 2, "x")
    code, out, err = run_cli(capsys, "findings", path, "-o", "")
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "the path '' is empty" in err, err


# --------------------------------------- T140c: the pytest plugin's empty root names no capture


class _Config:
    """The two settings :func:`forensics.pytest_plugin._collected` reads: ``--forensics-captures``
    as given, and no ini roots."""

    def __init__(self, *roots: str) -> None:
        self.roots = list(roots)

    def getoption(self, name: str) -> list[str]:
        return self.roots

    def getini(self, name: str) -> list[Path]:
        return []


def test_the_pytest_plugin_refuses_an_empty_root(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``pytest --forensics-captures ""`` (an unset variable) collects no capture of the
    working directory (it collected them, and wrote each one's expected.json): the root is
    said to name no file, as ``triage ""`` says."""
    from cases import capture

    from forensics.pytest_plugin import _collected

    capture(tmp_path, 2, "x")
    monkeypatch.chdir(tmp_path)
    found, empty = _collected(_Config(""))  # type: ignore[arg-type]
    assert found == [] and len(empty) == 1, (found, empty)
    assert "--forensics-captures" in empty[0][1] and "the path '' is empty" in empty[0][1]
    found, empty = _collected(_Config("x.capture"))  # type: ignore[arg-type]
    assert [p.name for p in found] == ["x.capture"] and empty == []
