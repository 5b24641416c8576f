"""Round 17, attack D: a hostile local user of the probe's shared ``FORENSICS_DIR``."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from forensics.probe import owned
from forensics.probe.settings import from_env


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The probe's lines saying other users may replace the capture folder's name."""
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and "other users may" in r.getMessage()]


def _claimed(directory: Path) -> Path:
    """The capture folder the probe makes for ``FORENSICS_DIR=directory``."""
    settings = from_env({"FORENSICS_DIR": str(directory)})
    assert settings is not None
    return owned.claim(settings).capture


@pytest.mark.parametrize("through", ["a folder", "a symlink", "a symlink's target"])
def test_a_capture_directory_whose_path_others_may_replace_is_said_in_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, through: str) -> None:
    """``FORENSICS_DIR`` private to this user, but reached through a folder others may write
    without the sticky bit (``/shared/caps``, ``/shared/link -> ~/caps``, ``~/link ->
    /shared/caps``): any of them may rename ``caps`` (or swap the link) and put a folder of
    their own, holding a forged capture, under the name the engine's log gives. The probe
    warned only of a capture directory itself open to others, never of its path: it said
    nothing, as if the name were the user's alone."""
    shared, mine = tmp_path / "shared", tmp_path / "mine"
    shared.mkdir()
    mine.mkdir()
    os.chmod(shared, 0o777)
    if through == "a folder":
        directory = shared / "caps"
    elif through == "a symlink":
        (shared / "link").symlink_to(mine, target_is_directory=True)
        directory = shared / "link"
    else:
        (shared / "caps").mkdir(mode=0o700)
        (mine / "link").symlink_to(shared / "caps", target_is_directory=True)
        directory = mine / "link"
    with caplog.at_level(logging.WARNING, logger="forensics.probe"):
        capture = _claimed(directory)
    assert capture.parent == directory and capture.is_dir()
    lines = _warnings(caplog)
    assert len(lines) == 1, lines
    assert str(directory) in lines[0] and "FORENSICS_DIR" in lines[0]
    assert str(shared) in lines[0]  # the folder others may write is named


def test_a_capture_directory_on_a_private_path_is_said_nothing_of(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A private path (a link of this user's in a private folder to a private folder) is not
    warned of: the warning is no noise."""
    mine, other = tmp_path / "mine", tmp_path / "other"
    mine.mkdir(mode=0o755)
    other.mkdir(mode=0o700)
    (mine / "link").symlink_to(other, target_is_directory=True)
    with caplog.at_level(logging.WARNING, logger="forensics.probe"):
        _claimed(mine / "link" / "caps")
    assert _warnings(caplog) == []


@pytest.mark.parametrize("swapped", ["a symlink", "a file", "an old capture of mine"])
def test_a_folder_swapped_between_its_mkdir_and_its_open_is_left_alone(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
        swapped: str) -> None:
    """In a ``FORENSICS_DIR`` others may write (the probe warns of it, and goes on), one of
    them renames the folder the probe just made and puts something in its place before the
    probe opens it by name: a symlink (the open refused, and the engine with it: "no capture
    folder can be made there"), a file, or an old capture of this user's (adopted: the new
    engine's records went into it, two engines in one capture). Now what is in the way is
    left untouched, one line says so, and the capture is a new folder under a fresh name."""
    shared, outside = tmp_path / "shared", tmp_path / "outside"
    shared.mkdir()
    outside.mkdir()
    os.chmod(shared, 0o777)
    old = outside / "old.capture"
    old.mkdir()
    (old / "manifest.json").write_text('{"format": 1}\n')
    real_mkdir, swaps = os.mkdir, []

    def racing_mkdir(path: object, mode: int = 0o777, **kwargs: object) -> None:
        real_mkdir(path, mode, **kwargs)  # type: ignore[arg-type]
        where = Path(str(path))
        if where.name.endswith(".capture") and not swaps:
            swaps.append(where)
            os.rename(where, outside / "renamed")
            if swapped == "a symlink":
                where.symlink_to(outside, target_is_directory=True)
            elif swapped == "a file":
                where.write_text("planted\n")
            else:
                os.rename(old, where)

    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    with caplog.at_level(logging.WARNING, logger="forensics.probe"):
        capture = _claimed(shared / "caps")
    monkeypatch.undo()
    assert swaps and capture != swaps[0] and capture.parent == shared / "caps"
    assert capture.is_dir() and not capture.is_symlink() and os.listdir(capture) == []
    lines = [r.getMessage() for r in caplog.records if "is in the way" in r.getMessage()]
    assert len(lines) == 1 and str(swaps[0]) in lines[0] and str(capture) in lines[0]
    left = ["renamed"] if swapped == "an old capture of mine" else ["old.capture", "renamed"]
    assert sorted(os.listdir(outside)) == left  # the probe's first folder, renamed, untouched
    if swapped == "an old capture of mine":
        assert os.listdir(swaps[0]) == ["manifest.json"]  # left as it was


def _sixteen(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14,  # noqa: ANN001, ANN202, PLR0913
             a15, n):
    """A kernel of sixteen tensor arguments (as vLLM's input-preparation kernels take many)."""


_sixteen.__module__ = "vllm.v1.worker.gpu.stand_in"


class _Jit:
    """What the flight recorder reads of a Triton kernel object."""

    fn = staticmethod(_sixteen)


def test_a_launch_of_many_tensors_copies_no_more_than_its_one_event_holds() -> None:
    """Sixteen int32 tensors of 512 KiB each, every one within what one event line holds
    (675,000 bytes): the recorder copied all of them on the launch path, twice (8 MiB before
    and 8 MiB after, for each launch of each of the 32 steps it keeps), and the writer then
    dropped all but one as past the event line. Now the launch copies what its one event
    holds, and each tensor left out says so by its shape and reason."""
    import torch

    from forensics.probe import kernels

    recorder = kernels.FlightRecorder(("*",), 2, 64, None)
    recorder._torch = torch
    tensors = [torch.full((1 << 17,), i, dtype=torch.int32) for i in range(16)]
    pending = recorder.before(recorder.kernel(_Jit()), (*tensors, 4), {}, (1,))
    assert pending is not None
    copied = pending.before.numel()
    assert copied <= kernels.EVENT_CONTENT_BYTES, copied
    recorder.after(pending)
    fields = kernels.event_fields(pending)
    kept = [name for name, info in fields["tensors"].items() if "data" in info]
    left = [info for info in fields["tensors"].values() if info["contents"] == "none"]
    assert kept == ["a0"] and len(left) == 15
    assert all("one event line" in info["reason"] for info in left)
    assert all(info["shape"] == [1 << 17] for info in fields["tensors"].values())


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_capture_folder_renamed_before_the_first_record_loses_nothing(
        tmp_path: Path, writer: str) -> None:
    """Another user who may write ``FORENSICS_DIR`` renames the probe's capture folder while
    the engine loads its model, before the first record: the probe opened the folder by its
    name only at the first write, found nothing there, and dropped every record of the run
    (one log line). Now it holds the folder open from the start: the records are all in it,
    under whatever name it has now."""
    import forensics
    from forensics.probe.session import ProbeSession

    sys.path.insert(0, str(Path(__file__).parents[1] / "probe"))
    from probe_fakes import record_batch_changes

    settings = from_env({"FORENSICS_DIR": str(tmp_path), "FORENSICS_WRITER": writer})
    assert settings is not None
    session = ProbeSession(settings)
    moved = tmp_path / "moved.capture"
    os.rename(session.settings.capture, moved)
    record_batch_changes(session, [[0, 1]] * 6)
    session.close()
    assert (session.counts["written"], session.counts["dropped"]) == (6, 0), session.counts
    assert len(list(forensics.load(moved))) == 6


def test_hosts_whose_names_differ_past_forty_characters_get_their_own_process_tags(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two pods of one deployment (``vllm-llama-3-70b-instruct-deployment-5d8f7b9c6-x7k2p``
    and ``...-q9w4z``), their workers of one pid (each container numbers its own), writing one
    capture on a shared volume: the tag kept the first 40 characters of the host name, so the
    two processes had one tag, and in that capture one events file (a writer takes over the
    file of its own tag) and segments read as one process's. Now each tag is the host's own,
    and still a safe name of 64 characters or less."""
    import socket

    from forensics.probe.settings import process_tag
    from forensics.store.paths import check_process_name

    tags = []
    for pod in ("x7k2p", "q9w4z"):
        name = f"vllm-llama-3-70b-instruct-deployment-5d8f7b9c6-{pod}"
        monkeypatch.setattr(socket, "gethostname", lambda name=name: name)
        tags.append(process_tag(4194303))
    assert tags[0] != tags[1]
    assert all(check_process_name(tag) == tag and tag.endswith("-4194303") for tag in tags)
    monkeypatch.setattr(socket, "gethostname", lambda: "node-7")
    assert process_tag(12) == "node-7-12"  # a short name is kept as it was
