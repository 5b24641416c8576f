"""Round 20, the lead: a process that recorded kernels and died before it dumped its counts
leaves its mark, so `kernels --coverage` says no kernel "never launched" on the others' counts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import forensics
from tests.hostile.test_round2 import run_cli

PROBE_TESTS = Path(__file__).parents[1] / "probe"

# ----------------------- T117a: a recording process killed before it dumped its counts

KILLED_RECORDER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from forensics.probe import plugin
    from forensics.probe.settings import Settings

    sys.path.insert(0, sys.argv[2])
    from probe_fakes import record_batch_changes

    capture = Path(sys.argv[1])
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=64,
                                    flush_every=1000, handoff="batch", writer="thread"))
    record_batch_changes(session, [[0, 1], [1, 0]])
    session.flush(wait=True)
    os.kill(os.getpid(), signal.SIGKILL)  # before the recorder dumps its launches and counts
""")


def test_a_recording_process_says_so_in_its_probe_start(tmp_path: Path) -> None:
    """A process whose flight recorder runs (``FORENSICS_KERNELS``) names its selection in
    its ``probe_start``; it writes its counts (``kernel_summary``) only when it dumps, so one
    SIGKILLed before that left no trace of having recorded: its ``probe_start`` is that trace."""
    capture = tmp_path / "child.capture"
    env = {**os.environ, "FORENSICS_KERNELS": "all"}
    child = subprocess.run([sys.executable, "-c", KILLED_RECORDER, str(capture),
                            str(PROBE_TESTS)], env=env, timeout=300, capture_output=True,
                           text=True)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    loaded = forensics.load(capture)
    starts = [e for e in loaded.events if e["kind"] == "probe_start"]
    assert [e.get("kernels") for e in starts] == [["*"]]
    assert not [e for e in loaded.kernel_events if e.get("kind") == "kernel_summary"]


def test_a_process_without_the_recorder_names_no_kernels(tmp_path: Path) -> None:
    """Without ``FORENSICS_KERNELS`` the ``probe_start`` says ``kernels: null`` (it owes no
    count)."""
    capture = tmp_path / "child.capture"
    env = {k: v for k, v in os.environ.items() if not k.endswith("FORENSICS_KERNELS")}
    child = subprocess.run([sys.executable, "-c", KILLED_RECORDER, str(capture),
                            str(PROBE_TESTS)], env=env, timeout=300, capture_output=True,
                           text=True)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    starts = [e for e in forensics.load(capture).events if e["kind"] == "probe_start"]
    assert [e.get("kernels", "absent") for e in starts] == [None]


@pytest.fixture
def two_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed vLLM's kernels, as the sanitizer reads them: two of module vllm.x."""
    from forensics.kernels import sanitizer

    monkeypatch.setattr(sanitizer, "installed_kernels",
                        lambda: [("vllm.x", "_kept"), ("vllm.x", "_other")])


def _two_processes(root: Path, starts: list[dict[str, object]]) -> None:
    """A capture of one recorded launch of ``vllm.x._kept`` by process 1 (rank 0), its
    ``kernel_summary`` (selection ``*``), and the ``probe_start`` events ``starts``."""
    from test_round19_attack19b import one_launch_capture

    one_launch_capture(root, [
        {"kind": "kernel_summary", "format": 1, "step": 40, "rank": 0, "pid": 1,
         "graph_only": [], "kernels_seen": {"vllm.x._kept": 1}, "selection": ["*"]},
        *({"kind": "probe_start", "step": 0, "time": 1.0, "rank": 0, **s} for s in starts)])


@pytest.mark.parametrize("starts", [
    [{"pid": 1, "kernels": ["*"]}, {"pid": 2, "kernels": ["*"]}],
    [{"pid": 1, "kernels": ["*"]}] + [{"pid": p, "kernels": ["_other"]} for p in range(2, 12)]])
def test_a_kernel_a_killed_recorder_may_have_launched_is_not_said_never_launched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], two_kernels: None,
        starts: list[dict[str, object]]) -> None:
    """Process 2 recorded kernels (its ``probe_start`` says so) and was killed before it
    wrote its counts; process 1's counts saw no ``_other``. ``--coverage`` said
    ``never_launched`` of ``_other`` on process 1's counts alone; process 2 may have launched
    it: it is ``not_watched``, naming the processes that wrote no count."""
    _two_processes(tmp_path / "k.capture", starts)
    code, out, _ = run_cli(capsys, "kernels", tmp_path / "k.capture", "--coverage", "--json")
    rows = {str(r["kernel"]): r for r in json.loads(out)["coverage"]}
    assert rows["_other"]["status"] == "not_watched", rows
    why = str(rows["_other"]["why"])
    assert "whether it was launched is unknown" in why
    silent = [s["pid"] for s in starts if s["pid"] != 1]
    named = ", ".join(map(str, silent[:8]))
    assert f"process(es) {named}" in why and "wrote no kernel_summary" in why
    assert (f"the first 8 of {len(silent)}" in why) == (len(silent) > 8)


def test_processes_that_all_wrote_their_counts_leave_never_launched_as_it_was(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], two_kernels: None) -> None:
    """Every process whose ``probe_start`` names its recorder wrote a count (and an older
    probe's ``probe_start`` names none, a process without the recorder ``null``): a kernel
    no count saw is ``never_launched``, as before."""
    _two_processes(tmp_path / "k.capture", [{"pid": 1, "kernels": ["*"]}, {"pid": 3},
                                            {"pid": 4, "kernels": None}])
    code, out, _ = run_cli(capsys, "kernels", tmp_path / "k.capture", "--coverage", "--json")
    rows = {str(r["kernel"]): r for r in json.loads(out)["coverage"]}
    assert rows["_other"]["status"] == "never_launched", rows


# ----------------------- T117b: the steps of a log's lines that name none are its lines' order

LOG = Path(__file__).parents[1] / "data" / "sm70_engine.log"
NAMED = ("(EngineCore_DP0 pid=4242) SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=-1 "
         "max=7 step={step} rank=0\n")


def _imported(tmp_path: Path, capsys: pytest.CaptureFixture[str], log: Path) -> Path:
    """``log`` imported into ``tmp_path/log.capture``."""
    capture = tmp_path / "log.capture"
    code, out, err = run_cli(capsys, "import", log, "-o", capture)
    assert code == 0, out + err
    return capture


@pytest.mark.parametrize("command", [["replay"], ["summary"], ["summary", "--format", "text"],
                                     ["known"]])
def test_steps_a_log_never_named_are_said_to_be_its_lines_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    """tests/data/sm70_engine.log's first two probe lines name no step: the import numbers
    them 0 and 1 in line order, and the conclusion said "First violation (upstream):
    async_output at step 0" as though the engine's step 0 were meant. The manifest now counts
    those records (``imported.ordinal_records``) and every output of the conclusion says
    their steps are their lines' order, not the engine's."""
    capture = _imported(tmp_path, capsys, LOG)
    manifest = json.loads((capture / "manifest.json").read_text())
    assert manifest["imported"]["ordinal_records"] == 2
    code, out, _ = run_cli(capsys, *command, capture)
    assert code == 0, out
    flat = " ".join(out.split())
    assert "step 0" in flat  # the step the records stand at, now explained
    assert ("Its source named no step for 2 record(s): their steps number its probe lines in "
            "order, so a step said of them is not the engine's.") in flat


def test_a_log_naming_every_step_says_nothing_of_line_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log whose every probe line names its step: no ``ordinal_records``, no sentence."""
    log = tmp_path / "named.log"
    log.write_text(NAMED.format(step=3) + NAMED.format(step=4))
    capture = _imported(tmp_path, capsys, log)
    assert "ordinal_records" not in json.loads((capture / "manifest.json").read_text())[
        "imported"]
    code, out, _ = run_cli(capsys, "replay", capture)
    assert code == 0 and "named no step" not in out


def test_a_forged_count_of_ordinal_records_is_read_as_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A manifest whose ``imported.ordinal_records`` is not a record count (text, a list, a
    negative number) says nothing of it, and the replay goes on."""
    capture = _imported(tmp_path, capsys, LOG)
    path = capture / "manifest.json"
    for forged in ("lots", [1], -3):
        manifest = json.loads(path.read_text())
        manifest["imported"]["ordinal_records"] = forged
        path.write_text(json.dumps(manifest))
        code, out, _ = run_cli(capsys, "replay", capture)
        assert code == 0 and "named no step" not in out, forged


# ----------------------- T117c: the verdict matrix names what no variant judged

LOST_EVENTS = ('{"kind":"probe_start","step":0,"rank":0}\n'
               '{"kind":"probe_stop","step":200,"rank":0,"records":900,"written":800,'
               '"dropped":100,"events_dropped":1200}\n')


def test_the_verdict_matrix_says_what_no_variant_judged(tmp_path: Path) -> None:
    """data/clean.capture whose probe's stop says it never wrote 100 records and left 1,200
    events out: `plot --kind verdicts` (and the report's figure) showed "ok" in every cell with
    nothing said, where `replay` says what was not judged. The matrix' title now says it, in
    lines of at most 80 characters, in the report's SVG and matplotlib's figure alike."""
    import shutil
    import xml.etree.ElementTree as ET

    from forensics.present.scene.verdicts import verdict_title
    from forensics.present.svg.verdicts import verdict_figure

    capture = tmp_path / "lost.capture"
    shutil.copytree(Path(__file__).parents[2] / "data" / "clean.capture", capture)
    (capture / "events-w0.jsonl").write_text(LOST_EVENTS)
    result = forensics.replay(capture, ["upstream", "patched"])
    title = verdict_title(result)
    lines = title.split("\n")
    assert lines[:2] == ["lost · all sites · all variants", "verdicts"]
    said = " ".join(lines[2:])
    assert said.startswith("not judged: 100 record(s) recorded by the probe and never written")
    assert "1200 event(s) left out by the probe, its events file full" in said
    assert all(len(line) <= 80 for line in lines[2:])
    root = ET.fromstring(verdict_figure(result).to_svg())
    texts = [("".join(e.itertext())) for e in root.iter() if e.tag.endswith("}text")]
    assert [t for t in texts if t in lines[2:]] == lines[2:]


def test_the_verdict_matrix_of_a_capture_judged_whole_says_nothing_more() -> None:
    """A capture whose every record was judged keeps the two-line title."""
    from forensics.present.scene.verdicts import verdict_title

    result = forensics.replay(Path(__file__).parents[2] / "data" / "clean.capture",
                              ["upstream", "patched"])
    assert verdict_title(result) == "clean · all sites · all variants\nverdicts"
