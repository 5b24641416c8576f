"""Round 12's outputs (T52a-c): no command writes into a capture it reads, and no output is
written through a link another user planted on its way (a parent folder's link in a sticky
folder every user may write, as Linux's ``fs.protected_symlinks`` refuses it)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from forensics.cli import main
from tests.conftest import DATA

#: another user: the owner of a planted link
STRANGER = 65534


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"/"
            for p in sorted(folder.rglob("*"))}


def _argv(command: str, capture: Path, out: str, log: Path) -> list[str]:
    """The command line of ``command`` reading ``capture`` (a log for ``import``, none for
    ``simulate``) and writing ``out`` (a suffix added as the command wants)."""
    return {"plot": ["plot", str(capture), "-o", f"{out}.png"],
            "findings": ["findings", str(capture), "-o", f"{out}.csv"],
            "report": ["report", str(capture), "-o", f"{out}.html"],
            "repro": ["repro", str(capture), "-o", f"{out}.py"],
            "redact": ["redact", str(capture), "-o", f"{out}.capture"],
            "shrink": ["shrink", str(capture), "-o", f"{out}.capture"],
            "triage -o": ["triage", str(capture), "--workers", "1", "-o", f"{out}.csv"],
            "triage --html": ["triage", str(capture), "--workers", "1", "--html", out],
            "import": ["import", str(log), "-o", f"{out}.capture"],
            "simulate": ["simulate", "clean", "--steps", "2", "-o", f"{out}.capture"]}[command]


READERS = ["plot", "findings", "report", "repro", "redact", "shrink", "triage -o",
           "triage --html"]


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    """A copy of a small capture with a finding, with a sub-folder to name a path through."""
    path = tmp_path / "c.capture"
    shutil.copytree(DATA / "stale-prev-row.capture", path)
    (path / "sub").mkdir()
    (tmp_path / "link").symlink_to(path)
    return path


# ------------------------------------------------ T52a: never into the capture being read


@pytest.mark.parametrize("way", ["inside", "through a link", "through .."])
@pytest.mark.parametrize("command", READERS)
def test_no_command_writes_into_the_capture_it_reads(
        capture: Path, capsys: pytest.CaptureFixture[str], command: str, way: str) -> None:
    """``plot C -o C/fig.png``, ``findings``, ``report``, ``redact``, ``shrink`` (``-o
    C/sub/x.capture``) wrote into the capture they had just read (``repro`` and ``triage``
    refused, each with its own copy of the check): one check now, one line naming the path,
    the capture and the fix, exit 2, and the capture is left byte for byte; a path reaching
    the capture through a link, or through ``..``, is inside it too."""
    out = {"inside": capture / "sub" / "x", "through a link": capture.parent / "link" / "x",
           "through ..": capture / "sub" / ".." / "x"}[way]
    before = _snapshot(capture)
    assert main(_argv(command, capture, str(out), capture)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "is inside the capture" in err, err
    assert f"'{capture}'" in err and "write it outside the capture's folder" in err, err
    assert _snapshot(capture) == before


def test_demo_writes_into_no_capture_it_reads(capture: Path) -> None:
    """``demo -o DIR`` reads the bundled captures: a DIR inside one of them is refused."""
    from forensics.errors import ConfigurationError
    from forensics.present.demo import run_demo

    before = _snapshot(capture)
    with pytest.raises(ConfigurationError, match="is inside the capture"):
        run_demo(capture / "reports", data_dir=capture.parent, with_reports=False)
    assert _snapshot(capture) == before


def test_one_check_serves_every_command() -> None:
    """The check is declared once (``forensics.atomic``): the copies ``repro`` and ``triage``
    had are gone."""
    import forensics.fleet.output as fleet_output
    import forensics.share.repro as repro
    from forensics import atomic

    assert callable(atomic.refuse_inside_captures)
    assert not hasattr(repro, "refuse_inside_capture")
    assert fleet_output.refuse_inside_captures is atomic.refuse_inside_captures


# -------------------------------------------- T52b: a link another user planted on the way


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """``(link, where)``: a link to the folder ``where`` (another user's choice), planted by
    another user in a sticky folder every user may write. Root gives its own link away; a
    test user that cannot plants it in ``/tmp`` (root's) and passes for another user."""
    where = tmp_path / "elsewhere"
    where.mkdir()
    if os.geteuid() == 0:
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o1777)
        link = shared / "figs"
        link.symlink_to(where)
        os.lchown(link, STRANGER, STRANGER)
    else:
        link = Path("/tmp") / f"forensics-test-{uuid.uuid4().hex}"
        link.symlink_to(where)
        monkeypatch.setattr(os, "geteuid", lambda: STRANGER)
    yield link, where
    link.unlink()


@pytest.mark.parametrize("command", [*(c for c in READERS if c != "repro"), "import", "simulate"])
def test_no_output_goes_through_a_link_another_user_planted(
        planted: tuple[Path, Path], capture: Path, capsys: pytest.CaptureFixture[str],
        command: str) -> None:
    """``ln -s /elsewhere /tmp/figs`` by another user, then ``forensics plot C -o
    /tmp/figs/a.png``: the figure went to /elsewhere. A link in a sticky folder every user may
    write that is neither this user's nor the folder owner's is not followed by any output
    (files, captures, folders): one line naming it and its owner, exit 2, nothing written."""
    link, where = planted
    log = capture.parent / "engine.log"
    log.write_text("EngineDeadError\n")
    assert main(_argv(command, capture, str(link / "deep" / "a"), log)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not followed" in err, err
    assert f"'{link}' is a link of uid {STRANGER}" in err, err
    assert list(where.iterdir()) == []


def test_repro_writes_through_no_planted_link(planted: tuple[Path, Path]) -> None:
    """``repro`` needs vLLM before it writes; its files are written by
    :func:`forensics.atomic.write_text_atomically`, which every file output goes through: it
    refuses the planted link too."""
    from forensics.atomic import write_text_atomically
    from forensics.errors import OutputError

    link, where = planted
    with pytest.raises(OutputError, match=f"is a link of uid {STRANGER}"):
        write_text_atomically(link / "t.py", "x")
    assert list(where.iterdir()) == []


# --------------------------------------- T52c: the user's own links are the user's own path


def test_a_link_of_the_user_or_outside_a_sticky_folder_is_followed(tmp_path: Path) -> None:
    """Many people link their output folders: a link of this user's in a sticky shared
    folder, or any link in a folder that is not both sticky and writable by all, is followed
    as the kernel follows it (``link/..`` is the parent of where it points)."""
    from forensics.atomic import write_text_atomically

    where = tmp_path / "elsewhere" / "deep"
    where.mkdir(parents=True)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "mine").symlink_to(where)
    (tmp_path / "plain").symlink_to(where)
    if os.geteuid() == 0:
        os.lchown(tmp_path / "plain", STRANGER, STRANGER)
    write_text_atomically(shared / "mine" / "a.txt", "a")
    write_text_atomically(tmp_path / "plain" / "b.txt", "b")
    write_text_atomically(shared / "mine" / ".." / "c.txt", "c")
    assert (where / "a.txt").read_text() == "a" and (where / "b.txt").read_text() == "b"
    assert (where.parent / "c.txt").read_text() == "c"


def test_the_users_own_link_to_an_output_folder_is_followed_by_a_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``ln -s /big/disk out; forensics simulate clean -o out/x.capture``: the capture is made
    where the link points, as it was."""
    where = tmp_path / "disk"
    where.mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "out").symlink_to(where)
    assert main(["simulate", "clean", "--steps", "2", "-o",
                 str(shared / "out" / "x.capture")]) == 0, capsys.readouterr().err
    assert (where / "x.capture" / "manifest.json").is_file()
