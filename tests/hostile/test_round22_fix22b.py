"""Round 22's fix22b (issue 38): round 21's leftovers in folders and modes under umask ``0477``.

- T131a: ``triage U/f``, ``U/f`` a folder its owner may not read (``0300``: what ``mkdir -p``
  makes under umask ``0477``, as ``simulate -o U/f/x.capture`` does), said "'U/f' names no
  capture directory": it now says the folder cannot be listed, why, and the fix.
- T131b: ``plot -o`` (every output for sharing) wrote a ``0200`` file under umask ``0477``, that
  its owner could not open; it keeps its owner's read and write.
- T131c: the fsync of a folder its owner may not read was skipped, unsaid (Linux fsyncs no
  ``O_PATH`` descriptor); the file system is flushed (``syncfs``) through what was written.
- T131d: ``triage`` under umask ``0477``: every row was "BrokenProcessPool: its process died (a
  signal, or the system ended it)": the pool's semaphores were ``0200``.
- T131e: a fleet task ended from outside at the backstop was "timed out after" the backstop's
  seconds, not its deadline's: where the deadline had ended it and its row came late (a loaded
  cluster), a time it was not given. It now says its deadline, and why it was ended from outside.
- T131f: a record a signal's handler cut out of its per-record hand-off was counted, neither
  written nor dropped, unsaid: ``probe_stop`` now holds ``lost_to_signal`` and the log says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from forensics.fleet import runners
from tests.hostile import test_round21_attack21b as attack21b
from tests.hostile import test_round21_fix21c as fix21c

ROOT = Path(__file__).resolve().parents[2]

#: the imports a script run as another user needs before it drops root (fix21c's template)
_IMPORTS = ("from forensics.fleet.paths import find_captures, unlisted_note\n"
            "from forensics.errors import ConfigurationError\n"
            "from forensics.store import replace\n"
            "import forensics.modes\n"
            "from forensics.pytest_plugin import captures_under\n")
#: a script's lines (run by :func:`_as_user` under umask ``0477``) making ``top`` (``0700``)
#: of ``a.capture`` and ``U/f/x.capture`` (``U``: ``0300``), and an empty ``unlisted``
UNLISTED_TOP = ("top = base / 'top'\n"
                "os.mkdir(top)\n"
                "os.chmod(top, 0o700)\n"
                "make_folders(top / 'a.capture')\n"
                "make_folders(top / 'U' / 'f' / 'x.capture')\n"
                "unlisted = []\n")


def _as_user(umask: int, code: str) -> str:
    """Run ``code`` (``base`` a fresh folder of the user's) under ``umask``, as another user
    when root (:func:`fix21c._as_user_under_umask`), this round's imports made first."""
    template = fix21c._AS_USER
    fix21c._AS_USER = _IMPORTS + template
    try:
        return fix21c._as_user_under_umask(umask, code)
    finally:
        fix21c._AS_USER = template


# ------------------------ T131a: triage says it cannot list a folder


def test_triage_says_it_cannot_list_a_folder_of_write_and_search() -> None:
    """A capture made in ``U/f`` under umask ``0477`` (``U`` and ``f`` are ``0300``): naming
    ``U/f``, ``U`` or the glob ``U/*`` says which folder cannot be listed, why, and the fix;
    it said "'U/f' names no capture directory" of a folder holding a capture."""
    out = _as_user(0o477, ""
                   "make_folders(base / 'U' / 'f' / 'x.capture')\n"
                   "for name in ('U/f', 'U', 'U/*', 'U/f/*.capture'):\n"
                   "    try:\n"
                   "        find_captures([str(base / name)])\n"
                   "    except ConfigurationError as exc:\n"
                   "        print(str(exc).replace(str(base), 'B'))\n"
                   "print(find_captures([base / 'U' / 'f' / 'x.capture'])[0].name)")
    fix = ("cannot be listed (Permission denied), so the captures in it cannot be found; name "
           "them (FOLDER/NAME.capture), or make the folder readable to you (chmod u+r where it "
           "is yours)")
    assert out.splitlines() == [f"'B/U/f': the folder 'B/U/f' {fix}",
                                f"'B/U': the folder 'B/U' {fix}",
                                f"'B/U/*': the folder 'B/U' {fix}",
                                f"'B/U/f/*.capture': the folder 'B/U/f' {fix}",
                                "x.capture"], out


def test_the_plugin_says_it_cannot_list_a_folder_of_write_and_search() -> None:
    """``--forensics-captures U/f`` (``0300``, made under umask ``0477``) names the folder that
    cannot be listed, why and the fix; it said "does not exist or holds no NAME.capture
    folder"."""
    out = _as_user(0o477, ""
                   "make_folders(base / 'U' / 'f' / 'x.capture')\n"
                   "try:\n"
                   "    captures_under(base / 'U' / 'f')\n"
                   "except ConfigurationError as exc:\n"
                   "    print(str(exc).replace(str(base), 'B'))")
    assert out.strip() == (
        "--forensics-captures (or the forensics_captures ini option) 'B/U/f': the folder "
        "'B/U/f' cannot be listed (Permission denied), so the captures in it cannot be found; "
        "name them (FOLDER/NAME.capture), or make the folder readable to you (chmod u+r where "
        "it is yours)"), out


def test_a_folder_that_cannot_be_listed_beside_captures_is_said() -> None:
    """``top`` holds ``a.capture`` and ``U/f/x.capture`` made under umask ``0477`` (``U`` is
    ``0300``): ``a.capture`` is found, and the note (``triage`` prints it, ``open_many`` warns
    it) names ``U`` as a folder that cannot be listed; ``x.capture`` dropped out unsaid."""
    out = _as_user(0o477, UNLISTED_TOP +
                   "print([p.name for p in find_captures([top], unlisted)])\n"
                   "print(unlisted_note(unlisted).replace(str(base), 'B'))\n"
                   "print(unlisted_note([]))")
    assert out.splitlines() == [
        "['a.capture']",
        "not read: 1 folder(s) that cannot be listed (B/top/U: Permission denied): the captures "
        "in them cannot be found; name them (FOLDER/NAME.capture), or make the folders "
        "readable to you (chmod u+r where they are yours)", "None"], out


def test_an_empty_or_missing_folder_still_names_no_capture(tmp_path: Path) -> None:
    """A folder that is listed and holds no capture, or a path that is not there, is as
    before: "names no capture directory"."""
    from forensics.errors import ConfigurationError
    from forensics.fleet.paths import find_captures

    for name in ("empty", "missing", "missing/*.capture"):
        (tmp_path / "empty").mkdir(exist_ok=True)
        with pytest.raises(ConfigurationError, match="names no capture directory; give"):
            find_captures([str(tmp_path / name)])


# ------------------------ T131b: an output for sharing is its owner's to read


def test_a_shared_output_is_its_owners_to_read_under_umask_0477() -> None:
    """``write_text_atomically(..., shared=True)`` (``plot -o``'s image, reports, exports)
    under umask ``0477`` is ``0600`` (it was ``0200``: its owner could not open it); under
    ``0022`` it is ``0644`` as before, under ``0077`` ``0600``."""
    for umask, mode in ((0o477, "0o600"), (0o022, "0o644"), (0o077, "0o600"), (0o266, "0o600")):
        out = _as_user(umask, ""
                       "path = base / 'p.txt'\n"
                       "write_text_atomically(path, 'plotted', shared=True)\n"
                       "print(path.read_text(), oct(stat.S_IMODE(os.stat(path).st_mode)))")
        assert out.split() == ["plotted", mode], (oct(umask), out)


# ------------------------ T131c: a folder its owner may not read is flushed


#: record each syncfs (the flush of a folder its owner may not read) and each fsync
_RECORD_FLUSHES = """flushed = []
real_fsync = os.fsync
def fsync(fd):
    flushed.append('fsync')
    return real_fsync(fd)
os.fsync = fsync
forensics.modes.libc_function = lambda name: (lambda fd: flushed.append(name) or 0)
"""


def test_an_output_in_a_folder_of_write_and_search_is_flushed() -> None:
    """An output written into ``a/b`` made under umask ``0477`` (``0300``): its new name is
    flushed, through the file system (the folder's fsync was an EBADF, suppressed)."""
    out = _as_user(0o477, _RECORD_FLUSHES
                   + "write_text_atomically(base / 'a' / 'b' / 'f.txt', 'x')\n"
                   "print(flushed)")
    assert out.strip() == "['fsync', 'syncfs']", out


def test_a_capture_in_a_folder_of_write_and_search_is_flushed() -> None:
    """A capture installed in ``U`` made under umask ``0477`` (``0300``): its name is flushed
    through the file system (the folder's fsync was skipped: it cannot be opened)."""
    out = _as_user(0o477, _RECORD_FLUSHES
                   + "tmp, out = base / 'U' / '.x.build', base / 'U' / 'x.capture'\n"
                   "replace.new_build(tmp)\n"
                   "replace.install(tmp, out)\n"
                   "print(flushed, oct(stat.S_IMODE(os.stat(out).st_mode)))")
    assert out.split() == ["['syncfs']", "0o700"], out


def test_a_readable_folder_is_fsynced_as_before(tmp_path: Path) -> None:
    """A folder that can be read is fsynced itself, no file system flushed."""
    import forensics.modes
    from forensics.store.fs import fsync_dir

    called: list[str] = []
    real = forensics.modes.libc_function
    forensics.modes.libc_function = lambda name: (lambda fd: called.append(name) or 0)
    try:
        fsync_dir(tmp_path, tmp_path)
    finally:
        forensics.modes.libc_function = real
    assert called == []


# ------------------------ T131d: triage's processes start under umask 0477


def _without_overrides() -> list[str]:
    """The command prefix that takes root's overrides of file permissions away (root reads
    and writes any file: the umask's bits are no bar to it); none for another user."""
    if os.geteuid() != 0:
        return []
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", "--"]


def test_triage_runs_under_umask_0477(tmp_path: Path) -> None:
    """``simulate clean -o x.capture`` then ``triage x.capture`` under umask ``0477``: the row
    shows the capture (clean); each of the pool's processes died, as its semaphores were
    ``0200``, and the row said "BrokenProcessPool: its process died"."""
    capture = tmp_path / "x.capture"
    script = ("import os, sys\nos.umask(0o477)\nfrom forensics.cli import main\n"
              f"assert main(['simulate', 'clean', '-o', {str(capture)!r}]) == 0\n"
              f"sys.exit(main(['triage', {str(capture)!r}]))")
    done = subprocess.run([*_without_overrides(), sys.executable, "-c", script], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "x.capture" in done.stdout and "BrokenProcessPool" not in done.stdout, done.stdout
    assert "clean" in done.stdout.split("x.capture")[-1], done.stdout


# ------------------------ T131e: a task ended at the backstop is timed out after its deadline


def test_a_ray_tasks_late_row_says_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the stand-in for Ray (its clock moves only as the runner waits): a task whose row
    comes 9 s after it started (its deadline of 3 s ended it; the row late on a loaded
    cluster) is ended at the backstop (8 s): its row says its deadline, 3 s, and why (it said
    "timed out after 8 s", a time it was not given)."""
    from tests.fleet import test_ray_gather as gather

    errors, streams = gather._gather(monkeypatch, {
        "late": [(0, runners.STARTED), (9, gather._row("late"))]})
    assert errors == [gather.BACKSTOP] and streams["late"].cancelled


def test_a_local_task_no_signal_reaches_says_its_deadline(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A local task asleep with SIGALRM blocked (``deaf``), deadline 1 s and backstop 2 s: its
    row is ``timed out after 1 s`` and why it was ended from outside (it said ``timed out after
    2 s``)."""
    import pyarrow as pa
    from stuck_piece import piece

    from forensics.fleet.tasks import Task

    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "1")
    monkeypatch.setattr(runners, "BACKSTOP_GRACE", 0.0)
    rows = [pa.ipc.open_stream(out).read_all().to_pylist()[0]
            for out in runners.run_local([Task(str(tmp_path / "deaf"))], piece=piece)]
    assert [r["error"] for r in rows] == [
        "timed out after 1 s (no row came back by the backstop, over 2 s after it started: "
        "ended from outside)"], rows


# ------------------------ T131f: a record a signal cuts out of its hand-off is said


#: the writer process, its per-record hand-off (the default): a SIGINT comes as the probe
#: frames the third record (Python's own handler, or one like vLLM's workers', argv[3])
RECORD_INTERRUPTED = attack21b.CHILD_HEAD + textwrap.dedent("""
    from pathlib import Path
    from forensics.probe import frames, plugin
    from forensics.probe.settings import Settings
    calls = []

    def interrupted(real):
        def framing(*args, **kwargs):
            calls.append(1)
            if len(calls) == 3:  # the signal comes as the third record is framed
                os.kill(os.getpid(), signal.SIGINT)
            return real(*args, **kwargs)
        return framing

    frames.put_block = interrupted(frames.put_block)
    frames.record_blob = interrupted(frames.record_blob)
    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=1 << 10,
                                    flush_every=64, writer="process", handoff="record"))
    try:
        record_batch_changes(session, [[0, 1]] * 6)
    except (KeyboardInterrupt, SystemExit):
        print("interrupted")
    plugin.stop()
""")


@pytest.mark.parametrize("handler", ["python", "vllm"])
def test_a_record_a_signal_cuts_out_of_its_hand_off_is_said(
        tmp_path: Path, handler: str) -> None:
    """With the per-record hand-off (signals not held: a hold per record cost 1.4x its CPU
    in one run), a handler that raises as the third record is framed loses that record:
    ``probe_stop`` says so (``lost_to_signal``: 1), and the log says "1 record(s) lost to a
    signal". It was counted, neither written nor dropped, and nothing said why."""
    capture = tmp_path / "x.capture"
    child = subprocess.run([sys.executable, "-c", RECORD_INTERRUPTED, str(capture),
                            str(attack21b.PROBE_TESTS), handler], timeout=300,
                           capture_output=True, text=True)
    assert child.returncode == 0 and "interrupted" in child.stdout, child.stderr[-3000:]
    (events,) = capture.glob("events-*.jsonl")
    (stop,) = [e for e in map(json.loads, events.read_text().splitlines())
               if e["kind"] == "probe_stop"]
    assert (stop["records"], stop["written"], stop["dropped"], stop.get("lost_to_signal")) \
        == (3, 2, 0, 1), stop
    assert "1 record(s) lost to a signal" in child.stderr, child.stderr[-3000:]
