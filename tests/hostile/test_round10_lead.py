"""Hostile input, round 10 (T50b-d): the probe's own messages name a capture folder escaped, as
every other message does: a folder name holding a line break or ESC (``FORENSICS_DIR`` and
``FORENSICS_CAPTURE`` come from whoever starts the engine) cannot forge a line of vLLM's log or
drive the terminal, and two names alike but for ESC and the text ``\\x1b`` are named apart."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from forensics.probe import owned
from forensics.probe.settings import from_env

EVIL = "run\n[INFO] all good\x1b[2J.capture"
TWIN = "run\n[INFO] all good\\x1b[2J.capture"


def _refused(path: Path, owner: str) -> str:
    with pytest.raises(PermissionError) as raised:
        owned.OwnedFolder(path, owner)
    return str(raised.value)


def test_a_folder_that_is_not_the_probes_is_named_escaped(tmp_path: Path) -> None:
    (tmp_path / EVIL).mkdir()
    (tmp_path / TWIN).mkdir()
    evil, twin = _refused(tmp_path / EVIL, "0:0:0"), _refused(tmp_path / TWIN, "0:0:0")
    for message in (evil, twin):
        assert "\n" not in message and "\x1b" not in message, repr(message)
        assert "the probe writes only into the folder its first process made" in message
    assert "run\\x0a[INFO] all good\\x1b[2J.capture" in evil, evil
    assert evil != twin


def test_an_inherited_folder_not_joined_is_logged_escaped(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = from_env({"FORENSICS_PROBE": "1", "FORENSICS_DIR": str(tmp_path)})
    assert settings is not None
    inherited = dataclasses.replace(settings, capture=tmp_path / EVIL, owner="0:0:0")
    with caplog.at_level(logging.WARNING):
        made = owned.claim(inherited)
    (line,) = [r.getMessage() for r in caplog.records if "is not joined" in r.getMessage()]
    assert "\n" not in line and "\x1b" not in line, repr(line)
    assert "run\\x0a[INFO] all good\\x1b[2J.capture" in line, line
    assert made.capture != tmp_path / EVIL and made.capture.is_dir()


# ------------------------------------------------------------ T50c: characters drawn as nothing

INVISIBLE = ["\u00ad", "\u034f", "\u115f", "\u180e", "\u200b", "\u200c", "\u200d", "\u2060",
             "\u2063", "\u3164", "\ufe0f", "\uffa0"]


@pytest.mark.parametrize("mark", INVISIBLE)
def test_a_name_holding_a_character_drawn_as_nothing_reads_apart(mark: str) -> None:
    """``run.capture`` and ``run<U+200B>.capture`` were written alike: one could stand for the
    other in every message and table. The character is written as its escape now."""
    from forensics.escaping import terminal

    name = f"ru{mark}n.capture"
    assert terminal(name) != terminal("run.capture")
    assert terminal(name) == f"ru\\u{ord(mark):04x}n.capture" or \
        terminal(name) == f"ru\\x{ord(mark):02x}n.capture", terminal(name)


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_a_suggested_command_gives_such_a_name_back_whole(shell: str, tmp_path: Path) -> None:
    """The command lines we suggest (``shell_word``) hold the character as an escape, and a
    POSIX shell reads the very name back."""
    import shutil
    import subprocess

    from forensics.escaping import shell_word

    program = shutil.which(shell)
    assert program, f"{shell} is missing"
    name = "ru\u200bn\u00ad.capture"
    word = shell_word(name)
    assert "\u200b" not in word and "\u00ad" not in word, word
    done = subprocess.run([program, "-c", f"printf %s {word}"], capture_output=True,
                          check=True, timeout=30)
    assert done.stdout == name.encode(), done.stdout


# ------------------------------------------------ T50d: how V2's kernel worker died, in words

DIES = {"SIGSEGV": "os.kill(os.getpid(), signal.SIGSEGV)",
        "SIGKILL": "os.kill(os.getpid(), signal.SIGKILL)", "exit 3": "sys.exit(3)"}


@pytest.mark.parametrize("how", list(DIES))
def test_a_kernel_worker_that_died_is_an_illegal_access_only_by_its_signal(
        how: str, tmp_path: Path) -> None:
    """V2's real-code variant said of every worker death "an illegal memory access": one the
    OOM killer ended (SIGKILL) or that exited was an IndexError the values never showed. Only
    SIGSEGV or SIGBUS (what an access outside the memory a CPU process holds gets) is one; any
    other end is an error the values do not explain, saying how it ended."""
    import subprocess
    import sys

    from forensics.outcome import ERROR, INDEX_ERROR
    from forensics.records import Record
    from forensics.variants.triton_kernels import KernelWorker, Lines

    worker = KernelWorker()
    script = f"import os, signal, sys\nsys.stdin.readline()\n{DIES[how]}\n"
    worker._process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)
    worker._lines = Lines(worker._process.stdout)
    request = {"inputs": str(tmp_path / "in.npz"), "outputs": str(tmp_path / "out.npz")}
    worker._request = lambda record: request  # type: ignore[method-assign]
    (outcome,) = worker._exchange([Record("combine_tokens", 0, 0, {})])
    worker.close()
    if how == "SIGSEGV":
        assert outcome.status == INDEX_ERROR and "SIGSEGV" in outcome.message, outcome
    else:
        assert outcome.status == ERROR and "not explained by the values" in outcome.message
        assert ("killed by SIGKILL" if how == "SIGKILL" else "exited with status 3") \
            in outcome.message, outcome.message
        assert "illegal memory access" not in outcome.message
