"""Round 12's attacks: a hostile capture author and a hostile local user against what fewer
rounds looked at (the command line's own usage errors, ...)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.cli import main
from forensics.escaping import terminal

ROOT = Path(__file__).resolve().parents[2]
#: a terminal escape that would clear the screen, and one that would set its title
ESCAPES = ("\x1b[2J", "\n\x85x", "\x1b]0;owned\x07", "\x9b31m", "\u202e")


@pytest.mark.parametrize("argv", [
    ["triage", "-{e}.capture", "a.capture"],     # a name a glob (`triage *`) gave as an option
    ["replay", "a.capture", "--v={e}"],          # an ambiguous option with its value
    ["replay", "a.capture", "-x", "{e}"],
])
@pytest.mark.parametrize("escape", ESCAPES)
def test_a_usage_error_prints_the_words_it_quotes_inert(
        argv: list[str], escape: str, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse's own errors (``unrecognized arguments: ...``, ``ambiguous option: ...``) quote
    the words given raw: a capture named ``-\\x1b]0;...`` that ``forensics triage *`` passed as
    an option set the terminal's title. Each is one inert line."""
    with pytest.raises(SystemExit) as ended:
        main([word.format(e=escape) for word in argv])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert escape not in err
    last = err.splitlines()[-1]
    assert last.startswith("forensics") and "error: " in last


@pytest.mark.parametrize("escape", ESCAPES)
def test_the_verdict_table_names_a_diff_variant_inert(escape: str) -> None:
    """``replay --variant vllm+PATH.diff`` (a diff a glob named, ``vllm+incoming/*.diff``):
    the verdict table's column head is the variant's name inert, as every other line of the
    report names it; it was printed raw (an OSC sequence in the file's name set the
    terminal's title)."""
    from forensics.commands.replay import verdict_table

    variant = f"vllm+p{escape}.diff"
    lines = verdict_table({variant: {"embedding": "ok"}}, [variant])
    assert all(escape not in line and "\n" not in line for line in lines)
    head, row = lines
    assert head.split()[1] == f"vllm+p{terminal(escape)}.diff"
    assert head.index(head.split()[1]) == row.index("ok")  # the columns stay aligned


@pytest.mark.parametrize("command", [
    ["known", "{capture}", "--variant", "vllm"],
    ["check", "{capture}", "--variant", "vllm", "--accept"],
    ["shrink", "{capture}", "-o", "{out}", "--variant", "vllm"],
])
def test_a_command_replaying_vllm_prints_no_line_of_torch(command: list[str],
                                                         tmp_path: Path) -> None:
    """``known``, ``check --accept`` and ``shrink`` with ``--variant vllm`` import torch and
    vLLM as ``replay`` does: their import warnings (``W1206 ... torch/_opaque_base.py``) are no
    line of ours and stay out unless ``-v``, as ``replay``'s do; these three printed them."""
    pytest.importorskip("vllm")
    capture = tmp_path / "b.capture"
    shutil.copytree(ROOT / "data" / "incident-b-vocab-sentinel.capture", capture)
    # its expected.json holds upstream's and patched's verdicts, which `check --accept --variant
    # vllm` says it drops (T116f), a line of ours: without the file, any line is torch's
    (capture / "expected.json").unlink()
    argv = [word.format(capture=capture, out=tmp_path / "small.capture") for word in command]
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCH_LOGS", "VLLM_LOGGING_LEVEL", "PYTHONWARNINGS")}
    done = subprocess.run([str(Path(sys.executable).parent / "forensics"), *argv], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert done.stderr == "" and done.stdout


def test_the_suggested_accept_keeps_every_variant_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``check --trust-expected`` (or ``--variant vllm+fix.diff``) on a capture whose
    ``expected.json`` names ``vllm`` beside the models: a difference ends with "to accept it:
    forensics check CAP --accept", which wrote the models' results only, so the ``vllm``
    expectation was dropped and never checked again. The suggested command, run, writes the
    result of every variant that was checked. (The replays are stubbed: the words matter.)"""
    import json
    import shlex

    from forensics.share import expectations

    capture = tmp_path / "b.capture"
    shutil.copytree(ROOT / "data" / "incident-b-vocab-sentinel.capture", capture)
    expected = json.loads((capture / "expected.json").read_text())
    expected["verdicts"]["vllm"] = dict(expected["verdicts"]["upstream"])
    expected["first_finding"]["vllm"] = expected["first_finding"]["upstream"]
    (capture / "expected.json").write_text(json.dumps(expected))

    def obtain(_capture: Path, variants: list[str]) -> expectations.Obtained:
        return expectations.Obtained(
            {**expected, "verdicts": {v: {**expected["verdicts"][v], "embedding": "ok"}
                                      for v in variants},
             "first_finding": {v: None for v in variants}}, {}, 0, "")

    monkeypatch.setattr(expectations, "obtain", obtain)
    assert main(["check", str(capture), "--trust-expected"]) == 1
    out = capsys.readouterr().out
    command = next(line for line in out.splitlines() if "to accept it:" in line)
    accept, suite = command.split("to accept it: forensics ", 1)[1].split("  (in a test suite: ")
    assert shlex.split(suite.removesuffix(")"))[-2:] == ["--forensics-variant", "vllm"]
    argv = shlex.split(accept)
    assert main(argv) == 0
    written = json.loads((capture / "expected.json").read_text())
    assert sorted(written["verdicts"]) == ["patched", "upstream", "vllm"]
