"""Replacing a capture with --force survives a SIGKILL at every rename and unlink."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from replace_driver import records

from forensics.store.reader import load
from forensics.store.replace import install, recover, tmp_path
from forensics.store.writer import write_capture

DRIVER = Path(__file__).with_name("replace_driver.py")


def test_a_sigkill_at_every_step_leaves_the_old_or_the_new_capture_whole(tmp_path: Path
                                                                         ) -> None:
    run = subprocess.run([sys.executable, str(DRIVER), str(tmp_path)], capture_output=True,
                         text=True, timeout=300, check=True)
    trials = [json.loads(line) for line in run.stdout.splitlines()]
    killed = [t for t in trials if t["killed"]]
    assert len(killed) >= 8, run.stdout  # build, journal, both renames, every removal
    assert not trials[-1]["killed"] and trials[-1]["records"] == 5
    for trial in trials:
        assert trial["records"] in (3, 5) and trial["whole"], trial
        # rolled forward or back; a build killed before the journal is left to the next
        # writer, which clears it
        dead = (".x.capture.tmp-", ".x.capture.replacing.")
        assert all(n == "x.capture" or n.startswith(dead) for n in trial["left"]), trial
        assert trial["after_write"] == ["x.capture"] and trial["rewritten"] == 7, trial
    counts = [t["records"] for t in trials]
    # old until the new one is renamed into place, new from then on (never back)
    assert counts == sorted(counts) and counts[0] == 3


def test_recover_rolls_forward_when_only_the_new_capture_is_left(tmp_path: Path) -> None:
    out = tmp_path / "x.capture"
    write_capture(out, records(2))
    new = write_capture(tmp_path / "new.capture", records(4))
    new.rename(tmp_path / ".x.capture.tmp-999999")
    aside = tmp_path / ".x.capture.old-999999"
    out.rename(aside)  # the state between the two renames of process 999999 (gone)
    (tmp_path / ".x.capture.replacing").write_text(json.dumps({"pid": 999999,
                                                               "host": socket.gethostname()}))
    recover(out)
    assert len(load(out)) == 4 and sorted(p.name for p in tmp_path.iterdir()) == ["x.capture"]


def test_a_journal_naming_a_live_process_is_left_alone(tmp_path: Path) -> None:
    out = write_capture(tmp_path / "x.capture", records(2))
    journal = tmp_path / ".x.capture.replacing"
    journal.write_text(json.dumps({"pid": 1, "host": socket.gethostname()}))  # alive, not ours
    recover(out)
    assert journal.exists() and len(load(out)) == 2


def test_install_without_an_old_capture_is_one_rename(tmp_path: Path) -> None:
    out = tmp_path / "x.capture"
    built = write_capture(tmp_path / "b.capture", records(1))
    built.rename(tmp_path_of := tmp_path_for(out))
    install(tmp_path_of, out)
    assert len(load(out)) == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["x.capture"]


def tmp_path_for(out: Path) -> Path:
    """Where this process builds ``out``."""
    return tmp_path(out)


def test_a_journal_of_another_host_is_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "x.capture"
    write_capture(tmp_path / "new.capture", records(4)).rename(tmp_path / ".x.capture.tmp-7")
    journal = tmp_path / ".x.capture.replacing"
    journal.write_text(json.dumps({"pid": 7, "host": "another-" + socket.gethostname()}))
    recover(out)  # its process may be alive there: nothing is moved
    assert journal.exists() and not out.exists()
