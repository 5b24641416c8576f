"""Round 13: a triage's findings do not depend on ``--split-records`` (issue 38, hostile input).

The race check (``unwritten_input``) compares at most :data:`forensics.judge.race.MAX_STEPS`
steps of a replay: a whole capture of 600 steps compared 256 of them, and each piece of a split
triage chose 256 of its own, so ``triage --split-records 1000`` of a vocab-sentinel capture
counted 87 findings where the unsplit triage counted 67. A piece now compares the steps the
whole replay compares in its range (:func:`forensics.judge.race.window_of`), and ``replay``
says which steps it compared when it compared fewer than all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from forensics.fleet.piece import BASELINE, replayed_range
from forensics.fleet.tasks import plan
from forensics.fleet.triage import triage
from forensics.judge.race import MAX_STEPS
from forensics.replaying import replay
from forensics.simulator.runs import simulate
from forensics.store.reader import load

SPLITS = (1_000, 2_000)
STEPS = 600


@pytest.fixture(scope="module", params=["vocab-sentinel", "stale-prev-row"])
def capture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture of ``STEPS`` steps (2,400 records) of the scenario."""
    out = tmp_path_factory.mktemp("split") / f"{request.param}.capture"
    return Path(str(simulate(request.param, steps=STEPS, out=out)))


def _identities(found: Any) -> list[tuple[Any, ...]]:
    """The baseline's findings as (kind, site, step, rank, row, element), sorted."""
    mine = found[found["variant"] == BASELINE]
    return sorted(zip(mine["kind"], mine["site"], mine["step"], mine["rank"],
                      mine["row"].astype(object).where(mine["row"].notna(), -1),
                      mine["element"], strict=True))


@pytest.mark.parametrize("split", SPLITS)
def test_a_split_replay_finds_what_the_whole_one_finds(capture: Path, split: int) -> None:
    """The union of the pieces' findings is the whole replay's, finding for finding (race
    findings included: the capture compares more than the race check's limit of steps)."""
    whole = load(capture)
    tasks = plan([capture], split)
    assert len(tasks) > 1, "the capture was not split"
    pieces: list[tuple[Any, ...]] = []
    for task in tasks:
        pieces += _identities(replayed_range(whole, task.start, task.stop)[2])
    assert sorted(pieces) == _identities(replayed_range(whole, None, None)[2])


def test_the_triage_counts_the_same_whatever_its_split(capture: Path) -> None:
    """``triage`` of the capture counts the same findings unsplit and split in pieces of 1,000
    and 2,000 records (it counted 67 unsplit, 87 in pieces of 1,000)."""
    counts = [triage([capture], workers=1, split_records=n).rows[0]["findings"]
              for n in (STEPS * 10, *SPLITS)]
    assert counts[0] > 0 and counts == [counts[0]] * 3


def test_the_race_check_of_a_long_capture_names_the_steps_it_compared(capture: Path) -> None:
    """A replay whose race check compared fewer steps than hold both records says how many
    and which ("at 256 step(s) of 600 ... only steps 345-600"), in its conclusion whether or
    not the compared steps disagree; it never implies it compared them all. A chosen step
    whose writer raised in the replay (stale-prev-row: what it wrote is unknown) is not
    compared, and the sentence says how many (T88a: they were counted compared, "agree")."""
    from forensics.known.answer import answer

    result = replay(capture, ["upstream", "patched"])
    race = result.race
    unknown = len(race.unproduced)
    assert race.partial and race.compared + unknown == MAX_STEPS and race.paired == STEPS
    compared = sorted(set(race.steps))
    assert len(compared) == race.compared
    assert max(compared + [s for s, *_ in race.unproduced]) == STEPS
    said = answer(result).race
    assert f"at {race.compared} step(s) of {STEPS} that hold both records" in said
    assert f"only steps {compared[0]}-" in said
    assert (f"{unknown} step(s) were not compared: what the writer wrote there is not known"
            in said) == (unknown > 0), said


def test_a_race_check_of_every_step_says_no_limit(tmp_path: Path) -> None:
    """A capture of fewer steps than the limit is compared at all its steps, and the sentence
    claims no limit."""
    path = Path(str(simulate("vocab-sentinel", steps=40, out=tmp_path / "short.capture")))
    race = replay(path, ["upstream"]).race
    assert not race.partial and race.compared == race.paired == 40
    assert "only steps" not in race.summary() and "of 40" not in race.summary()


def test_a_piece_is_judged_by_its_capture_manifest(tmp_path: Path) -> None:
    """A piece judges the clamp by the vLLM its capture's manifest names, not the installed
    one: a clamped-placeholder capture naming vLLM 0.20.0 (whose clamp is unknown) gets the
    same findings split as whole (a piece, judged without the manifest, took the installed
    vLLM's clamp)."""
    path = Path(str(simulate("clamped-placeholder", steps=STEPS,
                             out=tmp_path / "clamp.capture")))
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["versions"]["vllm"] = "0.20.0"
    (path / "manifest.json").write_text(json.dumps(manifest))
    whole = load(path)
    alone = replayed_range(whole, None, None)
    assert alone[0].continuity.clamps is None
    pieces: list[tuple[Any, ...]] = []
    for task in plan([path], SPLITS[0]):
        part = replayed_range(whole, task.start, task.stop)
        assert part[0].continuity.clamps is None
        pieces += _identities(part[2])
    assert sorted(pieces) == _identities(alone[2])
