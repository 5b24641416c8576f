"""Round 20, attack 20c: a forked copy of the engine (a pool's worker forked after the probe
recorded) starts its probe session afresh: its own ``probe_start`` (so that its death is
said), its own counts, its own files (the writer thread's too), its recorder named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import forensics
from tests.hostile.test_round2 import run_cli

PROBE_TESTS = Path(__file__).parents[1] / "probe"

#: the engine records 4 records (written), queues 3 more, forks; the copy records 8 and then
#: ends as argv[4] says (``kill``: SIGKILL; ``close``: the probe's close); the engine closes
FORKED = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from forensics.probe import plugin
    from forensics.probe.settings import Settings

    sys.path.insert(0, sys.argv[2])
    from probe_fakes import record_batch_changes

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=4, writer=sys.argv[3]))
    record_batch_changes(session, [[0, 1]] * 4)
    assert session.drain(timeout=60)
    record_batch_changes(session, [[0, 1]] * 3)
    pid = os.fork()
    if pid == 0:  # the copy
        signal.alarm(120)
        record_batch_changes(session, [[0, 1]] * 8)
        session.flush(wait=True)
        if sys.argv[4] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        session.close()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    session.close()
    print(pid, status)
""")


def _forked(tmp_path: Path, writer: str, end: str, **env: str) -> tuple[Path, int]:
    """Run :data:`FORKED`; the capture and the copy's pid."""
    capture = tmp_path / "fork.capture"
    child = subprocess.run([sys.executable, "-c", FORKED, str(capture), str(PROBE_TESTS),
                            writer, end], env={**os.environ, **env}, timeout=300,
                           capture_output=True, text=True)
    assert child.returncode == 0, child.stderr[-3000:]
    copy, status = map(int, child.stdout.split())
    assert status == (signal.SIGKILL if end == "kill" else 0), child.stderr[-3000:]
    return capture, copy


def _events(capture: Path) -> dict[int, list[dict[str, Any]]]:
    """The capture's events by the pid of the events file that holds them."""
    out: dict[int, list[dict[str, Any]]] = {}
    for path in sorted(capture.glob("events-*.jsonl")):
        pid = int(path.stem.rsplit("-", 1)[1])
        out[pid] = [json.loads(line) for line in path.read_text().splitlines()]
    return out


@pytest.mark.parametrize("writer", ["process", "thread"])
def test_a_forked_copy_killed_after_it_recorded_is_said_to_have_died(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], writer: str) -> None:
    """The copy inherited the engine's ``probe_start`` as already kept: it wrote none, so when
    it was SIGKILLed after writing 8 records nothing said it had run, and ``known`` said "no
    crash" (``summary``: "the capture shows no failure to report"). The copy writes its own
    ``probe_start``; its death is said."""
    capture, copy = _forked(tmp_path, writer, "kill")
    events = _events(capture)
    assert [e["kind"] for e in events.get(copy, [])] == ["probe_start"], events
    assert len(forensics.load(capture)) == 15
    code, out, _ = run_cli(capsys, "known", capture)
    said = " ".join(out.split())
    assert "crash verdict no crash" not in said, out
    assert "1 process(es) died without the probe's stop" in said and f"-{copy})" in said, out


@pytest.mark.parametrize("writer", ["process", "thread"])
def test_a_forked_copys_counts_are_its_own(tmp_path: Path, writer: str) -> None:
    """The copy's ``probe_stop`` counted the engine's records as its own (``records`` 15,
    ``written`` 8, ``dropped`` 0: records != written + dropped). Each process counts its
    own: the copy 8 records, the engine 7, each written."""
    capture, copy = _forked(tmp_path, writer, "close")
    events = _events(capture)
    stops = {pid: [e for e in mine if e["kind"] == "probe_stop"] for pid, mine in events.items()}
    assert sorted(stops) == sorted([copy, *(p for p in stops if p != copy)]) and len(stops) == 2
    for pid, stop in stops.items():
        assert len(stop) == 1 and all(e["pid"] == pid for e in events[pid]), events
        records = 8 if pid == copy else 7
        assert (stop[0]["records"], stop[0]["written"], stop[0]["dropped"]) == \
            (records, records, 0), stop
    assert len(forensics.load(capture)) == 15


def test_a_forked_copy_with_the_writer_thread_writes_files_of_its_own(tmp_path: Path) -> None:
    """``FORENSICS_WRITER=thread``: the copy inherited the engine's open writer and appended
    its records (and the 3 the engine had queued, again) to the engine's segment and its
    ``probe_stop`` to the engine's events file: the segment's index no longer matched and
    every command refused the capture ("index entry 2 does not match the segment"). The copy
    writes segments and an events file of its own; the engine's are whole."""
    capture, copy = _forked(tmp_path, "thread", "close")
    loaded = forensics.load(capture)
    assert len(loaded) == 15
    assert sorted(_events(capture)) == sorted({copy, *_events(capture)})
    assert len(list(capture.glob(f"*-{copy}.0000.arrows"))) == 1


def test_a_forked_copy_names_its_recorder_in_its_probe_start(tmp_path: Path) -> None:
    """With ``FORENSICS_KERNELS`` the copy's ``probe_start`` names the selection its recorder
    counts (it said ``null`` where it had launched nothing before its first record, or wrote
    none), so that a copy killed before it dumped leaves no kernel ``never_launched``; a
    copy that closes writes its ``kernel_summary``."""
    capture, copy = _forked(tmp_path, "process", "kill", FORENSICS_KERNELS="all")
    starts = [e for e in _events(capture)[copy] if e["kind"] == "probe_start"]
    assert [e.get("kernels") for e in starts] == [["*"]]
    capture, copy = _forked(tmp_path / "closed", "process", "close", FORENSICS_KERNELS="all")
    kinds = [e["kind"] for e in _events(capture)[copy]]
    assert kinds[0] == "probe_start" and "kernel_summary" in kinds and kinds[-1] == "probe_stop"


# ----------- T118e: a process of another host with the same pid owes its kernel_summary too


@pytest.fixture
def two_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed vLLM's kernels, as the sanitizer reads them: two of module vllm.x."""
    from forensics.kernels import sanitizer

    monkeypatch.setattr(sanitizer, "installed_kernels",
                        lambda: [("vllm.x", "_kept"), ("vllm.x", "_other")])


def test_a_killed_recorder_sharing_a_pid_with_another_hosts_is_not_counted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], two_kernels: None) -> None:
    """Two nodes' workers, each in a container, both pid 7, write one capture folder
    (``FORENSICS_CAPTURE``): node A's recorded ``_kept`` and wrote its counts; node B's
    named its recorder in its ``probe_start`` and was SIGKILLed before it dumped. Coverage
    matched summaries to ``probe_start`` events by pid alone, so A's count stood for B's and
    ``_other`` was ``never_launched``; each process is its events file's (``HOST-PID``):
    ``_other`` is ``not_watched``, its why naming ``nodeb-7``."""
    from tests.hostile.test_round4_kernels import launch

    root = tmp_path / "k.capture"
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps({
        "format": 1, "creator": "test", "engine_id": "e" * 32, "model": {},
        "process": {"host": "nodea", "pid": 7, "rank": 0, "tag": "nodea-7"}, "versions": {}}))
    start = {"kind": "probe_start", "step": 0, "time": 1.0, "pid": 7, "kernels": ["*"]}
    node_a = [{**start, "rank": 0},
              {**launch(step=40), "kernel": {"module": "vllm.x", "name": "_kept",
                                             "source_sha256": ""}},
              {"kind": "kernel_summary", "format": 1, "step": 40, "rank": 0, "pid": 7,
               "graph_only": [], "kernels_seen": {"vllm.x._kept": 1}, "selection": ["*"]}]
    for name, events in (("nodea-7", node_a), ("nodeb-7", [{**start, "rank": 1}])):
        (root / f"events-{name}.jsonl").write_text("".join(json.dumps(e) + "\n"
                                                           for e in events))
    code, out, _ = run_cli(capsys, "kernels", root, "--coverage", "--json")
    rows = {str(r["kernel"]): r for r in json.loads(out)["coverage"]}
    assert rows["_other"]["status"] == "not_watched", rows
    assert "process(es) nodeb-7 started recording kernels" in str(rows["_other"]["why"])


def test_two_hosts_processes_of_one_pid_and_rank_count_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], two_kernels: None) -> None:
    """Two hosts' processes of one pid and rank (an engine restarted on another node into one
    capture folder) each counted 1 launch of ``_other``: their counts were taken for one
    process's summaries (its largest count: 1); they are added (2)."""
    root = tmp_path / "k.capture"
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps({
        "format": 1, "creator": "test", "engine_id": "e" * 32, "model": {},
        "process": {"host": "nodea", "pid": 7, "rank": 0, "tag": "nodea-7"}, "versions": {}}))
    for name in ("nodea-7", "nodeb-7"):
        events = [{"kind": "probe_start", "step": 0, "time": 1.0, "pid": 7, "rank": 0,
                   "kernels": ["*"]},
                  {"kind": "kernel_summary", "format": 1, "step": 4, "rank": 0, "pid": 7,
                   "graph_only": [], "kernels_seen": {"vllm.x._other": 1}, "selection": ["*"]}]
        (root / f"events-{name}.jsonl").write_text("".join(json.dumps(e) + "\n"
                                                           for e in events))
    code, out, _ = run_cli(capsys, "kernels", root, "--coverage", "--json")
    rows = {str(r["kernel"]): r for r in json.loads(out)["coverage"]}
    assert (rows["_other"]["status"], rows["_other"]["seen"]) == ("not_recorded", 2), rows


# ------------------------------- T118f: embedding_guard's capture: `~` is the home folder


def test_embedding_guards_capture_under_the_home_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``embedding_guard(capture="~/eg.capture")`` wrote a folder named ``~`` under the
    current one (T41d: every output path of the API goes through ``atomic.user_path``); its
    capture is in the home folder."""
    import torch

    from forensics.probe import embedding_guard

    home, here = tmp_path / "home", tmp_path / "here"
    home.mkdir()
    here.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(here)
    weight = torch.zeros(4, 2)
    with embedding_guard(capture="~/eg.capture", mode="record") as seen:
        torch.nn.functional.embedding(torch.tensor([0, 3]), weight)
    assert seen.capture == home / "eg.capture" and not (here / "~").exists()
    assert len(forensics.load(home / "eg.capture")) == 1


@pytest.mark.parametrize("there", ["capture", "folder", "link"])
def test_embedding_guard_writes_into_nothing_that_exists(tmp_path: Path, there: str) -> None:
    """``embedding_guard(capture=PATH)`` wrote into whatever ``PATH`` was: an engine's
    capture (its lookups became ``embedding`` records of the engine's, steps from 0), a
    folder of the user's, or a folder a link planted at ``PATH`` leads to. A path that exists
    is refused in one line naming it; nothing is written."""
    import torch

    from forensics.errors import ConfigurationError
    from forensics.probe import embedding_guard

    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    path = tmp_path / "eg.capture"
    if there == "link":
        path.symlink_to(target)
    else:
        path.mkdir()
        if there == "capture":
            (path / "manifest.json").write_text("{}")
    before = sorted(p.name for p in (target if there == "link" else path).iterdir())
    with pytest.raises(ConfigurationError) as raised:
        with embedding_guard(capture=path, mode="record"):
            torch.nn.functional.embedding(torch.tensor([0]), torch.zeros(2, 2))
    assert f"'{path}' exists" in str(raised.value) and "\n" not in str(raised.value)
    assert sorted(p.name for p in (target if there == "link" else path).iterdir()) == before


def test_embedding_guards_bounds_error_is_not_hidden_by_a_failed_close(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard mode: a lookup out of range raises ``IndexBoundsError``; the capture's close then
    failed (a full disk) and its ``OSError`` replaced the guard's error, which named the
    tensor and element. The guard's error is raised; the close's failure is logged."""
    import torch

    from forensics.errors import IndexBoundsError
    from forensics.probe import embedding_guard
    from forensics.store.writer import CaptureWriter

    def full(self: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(CaptureWriter, "close", full)
    with pytest.raises(IndexBoundsError):
        with embedding_guard(capture=tmp_path / "eg.capture", mode="guard"):
            torch.nn.functional.embedding(torch.tensor([0, 9]), torch.zeros(4, 2))
    with pytest.raises(OSError):  # a block that raised nothing: the close's failure is said
        with embedding_guard(capture=tmp_path / "ok.capture", mode="guard"):
            torch.nn.functional.embedding(torch.tensor([0]), torch.zeros(4, 2))


# --------------- T118h: the probe's counts and sizes are read as ASCII digits, as every number


@pytest.mark.parametrize("name", ["FORENSICS_RING", "FORENSICS_FLUSH_EVERY",
                                  "FORENSICS_KERNELS_KEEP", "FORENSICS_KERNELS_BUDGET"])
@pytest.mark.parametrize("raw", ["\u0663", "1_0", "+5", "\uff15"])
def test_a_probe_count_in_other_than_ascii_digits_is_refused(
        tmp_path: Path, name: str, raw: str) -> None:
    """``int()`` read ``FORENSICS_RING=٣`` (an Arabic-Indic three) as 3, ``1_0`` as 10, ``+5``
    as 5, a full-width ``５`` as 5: accepted, where every other number a user writes is ASCII
    digits only (T38e, :mod:`forensics.digits`). Each is one line naming the variable."""
    from forensics.errors import ConfigurationError
    from forensics.probe import kernel_selection
    from forensics.probe.settings import from_env

    env = {"FORENSICS_DIR": str(tmp_path), name: raw, "FORENSICS_RING": "64"} \
        if name != "FORENSICS_RING" else {"FORENSICS_DIR": str(tmp_path), name: raw}
    with pytest.raises(ConfigurationError) as raised:
        if name.startswith("FORENSICS_KERNELS_"):
            kernel_selection.keep_steps(env)
            kernel_selection.budget(env)
        else:
            from_env(env)
    said = str(raised.value)
    assert said.startswith(f"{name}=") and "\n" not in said
