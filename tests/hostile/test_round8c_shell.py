"""Round 8c (T41b): the command lines we suggest are shell-safe and terminal-safe.

``check``'s hint "to accept it: forensics check PATH --accept (in a test suite: pytest
--forensics-captures DIR --forensics-regen)" printed the capture's path escaped for the terminal
but unquoted: pasted into a shell, a name with a space named two files, ``;`` or ``$(...)`` ran
a command of the capture's author, and a leading ``-`` was read as an option. Every suggested
command now writes each word through :func:`forensics.escaping.shell_word` (a path through
:func:`~forensics.escaping.shell_path`): the shell reads back that very word, and the line holds
no character a terminal acts on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from forensics.cli import main
from forensics.escaping import inert, shell_path, shell_word
from forensics.present.writeup import repro_lines, reproduce_commands

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "data" / "incident-b-vocab-sentinel.capture"

#: file names a shell or a terminal would act on: spaces, separators, substitutions, quotes,
#: a leading dash, ESC, a bidi override, a newline, C1, a byte that is not UTF-8, noncharacters
NAMES = ["a b", "x;touch PWNED", "$(touch PWNED)", "`touch PWNED`", "it's \"q\"", "-rf",
         "--accept", "back\\slash", "esc\x1b[31mred", "bidi\u202etxt.exe", "new\nline",
         "c1\x85", "not-utf8-\udcff", "nonchar\ufdd0\U0001fffe", "tab\there", "~user", "*"]


def _argv(line: str, cwd: Path) -> list[bytes]:
    """The words bash reads in ``line`` (nothing is run: they are only printed)."""
    done = subprocess.run(["bash", "-c", f"set -- {line}; printf '%s\\0' \"$@\""], cwd=cwd,
                          capture_output=True, check=True,
                          env={**os.environ, "LC_ALL": "C.UTF-8"})
    return done.stdout.split(b"\0")[:-1]


@pytest.mark.parametrize("name", NAMES)
def test_a_shell_word_is_read_back_as_itself_and_prints_inert(tmp_path: Path,
                                                              name: str) -> None:
    word = shell_word(name)
    assert inert(word) == word, ascii(word)  # nothing a terminal acts on
    assert _argv(word, tmp_path) == [os.fsencode(name)], ascii(word)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("name", NAMES)
def test_a_shell_path_starting_with_a_dash_is_no_option(tmp_path: Path, name: str) -> None:
    word = shell_path(name)
    (got,) = _argv(word, tmp_path)
    assert not got.startswith(b"-")
    assert (tmp_path / os.fsdecode(got)).resolve() == (tmp_path / name).resolve()


def _hint(out: str) -> str:
    (line,) = [x for x in out.splitlines() if "to accept it:" in x]
    return line


@pytest.mark.parametrize("name", ["-x b;$(touch PWNED)'\".capture",
                                  "esc\x1b]0;title\x07\u202e-\udcff.capture"])
def test_checks_hint_is_the_command_that_accepts_this_capture(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        name: str) -> None:
    """The two commands of the hint, pasted into bash, name this capture and its folder (and
    run nothing else); the line holds no control character."""
    monkeypatch.chdir(tmp_path)
    capture = tmp_path / name
    shutil.copytree(INCIDENT, capture)
    expected = capture / "expected.json"
    expected.write_text(expected.read_text().replace('"crash_verdict": "explained"',
                                                     '"crash_verdict": "unexplained"'))
    assert main(["check", f"./{name}"]) == 1
    line = _hint(capsys.readouterr().out)
    assert inert(line) == line, ascii(line)
    accept, suite = line.split("to accept it: ", 1)[1].split("  (in a test suite: ")
    assert _argv(accept, tmp_path)[:2] == [b"forensics", b"check"]
    assert _argv(accept, tmp_path)[3:] == [b"--accept"]
    (word,) = _argv(accept, tmp_path)[2:3]
    assert (tmp_path / os.fsdecode(word)).resolve() == capture.resolve()
    argv = _argv(suite.removesuffix(")"), tmp_path)
    assert argv[:2] == [b"pytest", b"--forensics-captures"] and argv[3:] == [b"--forensics-regen"]
    assert (tmp_path / os.fsdecode(argv[2])).resolve() == tmp_path.resolve()
    assert not (tmp_path / "PWNED").exists()


def test_the_write_ups_commands_name_the_capture(tmp_path: Path) -> None:
    """``summary``'s Reproduce commands: the capture's path as one word, never as an option,
    and a character the terminal would act on written as an escape the shell reads back."""
    name = "-e\x1b[2Jx $(touch PWNED).capture"
    lines = reproduce_commands(name, ["upstream", "vllm+a b.diff"]) + repro_lines(name)[-3:-2]
    for line in lines:
        assert inert(line) == line, ascii(line)
        argv = _argv(line, tmp_path)
        assert argv[2] == os.fsencode("./" + name), argv
    assert _argv(lines[0], tmp_path)[-2:] == [b"--variant", b"vllm+a b.diff"]
    assert not (tmp_path / "PWNED").exists()
