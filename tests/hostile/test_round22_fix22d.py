"""Round 22, fix22d: what fix22b found and left.

T137a: a probe's ``probe_stop`` says how many records a signal cut out of their hand-off
(``lost_to_signal``, T131f); the readers said only "counted in its probe_stop's records, yet
neither written nor dropped", not why, and a redacted capture lost the count.
T137b: a signal's handler raising as a block was framed left it written and counted lost.
T137c: the pytest plugin said nothing of a folder it could not list beside captures it found.
T137d: a writer skipped, unsaid, the old builds in a folder it could not list.
T137e: the umask was read by setting it to 077 for a moment, process-wide.
"""

from __future__ import annotations

import functools
import html
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.hostile import test_round20_fix20b as fix20b
from tests.hostile import test_round22_fix22b as fix22b
from tests.hostile.test_round2 import run_cli

# ------------------------------ T137a: the records lost to a signal are said


def _stopped(tmp_path: Path, counts: str) -> Path:
    """Round 20's capture of a probe's stop holding ``counts``, without its probe's start."""
    return fix20b._stopped(tmp_path, counts, start=False)


@pytest.mark.parametrize("command", ["replay", "summary", "report"])
def test_the_records_lost_to_a_signal_are_said(
        tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """900 records counted, 897 written, none dropped, 2 lost to a signal (the probe's
    ``lost_to_signal``): the readers say why 2 of the 3 were never written; they said only
    "counted in its probe_stop's records, yet neither written nor dropped"."""
    capture = _stopped(tmp_path, '"records": 900, "written": 897, "dropped": 0, '
                                 '"lost_to_signal": 2')
    args = [command, capture] + (["-o", str(tmp_path / "r.md")] if command == "report" else [])
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    if command == "report":
        out = html.unescape((tmp_path / "r.md").read_text())
    said = " ".join(out.split())
    assert ("3 record(s) were recorded by the probe and never written (3 counted in its "
            "probe_stop's records, yet neither written nor dropped, 2 of these lost to a "
            "signal, its probe_stop says (a handler raised, as KeyboardInterrupt or SystemExit,"
            " as their outputs were copied, or as they were handed to the writer or waited"
            " for room in its ring or for the probe's lock))"
            ) in said, said


def test_inspect_lists_the_records_lost_to_a_signal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``inspect`` lists the count apart, and says why in its not-judged line."""
    capture = _stopped(tmp_path, '"records": 900, "written": 897, "dropped": 0, '
                                 '"lost_to_signal": 2')
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 0 and "  records lost to signal: 2" in out.splitlines(), out
    assert "2 of these lost to a signal, its probe_stop says" in out, out


@pytest.mark.parametrize("lost", ['"2"', "true", "-1", "1e3", str(2**63), "[1]"])
def test_a_lost_count_that_is_no_count_is_ignored(
        tmp_path: Path, lost: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``lost_to_signal`` that is no non-negative int64 is ignored, as the other counts are:
    the unaccounted records are said as before, with no reason."""
    capture = _stopped(tmp_path, '"records": 900, "written": 897, "dropped": 0, '
                                 f'"lost_to_signal": {lost}')
    code, out, err = run_cli(capsys, "summary", capture)
    said = " ".join(out.split())
    assert code == 0, err
    assert ("(3 counted in its probe_stop's records, yet neither written nor dropped)"
            in said), said
    assert "lost to a signal" not in said, said


def test_a_lost_count_says_no_more_than_the_records_unaccounted() -> None:
    """A stop claiming more lost than it counts beyond written and dropped says only those;
    a stop that adds up loses none; each stop is read apart."""
    from forensics.store.events import lost_by_probe

    stops = [{"kind": "probe_stop", "records": 10, "written": 9, "dropped": 0,
              "lost_to_signal": 5},
             {"kind": "probe_stop", "records": 10, "written": 10, "dropped": 0,
              "lost_to_signal": 5},
             {"kind": "probe_stop", "records": 10, "written": 5, "dropped": 0,
              "lost_to_signal": 2},
             {"kind": "probe_start", "records": 10, "written": 0, "dropped": 0,
              "lost_to_signal": 2}]
    assert lost_by_probe(stops) == 3


def test_redact_keeps_the_records_lost_to_a_signal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A redacted capture's ``probe_stop`` keeps ``lost_to_signal``: its readers say why as
    the original's do; the redaction dropped the key."""
    capture = _stopped(tmp_path, '"records": 900, "written": 897, "dropped": 0, '
                                 '"lost_to_signal": 2')
    out = tmp_path / "red.capture"
    code, _, err = run_cli(capsys, "redact", capture, "-o", str(out))
    assert code == 0, err
    stops = [json.loads(line) for path in out.glob("events-*.jsonl")
             for line in path.read_text().splitlines()]
    assert [e.get("lost_to_signal") for e in stops if e["kind"] == "probe_stop"] == [2], stops
    code, said, err = run_cli(capsys, "summary", out)
    assert code == 0 and "2 of these lost to a signal" in " ".join(said.split()), said


# ------------------------------ T137b: a frame a signal cuts is framed and counted together

#: the instructions after which CPython 3.11 runs a signal's handler (its eval breaker)
BREAKERS = {"RESUME", "CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD"}


def _cut_at(point: int, call: Any) -> bool:
    """Run ``call`` with a ``KeyboardInterrupt`` raised at its ``point``-th place where a
    signal's handler may run (after an instruction of :data:`BREAKERS`, in the channel's own
    code); True when it was cut there, False when it ran to its end first."""
    import dis
    import sys

    from forensics.probe import channel

    seen: list[int] = [0]
    last: dict[Any, str] = {}

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            if last.get(frame) in BREAKERS:
                seen[0] += 1
                if seen[0] == point:
                    raise KeyboardInterrupt
            last[frame] = dis.opname[frame.f_code.co_code[frame.f_lasti]]
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != channel.__file__:
            return None
        frame.f_trace_opcodes = True
        last[frame] = "RESUME"
        return local

    sys.settrace(tracer)
    try:
        call()
    except KeyboardInterrupt:
        return True
    finally:
        sys.settrace(None)
    return False


class _Layout:
    """A layout whose announcement is 16 bytes (the test's stand-in)."""

    def __init__(self, number: int, site: str, parts: Any) -> None:
        self.announce = b"L" * 16


@pytest.mark.parametrize("how", ["record", "block"])
def test_a_frame_a_signal_cuts_is_framed_and_counted_together(
        how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Wherever a signal's handler raises in the channel's ``put_record`` or ``put_block``
    (each place CPython 3.11 runs one), a frame is in the ring (below ``head``) exactly when
    its records are counted framed: ``put_block`` moved ``head`` and then called ``len``
    before counting, so a handler there left a block written yet counted lost to a signal."""
    from forensics.probe import channel as channel_module
    from forensics.probe import frames
    from forensics.probe.copy import PendingRecord

    monkeypatch.setattr(frames, "Layout", _Layout)
    monkeypatch.setattr(frames, "block_size", lambda layout, pendings: (64, [], []))
    monkeypatch.setattr(frames, "put_block", lambda *args: None)
    monkeypatch.setattr(frames, "record_blob", lambda pending: b"R" * 32)
    pendings = [PendingRecord("batch_change", step, 0) for step in range(3)]
    whole = {"record": (32, 1), "block": (16 + 64, 3)}[how]
    point, cut = 0, True
    while cut:
        point += 1
        chan = channel_module.WriterChannel(1 << 16)
        try:
            cut = _cut_at(point, functools.partial(chan.put_record, pendings[0])
                          if how == "record" else
                          functools.partial(chan.put_block, ("parts",), pendings))
            framed = whole[1] if chan.head == whole[0] else 0
            assert chan.framed == framed, (point, chan.head, chan.framed)
        finally:
            os.close(chan.ring.fd)
    assert point > 3  # the cuts reached past the copies, into the counting


# ------------------------------ T137c: the plugin warns of a folder it cannot list


def test_the_plugin_warns_of_a_folder_it_cannot_list_beside_captures() -> None:
    """``--forensics-captures top`` (``top`` holds ``a.capture`` and ``U/f/x.capture`` made
    under umask ``0477``: ``U`` is ``0300``) collects ``a.capture`` and warns, in ``triage``'s
    words, that ``U`` cannot be listed; ``x.capture`` dropped out unsaid."""
    out = fix22b._as_user(0o477, fix22b.UNLISTED_TOP +
                          "import warnings\n"
                          "from forensics.pytest_plugin import _warn_unread\n"
                          "found = captures_under(top, unlisted)\n"
                          "print([p.name for p in found])\n"
                          "with warnings.catch_warnings(record=True) as said:\n"
                          "    warnings.simplefilter('always')\n"
                          "    _warn_unread(found, unlisted)\n"
                          "for warning in said:\n"
                          "    print(type(warning.message).__name__,\n"
                          "          str(warning.message).replace(str(base), 'B'))")
    assert out.splitlines() == [
        "['a.capture']",
        "PytestWarning not read: 1 folder(s) that cannot be listed (B/top/U: Permission "
        "denied): the captures in them cannot be found; name them (FOLDER/NAME.capture), or "
        "make the folders readable to you (chmod u+r where they are yours)"], out


# ------------------------------ T137d: a writer says it cannot look for old builds


def test_a_writer_says_it_cannot_look_for_old_builds_in_a_folder_it_cannot_list() -> None:
    """Under umask ``0477`` ``U/f`` is ``0300``: a writer of ``U/f/x.capture`` cannot list it,
    so the build a dead process left there (``.x.capture.tmp-PID``) stays; one line says so,
    where and the fix. It was skipped unsaid (``os.listdir``'s PermissionError)."""
    out = fix22b._as_user(0o477, ""
                          "import warnings\n"
                          "make_folders(base / 'U' / 'f' / 'x.capture')\n"
                          "os.mkdir(base / 'U' / 'f' / '.x.capture.tmp-4194303', 0o700)\n"
                          "with warnings.catch_warnings(record=True) as said:\n"
                          "    warnings.simplefilter('always')\n"
                          "    replace.recover(base / 'U' / 'f' / 'x.capture', clean=True)\n"
                          "for warning in said:\n"
                          "    print(str(warning.message).replace(str(base), 'B'))\n"
                          "print(os.path.isdir(base / 'U' / 'f' / '.x.capture.tmp-4194303'))")
    assert out.splitlines() == [
        "forensics: not looked for: unfinished builds dead processes may have left beside "
        "'B/U/f/x.capture' ('.x.capture.tmp-PID'): its folder 'B/U/f' cannot be listed "
        "(Permission denied); make it readable to you (chmod u+r) and write again to remove "
        "them, or remove them by name", "True"], out


def test_a_writer_still_removes_old_builds_in_a_folder_it_can_list(tmp_path: Path) -> None:
    """A folder that can be listed: the build a dead process left is removed, nothing said."""
    import warnings

    from forensics.store import replace

    (tmp_path / ".x.capture.tmp-4194303").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        replace.recover(tmp_path / "x.capture", clean=True)
    assert not (tmp_path / ".x.capture.tmp-4194303").exists()


# ------------------------------ T137e: the umask is read without setting it


def _umask_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every value ``os.umask`` is set to from now on (it still sets it)."""
    calls: list[int] = []
    real = os.umask

    def recorded(mask: int) -> int:
        calls.append(mask)
        return real(mask)

    monkeypatch.setattr(os, "umask", recorded)
    return calls


def _stated_umask() -> int:
    """The umask Linux states for this process (``Umask:`` in ``/proc/self/status``)."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("Umask:"))
    return int(line.split()[1], 8)


@pytest.mark.parametrize("status", ["/proc/self/status", "/nonexistent/status"])
def test_the_umask_is_read_without_setting_it(
        status: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under umask ``0437``, a shared output's mode is ``0640`` and the pool's lifted umask
    ``0037``, and the process's umask is never set to ``077`` to read it (a file another
    thread made in that moment got ``077``: ``0600`` where ``0640`` was due), where Linux
    states it (``Umask:`` in ``/proc/self/status``); where it does not, the old way, as
    before."""
    from forensics import modes
    from forensics.atomic import shared_mode

    monkeypatch.setattr(modes, "_STATUS", status, raising=False)
    before = os.umask(0o437)
    try:
        calls = _umask_calls(monkeypatch)
        assert shared_mode() == 0o640
        with modes.owner_read_write():
            assert _stated_umask() == 0o037
        assert _stated_umask() == 0o437
    finally:
        monkeypatch.undo()
        os.umask(before)
    if status.startswith("/nonexistent"):  # each read sets 077 and puts the umask back
        expected = [0o077, 0o437, 0o077, 0o437, 0o037, 0o437]
    else:
        expected = [0o037, 0o437]
    assert calls == expected, [oct(c) for c in calls]
