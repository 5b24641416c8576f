"""The probe writes only into a capture folder it made (issue 38, point 2).

Real processes: a probe started from the environment, as vLLM's plugin loader starts it, in
a ``FORENSICS_DIR`` where someone planted symlinks, FIFOs, hard links and forged captures.
Nothing outside the new capture is written, nothing planted is read, and one log line says
what was in the way.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from probe_fakes import batch_args, plain_batch_change

import forensics
from forensics.probe import hooks, owned, plugin
from forensics.probe.settings import Settings
from forensics.store.events import EventLog

#: a process that starts the probe from its environment, records ``steps`` steps, and says
#: which capture it wrote
CHILD = textwrap.dedent("""
    import sys, torch
    from forensics.probe import hooks, plugin

    def plain(num_computed_tokens, num_accepted_tokens, prev_positions,
              valid_sampled_token_count, prev_num_draft_tokens, cpu_num_computed_tokens):
        num_accepted_tokens.copy_(valid_sampled_token_count[prev_positions.clamp(min=0)])

    plugin.register()
    session = plugin.session()
    wrapped = hooks.wrap_batch_change(plain)
    i32 = torch.int32
    for _ in range(int(sys.argv[1])):
        session.begin_step()
        wrapped(torch.zeros(4, dtype=i32), torch.ones(2, dtype=i32), torch.tensor([0, 1]),
                torch.tensor([2, 3], dtype=i32), torch.ones(4, dtype=i32),
                torch.zeros(2, dtype=i32))
    print(session.settings.capture, flush=True)
    if len(sys.argv) > 2:  # start a child of its own, as vLLM starts its engine core
        import subprocess
        steps = str(int(sys.argv[1]) + 2)  # other records than its parent's
        subprocess.run([sys.executable, "-c", sys.argv[2], steps], check=True)
""")


def probe_env(directory: Path, **extra: str) -> dict[str, str]:
    """The environment of a process started with the probe on (no inherited capture)."""
    env = {k: v for k, v in os.environ.items() if "FORENSICS" not in k}
    return {**env, "FORENSICS_DIR": str(directory), **extra}


def run_probe(env: dict[str, str], steps: int = 3, *, grandchild: bool = False
              ) -> tuple[list[Path], str]:
    """Run :data:`CHILD` (and, with ``grandchild``, a copy of it that it starts); return the
    captures they said they wrote and their standard error."""
    argv = [sys.executable, "-c", CHILD, str(steps)] + ([CHILD] if grandchild else [])
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return [Path(line) for line in done.stdout.split()], done.stderr


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under ``root`` (symlinks not followed): its mode and, for files, bytes."""
    seen: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted(root.rglob("*")):
        st = os.lstat(path)
        data = path.read_bytes() if stat.S_ISREG(st.st_mode) else None
        seen[str(path.relative_to(root))] = (st.st_mode, data)
    return seen


def forged_capture(path: Path) -> None:
    """A capture folder someone else made: a manifest, an events file, a segment."""
    path.mkdir()
    (path / "manifest.json").write_text(json.dumps({"format": 1, "forged": True}))
    (path / "events-forged-1.jsonl").write_text('{"kind": "probe_start", "step": 0}\n')
    (path / "batch_change.r0.forged-1.0.arrows").write_bytes(b"not arrow")


def plant(kind: str, at: Path, outside: Path) -> None:
    """Put a ``kind`` of thing in the probe's way at ``at``; targets live in ``outside``."""
    target = outside / "target"
    target.mkdir(exist_ok=True)
    victim = outside / "victim.txt"
    victim.write_text("mine\n")
    if kind == "symlink to a folder":
        at.symlink_to(target, target_is_directory=True)
    elif kind == "dangling symlink":
        at.symlink_to(outside / "not-yet")
    elif kind == "fifo":
        os.mkfifo(at)
    elif kind == "hard link":
        os.link(victim, at)
    elif kind == "forged capture":
        forged_capture(at)


KINDS = ["symlink to a folder", "dangling symlink", "fifo", "hard link", "forged capture"]


def test_a_real_probe_leaves_what_was_planted_alone(tmp_path: Path) -> None:
    """A real process whose inherited capture name is taken by a forged capture, in a
    folder where every kind of thing was planted: it makes a new capture of its own."""
    directory, outside = tmp_path / "captures", tmp_path / "outside"
    directory.mkdir()
    outside.mkdir()
    for number, kind in enumerate(KINDS):
        plant(kind, directory / f"planted-{number}.capture", outside)
    planted = directory / f"planted-{KINDS.index('forged capture')}.capture"
    before_dir, before_out = snapshot(directory), snapshot(outside)
    (capture,), stderr = run_probe(probe_env(directory, FORENSICS_CAPTURE=str(planted)))
    assert capture != planted and capture.parent == directory
    assert snapshot(outside) == before_out  # nothing written outside the new capture
    after = snapshot(directory)
    assert {k: v for k, v in after.items() if not k.startswith(capture.name)} == before_dir
    lines = [line for line in stderr.splitlines() if "in the way" in line]
    assert len(lines) == 1 and str(planted) in lines[0] and str(capture) in lines[0]
    assert "a folder" in lines[0]
    loaded = forensics.load(capture)  # ours: every record, our manifest, no forged event
    assert [r.step for r in loaded] == [0, 1, 2]
    assert "forged" not in loaded.manifest
    assert {e["kind"] for e in loaded.events} >= {"probe_start", "probe_stop"}
    assert stat.S_IMODE(capture.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0
               for p in capture.iterdir() if p.name.startswith("events-"))


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_thing_in_the_way_is_left_alone(
        tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    """The probe of this process (its writer process is real), given a name where ``kind``
    was planted: a new capture, the planted thing and its target untouched, one log line."""
    directory, outside = tmp_path / "captures", tmp_path / "outside"
    directory.mkdir()
    outside.mkdir()
    planted = directory / "planted.capture"
    plant(kind, planted, outside)
    before_dir, before_out = snapshot(directory), snapshot(outside)
    session = plugin.start(Settings(directory=directory, capture=planted, ring=8,
                                    flush_every=1))
    try:
        wrapped = hooks.wrap_batch_change(plain_batch_change)
        for _ in range(2):
            session.begin_step()
            wrapped(*batch_args([0]))
    finally:
        plugin.stop()
    capture = session.settings.capture
    assert capture != planted and capture.parent == directory
    assert snapshot(outside) == before_out
    after = snapshot(directory)
    assert {k: v for k, v in after.items() if not k.startswith(capture.name)} == before_dir
    lines = [r.getMessage() for r in caplog.records if "in the way" in r.getMessage()]
    assert len(lines) == 1 and str(planted) in lines[0]
    assert [r.step for r in forensics.load(capture)] == [0, 1]


def test_a_child_joins_the_folder_its_parent_made(tmp_path: Path) -> None:
    (parent, child), _ = run_probe(probe_env(tmp_path), grandchild=True)
    assert parent == child and parent.parent == tmp_path
    assert list(tmp_path.iterdir()) == [parent]
    loaded = forensics.load(parent)
    assert len({e["process"] for e in loaded.events}) == 2  # both processes, one capture
    assert sorted(r.step for r in loaded) == sorted([0, 1, 2] + [0, 1, 2, 3, 4])


def test_an_inherited_folder_that_was_replaced_is_not_joined(tmp_path: Path) -> None:
    """The first process made its folder; before a child starts, someone renames it away
    and puts a forged capture (or a symlink to one) under its name: the child writes a new
    capture of its own and reads nothing of the forged one."""
    from forensics.probe.settings import from_env

    settings = from_env(probe_env(tmp_path))
    assert settings is not None
    made = owned.claim(settings)
    os.rename(made.capture, tmp_path / "moved-away")
    forged_capture(tmp_path / "forged.capture")
    os.rename(tmp_path / "forged.capture", made.capture)  # a forged folder under its name
    check_not_joined(tmp_path, made)
    os.rename(made.capture, tmp_path / "forged-2")  # a symlink to the very folder it made
    made.capture.symlink_to(tmp_path / "moved-away", target_is_directory=True)
    check_not_joined(tmp_path, made)


def check_not_joined(directory: Path, made: Settings) -> None:
    """A child given ``made``'s capture and identity writes a capture of its own; nothing
    else under ``directory`` changes."""
    before = snapshot(directory)
    env = probe_env(directory, FORENSICS_CAPTURE=str(made.capture),
                    FORENSICS_CAPTURE_OWNER=made.owner)
    (capture,), stderr = run_probe(env)
    assert capture != made.capture and capture.parent == directory
    assert stderr.count("is not joined") == 1
    after = snapshot(directory)
    assert {k: v for k, v in after.items() if not k.startswith(capture.name)} == before
    assert [r.step for r in forensics.load(capture)] == [0, 1, 2]


def test_an_inherited_name_with_no_identity_is_made_new_or_refused(tmp_path: Path) -> None:
    """A capture name passed without the first process's identity is made new when free."""
    fresh = tmp_path / "given.capture"
    (capture,), stderr = run_probe(probe_env(tmp_path, FORENSICS_CAPTURE=str(fresh)))
    assert capture == fresh and "in the way" not in stderr
    assert [r.step for r in forensics.load(capture)] == [0, 1, 2]


@pytest.mark.parametrize("kind", ["symlink", "hard link", "fifo", "other user's"])
def test_the_events_file_never_goes_through_what_was_planted(tmp_path: Path,
                                                             kind: str) -> None:
    root, outside = tmp_path / "c", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("mine\n")
    sidecar = root / "events-p1.jsonl"
    if kind == "symlink":
        sidecar.symlink_to(victim)
    elif kind == "hard link":
        os.link(victim, sidecar)
    elif kind == "fifo":
        os.mkfifo(sidecar)
    else:
        sidecar.write_text("")
        if os.getuid() == 0:
            os.chown(sidecar, 12345, 12345)
        else:  # a non-root test user cannot give a file away: another link stands in
            os.link(sidecar, outside / "second-link")
    log = EventLog(root, "p1")
    with pytest.raises(OSError):
        log.append({"kind": "probe_start", "step": 0})
    assert victim.read_text() == "mine\n"


def test_the_events_file_is_made_private_and_reopened_by_its_own_writer(
        tmp_path: Path) -> None:
    log = EventLog(tmp_path, "p1")
    log.append({"kind": "a", "step": 0})
    log.close()
    log.append({"kind": "b", "step": 1})  # reopened: the file this capture's writer made
    log.close()
    path = tmp_path / "events-p1.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [json.loads(line)["kind"] for line in path.read_text().splitlines()] == ["a", "b"]


def test_a_session_that_recorded_nothing_leaves_no_empty_folder(tmp_path: Path) -> None:
    (capture,), _ = run_probe(probe_env(tmp_path), steps=0)
    assert not capture.exists() and list(tmp_path.iterdir()) == []


def test_a_folder_a_child_joined_outlives_the_first_process(tmp_path: Path) -> None:
    """The first process ends (recording nothing) before its child writes: the child's mark
    keeps the folder, so the child's records land in it (a V2 worker flushes at shutdown)."""
    from forensics.probe.session import ProbeSession
    from forensics.probe.settings import from_env

    settings = from_env(probe_env(tmp_path))
    assert settings is not None
    made = owned.claim(settings)
    first = ProbeSession(made)
    first.made_folder = True
    assert owned.mark_joined(made.capture, made.owner) is None  # what a joining child does
    first.close()
    assert made.capture.is_dir()
    assert [p.name for p in made.capture.iterdir()] == [f"{owned.JOINED_MARK}{os.getpid()}"]
    (child,), _ = run_probe(probe_env(tmp_path, FORENSICS_CAPTURE=str(made.capture),
                                      FORENSICS_CAPTURE_OWNER=made.owner))
    assert child == made.capture and [r.step for r in forensics.load(child)] == [0, 1, 2]


def test_a_child_whose_folder_was_removed_as_it_joined_makes_its_own(tmp_path: Path) -> None:
    from forensics.probe.settings import from_env

    settings = from_env(probe_env(tmp_path))
    assert settings is not None
    made = owned.claim(settings)
    os.rmdir(made.capture)  # the first process ended, its folder empty
    assert owned.mark_joined(made.capture, made.owner) is not None
    child = owned.claim(made)
    assert child.capture != made.capture and child.capture.is_dir()
