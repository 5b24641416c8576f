"""Round 8c (T41d): ``~`` in an output path means the home folder to every command.

``findings -o '~/x.csv'`` (and ``report``, ``import``, ``simulate``, ``shrink``, ``redact``)
expanded ``~``; ``plot``, ``repro``, ``triage -o``/``--html`` and ``demo -o`` wrote into a
folder named ``~`` under the current one (``triage --html`` and ``demo`` even split their
output: reports under the home folder, the index under ``./~``). Every output path now goes
through :func:`forensics.atomic.user_path`; a ``~user`` with no home folder here is one line,
not an internal error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.atomic import user_path
from forensics.cli import main
from forensics.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]
CLEAN = str(ROOT / "data" / "clean.capture")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder of its own; the current folder another one."""
    (tmp_path / "home").mkdir()
    (tmp_path / "cwd").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path / "home"


@pytest.mark.parametrize("argv, written", [
    (["plot", CLEAN, "-o", "~/p.png"], ["p.png"]),
    (["findings", CLEAN, "-o", "~/f.csv"], ["f.csv"]),
    (["report", CLEAN, "-o", "~/r.html"], ["r.html"]),
    (["triage", CLEAN, "--workers", "1", "-o", "~/t.csv", "--html", "~/th"],
     ["t.csv", "th/index.html"]),
    (["demo", "--no-reports", "-o", "~/d"], ["d/index.html", "d/clean-verdicts.png"]),
    (["simulate", "clean", "--steps", "3", "-o", "~/s.capture"], ["s.capture/manifest.json"]),
], ids=["plot", "findings", "report", "triage", "demo", "simulate"])
def test_every_output_option_writes_under_the_home_folder(
        home: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
        written: list[str]) -> None:
    assert main(argv) == 0, capsys.readouterr()
    for name in written:
        assert (home / name).is_file(), name
    assert not (Path.cwd() / "~").exists(), sorted(p.name for p in Path.cwd().iterdir())


def test_repro_resolves_its_output_under_the_home_folder(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``repro`` (which needs vLLM to write) checks its output first: the path it names is the
    one under the home folder."""
    (home / "t.py").write_text("")
    assert main(["repro", CLEAN, "-o", "~/t.py"]) == 2
    err = capsys.readouterr().err
    assert f"'{home / 't.py'}' exists; pass --force" in err, err
    assert not (Path.cwd() / "~").exists()


def test_an_unknown_user_is_one_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``~user`` for a user this machine has not: one line naming the path, exit 2 (an
    internal error with "Could not determine home directory" before)."""
    out = "~no-such-user-of-this-machine-8c/f.csv"
    assert main(["findings", CLEAN, "-o", out]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and out in lines[0] and "no home directory" in lines[0], lines
    assert "internal error" not in lines[0]
    with pytest.raises(ConfigurationError, match="no home directory for '~no-such-user"):
        user_path(out)
