"""Round 14 (tri14): defects the last attack round found and left.

``check`` after a replay, when the capture holds something else at ``expected.obtained.json``
(a folder, a link, a FIFO): it exited 2 ("Is a directory") and never said whether the replay
matched.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from forensics.cli import main
from tests.hostile.test_round13_split import _identities

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "data" / "incident-b-vocab-sentinel.capture"
OBTAINED = "expected.obtained.json"


def _capture(tmp_path: Path, differs: bool) -> Path:
    """A copy of incident B; with ``differs`` its expected.json says patched's batch_change
    is a violation (the replay finds it ok)."""
    capture = tmp_path / "b.capture"
    shutil.copytree(INCIDENT, capture)
    if differs:
        expected = json.loads((capture / "expected.json").read_text())
        expected["verdicts"]["patched"]["batch_change"] = "violation"
        (capture / "expected.json").write_text(json.dumps(expected))
    return capture


def _check(capture: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["check", str(capture), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("differs", [False, True])
def test_check_states_its_verdict_past_a_folder_at_the_obtained_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], differs: bool) -> None:
    capture = _capture(tmp_path, differs)
    (capture / OBTAINED / "inner").mkdir(parents=True)
    code, out, err = _check(capture, capsys)
    assert code == (1 if differs else 0), (out, err)
    if differs:
        assert "replay differs from expected.json" in out and "batch_change" in out, out
        note = [line for line in out.splitlines() if "obtained result not written" in line]
    else:
        assert out.strip() == "b.capture: matches expected.json", out
        note = err.strip().splitlines()
    assert len(note) == 1 and str(capture / OBTAINED) in note[0], (out, err)
    assert "remove" in note[0] and "written to" not in out, note
    assert (capture / OBTAINED / "inner").is_dir()  # left as it was


def test_check_json_states_its_verdict_past_a_folder_at_the_obtained_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = _capture(tmp_path, differs=True)
    (capture / OBTAINED).mkdir()
    code, out, err = _check(capture, capsys, "--json")
    assert code == 1, (out, err)
    assert json.loads(out)["ok"] is False
    assert len(err.strip().splitlines()) == 1 and str(capture / OBTAINED) in err, err


@pytest.mark.parametrize("differs", [False, True])
@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_check_replaces_a_link_or_fifo_at_the_obtained_path_never_through_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], differs: bool, planted: str) -> None:
    """A link or FIFO there is replaced (on a difference) or removed (on a match), never
    followed or opened: check does not hang on the FIFO nor write where the link points."""
    capture = _capture(tmp_path, differs)
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs")
    if planted == "link":
        (capture / OBTAINED).symlink_to(outside)
    else:
        os.mkfifo(capture / OBTAINED)
    code, out, err = _check(capture, capsys)
    assert code == (1 if differs else 0) and not err, (out, err)
    assert outside.read_text() == "theirs"
    where = capture / OBTAINED
    if differs:
        assert where.is_file() and not where.is_symlink(), out
        assert json.loads(where.read_text())["verdicts"]["patched"]["batch_change"] == "ok"
    else:
        assert not where.exists() and not where.is_symlink()


def test_check_accept_says_what_it_wrote_past_a_folder_at_the_obtained_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = _capture(tmp_path, differs=True)
    (capture / OBTAINED).mkdir()
    code, out, err = _check(capture, capsys, "--accept")
    assert code == 0, (out, err)
    assert out.strip() == f"wrote {capture / 'expected.json'}", out
    assert len(err.strip().splitlines()) == 1 and str(capture / OBTAINED) in err, err
    expected = json.loads((capture / "expected.json").read_text())
    assert expected["verdicts"]["patched"]["batch_change"] == "ok"


# -- a known issue is never matched on the fix's findings ----------------------------------


def _sentinel_entry():  # noqa: ANN202
    from forensics.known.schema import load_catalogue

    return next(e for e in load_catalogue().entries if e.id == "vocab-size-sentinel-counted")


def test_a_known_issue_is_not_matched_on_the_fix_alone(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``replay --variant patched`` of incident B matched vocab-size-sentinel-counted on
    "patched finds embedding step 14: input_ids[5] = 248320", a finding the patch resolved
    (patched leaves no site in violation): with the fix alone the signatures are not judged."""
    assert main(["replay", str(INCIDENT), "--variant", "patched"]) in (0, 1)
    alone = "".join(capsys.readouterr().out.split())  # lines wrap at a word or a dash
    assert "patchedfinds" not in alone and "Knownissuevocab-size-sentinel" not in alone, alone
    assert "Knownsignaturesnotjudged" in alone, alone
    main(["replay", str(INCIDENT)])
    both = "".join(capsys.readouterr().out.split())
    assert "Knownissuevocab-size-sentinel-counted" in both and "upstreamfinds" in both, both


def _findings(variant: str) -> object:
    import pandas as pd

    return pd.DataFrame([{"variant": variant, "site": "embedding", "step": 14, "rank": 0,
                          "row": 1, "element": 5, "tensor": "input_ids",
                          "kind": "out_of_bounds", "value": 248320, "lower": 0,
                          "upper": 248320, "origin": "async_output", "resolved": True}])


FACTS = {"vocab_size": 248320, "num_embeddings": 248320, "runner": "v1",
         "speculative": "mtp", "async_scheduling": True}


@pytest.mark.parametrize("baseline", ["patched", "vllm+fix.diff"])
def test_a_signature_never_rests_on_a_fix_that_is_the_baseline(baseline: str) -> None:
    """With the fix first and unpatched vLLM beside it (``--variant patched --variant vllm``)
    the fix was the baseline, and its resolved finding matched; the engine's code (vllm)
    finding nothing matches nothing."""
    from forensics.known.evidence import Evidence
    from forensics.known.matching import match_entry

    evidence = Evidence(findings=_findings(baseline), baseline=baseline, facts=FACTS)
    match = match_entry(_sentinel_entry(), evidence)
    assert not match.matched and not any(baseline in e for e in match.evidence), match
    on_vllm = Evidence(findings=_findings("vllm"), baseline=baseline, facts=FACTS)
    matched = match_entry(_sentinel_entry(), on_vllm)
    assert matched.matched and any(e.startswith("vllm finds") for e in matched.evidence), matched


def test_a_crash_is_not_explained_by_a_fix_that_is_the_baseline() -> None:
    """The same fix-first replay took the fix's finding as the engine's value out of range."""
    from forensics.known.answer import crash_verdict
    from forensics.known.evidence import Evidence

    crash = [{"kind": "cuda_assert", "step": 14}]
    evidence = Evidence(findings=_findings("patched"), baseline="patched", facts=FACTS,
                        events=crash)
    assert crash_verdict(evidence) == "unexplained"
    on_vllm = Evidence(findings=_findings("vllm"), baseline="patched", facts=FACTS, events=crash)
    assert crash_verdict(on_vllm) == "explained"


# -- a split triage works out its capture's race window once -------------------------------

SPLIT, STEPS = 1_000, 600


@pytest.fixture(scope="module")
def long_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vocab-sentinel capture of 600 steps (2,400 records): its race check compares 256."""
    from forensics.simulator.runs import simulate

    out = tmp_path_factory.mktemp("window") / "vocab-sentinel.capture"
    return Path(str(simulate("vocab-sentinel", steps=STEPS, out=out)))


def _counted_windows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the calls of ``window_of`` (each reads every record of the capture's race sites)."""
    from forensics.judge import race

    calls: list[int] = []
    real = race.window_of

    def counted(capture: object) -> frozenset[tuple[int, int]]:
        calls.append(1)
        return real(capture)
    monkeypatch.setattr(race, "window_of", counted)
    return calls


def test_a_split_capture_has_its_race_window_worked_out_once_when_planned(
        long_capture: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.fleet.piece import replayed_steps
    from forensics.fleet.tasks import plan
    from forensics.judge.race import window_of
    from forensics.store.reader import load

    whole = window_of(load(long_capture))
    calls = _counted_windows(monkeypatch)
    tasks = plan([long_capture], SPLIT)
    assert len(tasks) > 2 and len(calls) == 1, (len(tasks), len(calls))
    for task in tasks:
        assert task.start is not None and task.stop is not None and task.window is not None
        steps = replayed_steps(task.start, task.stop)
        assert set(task.window) == {p for p in whole if p[0] in steps}, task
    assert set().union(*(t.window or () for t in tasks)) == whole
    assert plan([INCIDENT], SPLIT)[0].window is None  # not split: the replay chooses


def test_a_piece_handed_its_window_never_works_it_out_and_finds_the_same(
        long_capture: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each piece of a split triage worked out the whole capture's race window again (about
    2 us a record: a piece's time doubled on 20M records); handed the planned window, it
    finds what it found working it out, and the pieces together what the whole replay finds
    (T63a)."""
    from forensics.fleet.piece import replay_piece, replayed_range
    from forensics.fleet.tasks import plan
    from forensics.store.reader import load

    tasks = plan([long_capture], SPLIT)
    whole = load(long_capture)
    worked_out = [_identities(replayed_range(whole, t.start, t.stop)[2])
                  for t in tasks]
    calls = _counted_windows(monkeypatch)
    handed = [_identities(replayed_range(whole, t.start, t.stop, window=t.window)[2])
              for t in tasks]
    rows = [_row(replay_piece(t.path, t.start, t.stop, t.window)) for t in tasks]
    assert calls == [] and handed == worked_out
    assert all(not row["error"] for row in rows), rows
    assert sum(row["findings"] for row in rows) == sum(len(h) for h in handed)
    everything = _identities(replayed_range(whole, None, None)[2])
    assert sorted(f for h in handed for f in h) == everything
    assert any(f[0] == "unwritten_input" for f in everything)


def _row(data: bytes) -> dict[str, object]:
    import pyarrow as pa

    return pa.ipc.open_stream(data).read_all().to_pylist()[0]  # type: ignore[no-any-return]


def test_the_planned_window_crosses_to_the_local_worker_process(long_capture: Path) -> None:
    from forensics.fleet.runners import run_local
    from forensics.fleet.tasks import plan
    from tests.hostile.tri14_window_piece import piece

    tasks = plan([long_capture], SPLIT)
    rows = [_row(out) for out in run_local(tasks, workers=2, piece=piece)]
    assert [json.loads(str(r["error"])) for r in rows] == [
        [list(pair) for pair in t.window or ()] for t in tasks]
    assert any(t.window for t in tasks)


def test_the_planned_window_crosses_to_a_ray_worker(long_capture: Path) -> None:
    """Ray ships the task (its window) to the worker (a local cluster, started here). The
    test's task body goes by value through Ray's own pickler: a worker imports nothing from
    the folder the test runs in (T76b), where ``tests`` is."""
    from ray import cloudpickle

    from forensics.fleet.runners import run_ray
    from forensics.fleet.tasks import plan
    from tests.hostile import tri14_window_piece

    cloudpickle.register_pickle_by_value(tri14_window_piece)
    tasks = plan([long_capture], SPLIT)[:2]
    rows = [_row(out) for out in run_ray(tasks, piece=tri14_window_piece.piece)]
    assert [json.loads(str(r["error"])) for r in rows] == [
        [list(pair) for pair in t.window or ()] for t in tasks]
    assert any(t.window for t in tasks)
