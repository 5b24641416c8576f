"""Hostile input, round 15, fixes of what the attacker found and left (fix15c): an incident
notebook told of another capture; an error line that named no capture; a plugin's site asked
for where the plugin is not installed; a kernel counted as graph-only for one captured launch.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from test_round14_fix14 import plugin_captures  # noqa: F401  (a fixture: a site not installed)

from forensics.cli import main
from tests.conftest import DATA

# ------------------------------------------------------------------ T81a: incident notebooks


@pytest.mark.parametrize("notebook,incident", [("01_stale_prev_rows", "incident A"),
                                               ("02_vocab_sentinel", "incident B")])
def test_an_incident_notebook_refuses_a_capture_not_its_incidents(
        notebook: str, incident: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``report data/clean.capture --notebook 01_stale_prev_rows`` wrote incident A's text
    ("the engine died...", "both ranks", "the hypothesis is refuted for this crash") and the
    bundled confirming capture's tables under the user's capture's name (02: incident B's
    hard-coded log and a real-vLLM replay with a bundled diff); it now refuses in one line
    naming the notebook, the capture and the fix, and writes nothing."""
    out = tmp_path / "r.html"
    assert main(["report", str(DATA / "clean.capture"), "-o", str(out),
                 "--notebook", notebook]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"notebook '{notebook}' tells {incident}'s story" in err
    assert f"capture '{DATA / 'clean.capture'}' is not {incident}'s" in err
    assert "--notebook 03_triage" in err and "incident-" in err
    assert not out.exists()


def test_a_copy_of_an_incident_capture_is_another_capture(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The incident is the capture the notebook names, not one that looks like it."""
    import shutil

    copy = tmp_path / "mine.capture"
    shutil.copytree(DATA / "incident-a-stale-prev-rows-refuted.capture", copy)
    assert main(["report", str(copy), "-o", str(tmp_path / "r.html"),
                 "--notebook", "01_stale_prev_rows"]) == 2
    assert f"capture '{copy}' is not incident A's" in capsys.readouterr().err


def test_an_incident_notebook_runs_on_its_own_capture_and_leaves_nothing_in_tmp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """02_vocab_sentinel on incident B's capture made ``/tmp/incident-b-*`` (its log, the
    capture imported from it) and left it there; a report's cells now make their temporary
    files in a private folder removed after."""
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    out = tmp_path / "b.html"
    assert main(["report", str(DATA / "incident-b-vocab-sentinel.capture"), "-o", str(out),
                 "--notebook", "02_vocab_sentinel"]) == 0
    assert "Incident B" in out.read_text(encoding="utf-8")
    assert list(private.iterdir()) == []


# ------------------------------------------------------------------ T81b: a line naming the capture


def _uint64_capture(path: Path) -> Path:
    """A capture whose embedding ``input_ids`` are uint64, one of them past int64."""
    import numpy as np

    from forensics.records import Record
    from forensics.store.writer import write_capture

    records = [Record("embedding", step, 0, {
        "input_ids": np.array([1, 2, 2**63 + 5 if step == 1 else 3], dtype=np.uint64),
        "num_embeddings": 248320}) for step in range(3)]
    return write_capture(path, records, manifest={"notes": "uint64 input_ids"})


@pytest.mark.parametrize("command", [["plot", "-o", "PLOT.svg"], ["findings"], ["summary"],
                                     ["replay"], ["shrink", "-o", "SMALL.capture"],
                                     ["redact", "-o", "RED.capture"]])
def test_a_value_past_int64_names_the_capture_and_its_segment(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``plot``, ``findings``, ``summary`` (and every command replaying the capture) on uint64
    ``input_ids`` past 2**63 said "embedding records of steps 0-2: 'input_ids' holds values past
    int64 ..." naming the field and the fix but no file; the line now names the segment file
    and the capture, as every other bad-input line does."""
    capture = _uint64_capture(tmp_path / "wide-ids.capture")
    args = [command[0], str(capture),
            *(str(tmp_path / a) if a.isupper() else a for a in command[1:])]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert ("segment 'embedding.r0.w0.0000.arrows' of 'wide-ids.capture', batch 0: embedding "
            "records of steps 0-2: 'input_ids' holds values past int64") in err, err
    assert "capture that field as a signed integer tensor" in err



def test_a_value_past_int64_in_one_segment_names_that_segment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Step 1's ids alone uint64 (a segment of their own): the line names that segment."""
    import numpy as np

    from forensics.records import Record
    from forensics.store.writer import write_capture

    records = [Record("embedding", step, 0, {"input_ids": np.array(
        [1, 2, 2**63 + 5], dtype=np.uint64) if step == 1 else np.array([1, 2, 3], np.int64),
        "num_embeddings": 248320}) for step in range(3)]
    capture = write_capture(tmp_path / "mixed.capture", records, manifest={})
    assert main(["findings", str(capture)]) == 2
    assert ("segment 'embedding.r0.w0.0001.arrows' of 'mixed.capture', batch 0: embedding "
            "records of steps 1-1: 'input_ids' holds values past int64"
            ) in capsys.readouterr().err

# ------------------------------------------------------------------ T81c: a plugin's site, absent


@pytest.mark.parametrize("kind", ["only", "both"])
@pytest.mark.parametrize("command", [["plot", "-o", "PLOT.svg"], ["findings"]])
def test_a_site_of_a_plugin_not_installed_is_said_so_with_its_records(
        command: list[str], kind: str, plugin_captures: dict[str, Path],  # noqa: F811
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``plot``/``findings --site toy_gather`` on a capture holding 3 records of that site (a
    plugin's, not installed here) said "unknown site 'toy_gather'" and listed the built-in
    sites, as if the capture held none; the one line now says the capture holds its 3 records
    and that the plugin declaring it is not installed."""
    capture = plugin_captures[kind]
    args = [command[0], str(capture), "--site", "toy_gather",
            *(str(tmp_path / a) if a.isupper() else a for a in command[1:])]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert (f"site 'toy_gather' is not known to this install, and capture '{capture}' holds 3 "
            "record(s) of it: the plugin that declares it is not installed") in err, err
    assert not (tmp_path / "PLOT.svg").exists()


def test_a_site_neither_installed_nor_held_is_still_unknown(
        plugin_captures: dict[str, Path],  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    """A site the capture holds no record of stays an unknown site, the valid ones listed."""
    assert main(["findings", str(plugin_captures["both"]), "--site", "toy_scatter"]) == 2
    err = capsys.readouterr().err
    assert "toy_scatter" in err and "embedding" in err and "holds" not in err


# ------------------------------------------------------------------ T81d: graph_only means only


def _both(ptr, n):  # noqa: ANN001, ANN202 (a kernel's signature)
    """Launched during a CUDA graph capture and outside one."""


def _graph(ptr, n):  # noqa: ANN001, ANN202
    """Launched during a CUDA graph capture only."""


def _later(ptr, n):  # noqa: ANN001, ANN202
    """Launched in a later step, outside a capture (its step is the one kept)."""


MODULE = "vllm.v1.worker.gpu.stand_in"
for _kernel in (_both, _graph, _later):
    _kernel.__module__ = MODULE


class _Jit:
    """What the recorder reads of a Triton kernel object."""

    def __init__(self, fn: object) -> None:
        self.fn = fn


class _Steps:
    step, rank = 0, 0


def _probe_summary() -> dict[str, object]:
    """The probe's ``kernel_summary`` after: ``_both`` launched once while a CUDA graph was
    being captured, then once normally at step 0; ``_graph`` once while capturing; ``_later``
    normally at step 1 (the recorder keeps 1 step: step 0's launches are dropped)."""
    import torch

    from forensics.probe import kernels

    steps = _Steps()
    recorder = kernels.FlightRecorder(("*",), 1, 64, steps)
    recorder._torch = torch
    capturing = [True]
    recorder._capturing = lambda: capturing[0]
    ptr = torch.zeros(4, dtype=torch.int32)
    jits = {fn.__name__: _Jit(fn) for fn in (_both, _graph, _later)}  # kept: one id each
    for name in ("_both", "_graph"):
        assert recorder.before(recorder.kernel(jits[name]), (ptr, 4), {}, (1,)) is None
    capturing[0] = False
    recorder.after(recorder.before(recorder.kernel(jits["_both"]), (ptr, 4), {}, (1,)))
    steps.step = 1
    recorder.after(recorder.before(recorder.kernel(jits["_later"]), (ptr, 4), {}, (1,)))
    return {"kind": "kernel_summary", "step": 1, "rank": 0, **recorder.summary(0)}


def test_the_probe_lists_as_graph_only_a_kernel_launched_only_in_a_graph_capture() -> None:
    """The probe added a kernel to ``graph_only`` on any launch during a CUDA graph capture: a
    kernel also launched normally (in a step since dropped) was listed as seen only while a
    graph was being captured. It counts the two apart now."""
    summary = _probe_summary()
    assert summary["graph_only"] == [f"{MODULE}._graph"]
    assert summary["graph_launches"] == {f"{MODULE}._both": 1, f"{MODULE}._graph": 1}
    assert summary["kernels_seen"] == {f"{MODULE}._both": 2, f"{MODULE}._graph": 1,
                                       f"{MODULE}._later": 1}


def _summary_capture(root: Path, summary: dict[str, object]) -> Path:
    """A capture holding one ``kernel_summary`` event and no launch."""
    import json

    root.mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({
        "format": 1, "creator": "test", "engine_id": "e" * 32, "model": {},
        "process": {"host": "h", "pid": 1, "rank": 0, "tag": "h-1"}, "versions": {}}))
    (root / "events-h-1.jsonl").write_text(json.dumps(summary) + "\n")
    return root


@pytest.fixture
def stand_in_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed vLLM's kernels, as the sanitizer reads them: the three stand-ins."""
    from forensics.kernels import sanitizer

    monkeypatch.setattr(sanitizer, "installed_kernels",
                        lambda: [(MODULE, "_both"), (MODULE, "_graph"), (MODULE, "_later")])


def test_coverage_says_graph_only_of_a_kernel_launched_only_in_a_graph_capture(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in_kernels: None) -> None:
    """``kernels --coverage``: a kernel launched in a graph capture and outside one (its normal
    launches dropped) said "graph_only"; it is ``not_recorded`` now, its why counting its graph
    launches; one launched only in a capture is still ``graph_only``."""
    import json

    capture = _summary_capture(tmp_path / "g.capture", _probe_summary())
    main(["kernels", str(capture), "--coverage", "--json"])
    rows = {r["kernel"]: r for r in json.loads(capsys.readouterr().out)["coverage"]}
    assert rows["_graph"]["status"] == "graph_only"
    assert rows["_both"]["status"] == "not_recorded"
    assert rows["_both"]["why"].startswith(
        "launched 2 time(s) by the probe's count (kernel_summary), 1 of them while a CUDA graph "
        "was being captured (never recorded), none recorded")
    assert rows["_later"]["status"] == "not_recorded"


def test_coverage_of_an_older_probes_graph_only_does_not_say_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in_kernels: None) -> None:
    """An older probe's summary (no ``graph_launches``) listed in ``graph_only`` every kernel
    seen at least once in a capture: coverage cannot tell whether it was launched outside one
    too, and says so instead of "graph_only"."""
    import json

    summary = {"kind": "kernel_summary", "format": 1, "step": 1, "rank": 0,
               "graph_only": [f"{MODULE}._both"], "kernels_seen": {f"{MODULE}._both": 2}}
    capture = _summary_capture(tmp_path / "old.capture", summary)
    main(["kernels", str(capture), "--coverage", "--json"])
    rows = {r["kernel"]: r for r in json.loads(capsys.readouterr().out)["coverage"]}
    assert rows["_both"]["status"] == "not_recorded"
    assert "whether it was also launched outside a graph is unknown" in rows["_both"]["why"]


@pytest.mark.parametrize("notebook", ["01_stale_prev_rows", "02_vocab_sentinel"])
def test_an_incident_notebook_run_outside_report_stops_at_a_capture_not_its_incidents(
        notebook: str) -> None:
    """Run as papermill runs it (its parameters injected, in its folder), an incident notebook
    on another capture stops in the cell after its parameters, before any incident text is
    printed or any replay is run."""
    from forensics.present import notebook_exec as nbx
    from forensics.present.report import REPO_NOTEBOOKS

    nb = nbx.read_notebook(REPO_NOTEBOOKS / f"{notebook}.ipynb")
    nbx.inject_parameters(nb, {"capture": str(DATA / "clean.capture")})
    with pytest.raises(nbx.CellError) as raised:
        nbx.execute(nb, REPO_NOTEBOOKS)
    assert raised.value.number == 3 and raised.value.ename == "ValueError"
    assert f"capture '{DATA / 'clean.capture'}' is not incident " in raised.value.evalue
    assert "run 03_triage on it" in raised.value.evalue


def test_a_plot_of_a_site_of_a_plugin_not_installed_says_so_through_the_api(
        plugin_captures: dict[str, Path]) -> None:  # noqa: F811
    """``forensics.plots.plot(result, site="toy_gather")`` says the same as the CLI."""
    import forensics
    from forensics.errors import UnknownSiteError
    from forensics.present import plots

    result = forensics.replay(plugin_captures["both"], variants=["upstream"])
    with pytest.raises(UnknownSiteError, match=r"holds 3 record\(s\) of it: the plugin that "
                                               r"declares it is not installed"):
        plots.plot(result, "timeline", site="toy_gather")


# ------------------------------------------------------------------ T81e: a process's counts once


def test_coverage_counts_a_process_summaries_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in_kernels: None) -> None:
    """The probe writes a ``kernel_summary`` at each dump (a launch or ``execute_model``
    raised, a signal, the probe closing), each with the process's counts since it started;
    coverage added them up: a kernel launched 2 times, dumped twice, was "launched 4 time(s)".
    A process's summaries are counted once now (its largest counts), two processes' added."""
    import json

    first = {**_probe_summary(), "pid": 7, "reason": "an exception left execute_model"}
    again = {**first, "reason": "the probe closed"}
    other = {**first, "pid": 8, "rank": 1}
    root = _summary_capture(tmp_path / "twice.capture", first)
    with (root / "events-h-1.jsonl").open("a") as out:
        out.write(json.dumps(again) + "\n" + json.dumps(other) + "\n")
    main(["kernels", str(root), "--coverage", "--json"])
    rows = {r["kernel"]: r for r in json.loads(capsys.readouterr().out)["coverage"]}
    assert rows["_both"]["seen"] == 4 and rows["_later"]["seen"] == 2  # two processes
    assert rows["_both"]["why"].startswith(
        "launched 4 time(s) by the probe's count (kernel_summary), 2 of them while a CUDA graph")
    assert rows["_graph"]["status"] == "graph_only" and rows["_graph"]["seen"] == 2
