"""Round 21's fix21c (issue 38): what was found and left in round 21.

- T129a: ``known --json`` of a capture whose crash verdict is unexplained gave the verdict and
  no word of why: only the text said "Not explained: ... comes after the last crash event
  (step 3) ...". The JSON now holds that lead sentence (``"lead"``) and the paragraph the text
  prints (``"text"``).
- T129b: the pytest plugin skipped a capture folder inside another capture's folders without a
  word, where ``triage`` and ``open_many`` name it (T127c); it now warns with their line. A
  nested capture that is itself named (collected) is read, and no note names it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile import test_round21_attack21c as attack21c
from tests.hostile import test_round21_fix21b as fix21b
from tests.hostile.test_round2 import run_cli

ROOT = Path(__file__).resolve().parents[2]

pytest_plugins = ["pytester"]


# ------------------------ T129a: known --json says why a crash is not explained


def test_known_json_says_why_the_crash_is_not_explained(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Incident B with its crash moved to step 3: ``--json`` gives the lead sentence the text
    prints, word for word, and the paragraph."""
    capture = attack21c._crash_moved(tmp_path, 3)
    code, out, err = run_cli(capsys, "known", capture)
    assert code in (0, 1), err
    said = " ".join(out.split())
    code, out, err = run_cli(capsys, "known", capture, "--json")
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["crash_verdict"] == "unexplained"
    assert data["lead"].startswith(
        "Not explained: the capture holds a crash, yet every value out of range that the "
        "engine's code finds comes after the last crash event (step 3)"), data["lead"]
    assert data["lead"].split(" Next: ")[0] in said
    assert data["text"].startswith(data["lead"]) and " ".join(data["text"].split()) in said


def test_known_json_lead_is_empty_when_explained(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The bundled incident (crash at step 14, explained) has no lead: ``""``, never a
    sentence of a verdict it does not hold."""
    capture = attack21c._crash_moved(tmp_path, 14)
    code, out, err = run_cli(capsys, "known", capture, "--json")
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["crash_verdict"] == "explained" and data["lead"] == ""


# ------------------------ T129b: the pytest plugin names a capture inside another


def test_the_plugin_warns_of_a_capture_inside_another(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    """``--forensics-captures DIR`` collects ``a.capture`` and warns, in triage's words, that
    ``a.capture/old/b.capture`` was not read (it dropped out unsaid)."""
    fleet, inner = fix21b._nested(tmp_path)
    run = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--forensics-captures",
                                       str(fleet))
    run.assert_outcomes(passed=1, warnings=1)
    said = " ".join(run.stdout.str().split())
    assert (f"not read: 1 capture folder(s) inside another capture ({inner}): a capture's own "
            "folders are not searched; name them to read them") in said, said


def test_a_nested_capture_named_itself_is_read_and_not_noted(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    """Naming the inner capture too collects both, and nothing is said to be not read (nor by
    ``unread_note`` of both, as ``triage a.capture a.capture/old/b.capture`` reads both)."""
    from forensics.fleet.paths import find_captures, unread_note

    fleet, inner = fix21b._nested(tmp_path)
    run = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--forensics-captures",
                                       str(fleet), "--forensics-captures", str(inner))
    run.assert_outcomes(passed=2)
    assert "not read" not in run.stdout.str()
    assert unread_note(find_captures([fleet / "a.capture", inner])) is None


# ------------------------ T129c: folders are made under a umask that takes the read bit

#: run as another user when root (root reads any folder: the umask's read bit is no bar to it)
#: (everything imported first: the interpreter's own library may be root's alone)
_AS_USER = """import os, shutil, stat, sys, tempfile
from pathlib import Path
from forensics.store.fs import make_folders, set_mode
from forensics.atomic import write_atomically, write_text_atomically
from forensics.probe.owned import make_folder
if os.geteuid() == 0:
    os.setgroups([]); os.setgid(65534); os.setuid(65534)
base = Path(tempfile.mkdtemp(prefix="forensics-umask-"))
try:
    os.umask({umask})
{code}
finally:
    os.umask(0o022)
    pending = [base]
    while pending:
        folder = pending.pop()
        if not folder.is_symlink():
            os.chmod(folder, 0o700)
            pending += [c for c in folder.iterdir() if c.is_dir() and not c.is_symlink()]
    shutil.rmtree(base)
"""


def _as_user_under_umask(umask: int, code: str) -> str:
    """Run ``code`` (indented, ``base`` a fresh folder of the user's) in a fresh Python under
    ``umask``, as another user when root; return its stdout."""
    script = _AS_USER.format(umask=oct(umask), code="\n".join(
        "    " + line for line in code.splitlines()))
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("umask", [0o477, 0o777])
def test_make_folders_sets_the_mode_under_a_umask_without_read(umask: int) -> None:
    """``make_folders(base/a/x.capture)`` makes the capture ``0700`` and its parent as
    ``mkdir -p`` does (what the umask leaves, and the owner's write and search: ``0300``); it
    was a PermissionError traceback from opening the folder just made."""
    out = _as_user_under_umask(umask, ""
                               "make_folders(base / 'a' / 'x.capture')\n"
                               "print(oct(stat.S_IMODE(os.stat(base / 'a').st_mode)),\n"
                               "      oct(stat.S_IMODE(os.stat(base / 'a' / 'x.capture')"
                               ".st_mode)))")
    assert out.split() == ["0o300", "0o700"], out


def test_set_mode_follows_no_link_under_a_umask_without_read() -> None:
    """A link put at the folder's name is not followed: ``set_mode`` refuses it (an OSError)
    and the folder it points to keeps its mode."""
    out = _as_user_under_umask(0o477, ""
                               "(base / 'real').mkdir(0o755)\n"
                               "(base / 'link').symlink_to(base / 'real')\n"
                               "try:\n"
                               "    set_mode(base / 'link', 0o700)\n"
                               "except OSError:\n"
                               "    print('refused')\n"
                               "print(oct(stat.S_IMODE(os.stat(base / 'real').st_mode)))")
    assert out.split() == ["refused", "0o300"], out


def test_the_path_descriptor_follows_no_link_either(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the folder cannot be opened for reading (as under umask ``0477``, here every open
    for reading refused), a link at its name is refused by the path-only open too, and the
    folder it points to keeps its mode."""
    import os

    from forensics.store import fs

    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir(0o755)
    real.chmod(0o755)
    link.symlink_to(real)
    opened = os.open

    def unreadable(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if not flags & os.O_PATH:
            raise PermissionError(13, "Permission denied", str(path))
        return opened(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", unreadable)
    with pytest.raises(OSError):
        fs.set_mode(link, 0o700)
    assert real.stat().st_mode & 0o7777 == 0o755
    fs.set_mode(real, 0o700)  # a real folder is set through its path descriptor
    assert real.stat().st_mode & 0o7777 == 0o700


# ------------------------ T129d: an output is written through folders of search alone


@pytest.mark.parametrize("umask", [0o077, 0o477])
def test_an_output_goes_through_folders_it_may_only_search(umask: int) -> None:
    """``write_text_atomically(base/s/a/b/f.txt)``, ``s`` a folder of search alone (``0311``)
    and ``a``, ``b`` made under ``umask``: written, and ``0600`` (it said "Permission
    denied")."""
    out = _as_user_under_umask(umask, ""
                               "(base / 's').mkdir()\n"
                               "os.chmod(base / 's', 0o311)\n"
                               "path = base / 's' / 'a' / 'b' / 'f.txt'\n"
                               "write_text_atomically(path, 'written')\n"
                               "print(path.read_text(), oct(stat.S_IMODE(os.stat(path).st_mode)))")
    assert out.split() == ["written", "0o600"], out


# ------------------------ T129e: a capture's files are 0600 whatever the umask


def test_a_captures_files_are_0600_under_umask_0477(tmp_path: Path) -> None:
    """``simulate clean -o x.capture`` then ``summary`` under umask ``0477``: every file of the
    capture is ``0600`` (they were ``0200``: the owner could not read them back)."""
    import os
    import stat

    out = tmp_path / "x.capture"
    script = ("import os, sys\nos.umask(0o477)\nfrom forensics.cli import main\n"
              f"assert main(['simulate', 'clean', '-o', {str(out)!r}]) == 0\n"
              f"sys.exit(main(['summary', {str(out)!r}]))")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    modes = {path.name: stat.S_IMODE(os.stat(path).st_mode) for path in out.iterdir()}
    assert "manifest.json" in modes and set(modes.values()) == {0o600}, modes


def test_an_output_writer_that_reads_its_file_back_is_served_under_umask_0477() -> None:
    """A writer that opens its build file for reading and writing (as matplotlib's ``savefig``
    does: ``plot -o`` said "Permission denied") writes it under umask ``0477``."""
    out = _as_user_under_umask(0o477, ""
                               "path = base / 'p.txt'\n"
                               "def write(tmp):\n"
                               "    with open(tmp, 'r+') as handle:\n"
                               "        handle.write('plotted')\n"
                               "write_atomically(path, write)\n"
                               "print(path.read_text())")
    assert out.split() == ["plotted"], out


# ------------------------ T129f: the probe's capture folder under umask 0477


def test_the_probe_makes_one_private_folder_under_umask_0477() -> None:
    """``make_folder(caps, caps/x.capture)`` under umask ``0477`` makes ``x.capture``,
    ``0700``, and nothing else (it made 16 folders more, each "in the way", then raised)."""
    out = _as_user_under_umask(0o477, ""
                               "caps = base / 'caps'\n"
                               "path, _ = make_folder(caps, caps / 'x.capture')\n"
                               "os.chmod(caps, 0o700)\n"
                               "print(path.name, sorted(p.name for p in caps.iterdir()),\n"
                               "      oct(stat.S_IMODE(os.stat(path).st_mode)))")
    assert out.split() == ["x.capture", "['x.capture']", "0o700"], out
