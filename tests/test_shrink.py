"""forensics.shrink: fewer records, the same verdicts and first findings, the original intact."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from share_cases import FAULT_SCENARIOS, private_capture, tree_digest

import forensics
from forensics.share.evidence import evidence_of
from forensics.share.shrinking import NothingToKeepError, shrink
from forensics.simulator.scenarios import Faults, get_scenario

#: each example replays a capture dozens of times: a few examples, and a failure is reported
#: as drawn, not shrunk (in a fresh clone this test once ran past 28 minutes)
SLOW = settings(max_examples=3, deadline=None, phases=(Phase.explicit, Phase.generate),
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _same_record(a: forensics.Record, b: forensics.Record) -> bool:
    if (a.site, a.step, a.rank, a.summary) != (b.site, b.step, b.rank, b.summary):
        return False
    if set(a.fields) != set(b.fields):
        return False
    return all(np.array_equal(np.asarray(a[k], dtype=object), np.asarray(b[k], dtype=object))
               if not isinstance(a[k], np.ndarray) else np.array_equal(a[k], b[k])
               for k in a.fields)


@pytest.mark.parametrize("name", list(FAULT_SCENARIOS))
@given(seed=st.integers(0, 2**16), fault_step=st.integers(2, 20))
@SLOW
def test_shrink_keeps_the_evidence_with_fewer_records(name: str, seed: int, fault_step: int,
                                                      tmp_path_factory: pytest.TempPathFactory
                                                      ) -> None:
    root = tmp_path_factory.mktemp("shrink")
    src = private_capture(root / "src.capture", name, seed, fault_step)
    before = tree_digest(src)
    original = forensics.replay(src)
    # a forced fault can find nothing to break (vocab-sentinel: no row rejects a draft at that
    # step); such a capture has no evidence, and shrink refuses it (tested below)
    assume(any(original.first_finding(v) is not None for v in original.variants))
    result = shrink(src, root / "small.capture")

    small = forensics.replay(result.path)
    assert small.verdicts == original.verdicts
    for variant in original.variants:
        assert small.first_finding(variant) == original.first_finding(variant)
    assert evidence_of(small) == evidence_of(original)  # bound, origin and resolved included
    assert len(forensics.load(result.path)) == result.records_kept < result.records_before
    kept = list(forensics.load(result.path))
    by_key = {(r.site, r.step, r.rank): r for r in forensics.load(src)}
    assert all(_same_record(r, by_key[(r.site, r.step, r.rank)]) for r in kept)
    for drop in range(len(kept)):  # 1-minimal: no record can go
        fewer = forensics.replay([r for i, r in enumerate(kept) if i != drop])
        assert evidence_of(fewer) != evidence_of(original)
    assert tree_digest(src) == before


def test_shrink_keeps_the_origin_of_a_resolved_sink_finding(tmp_path: Path) -> None:
    src = private_capture(tmp_path / "src.capture", "vocab-sentinel", 1, 10)
    result = shrink(src, tmp_path / "small.capture")
    patched = result.evidence.first["patched"]
    assert patched is not None and patched["site"] == "embedding"
    assert patched["origin"] == "async_output" and patched["resolved"] is True
    sites = {(r.site, r.step) for r in forensics.load(result.path)}
    assert ("async_output", patched["step"] - 1) in sites or ("async_output",
                                                              patched["step"]) in sites


def test_a_soak_with_one_fault_shrinks_below_one_percent(tmp_path: Path) -> None:
    sc = replace(get_scenario("soak"), steps=600, batch=16,
                 faults=Faults(forced={"vocab_sentinel": (400,)}))
    src = forensics.simulate(sc, seed=5, out=tmp_path / "soak.capture")
    result = shrink(src, tmp_path / "small.capture")
    assert result.records_before == 2400
    assert result.records_kept < 0.01 * result.records_before
    assert min(result.steps_kept) >= 390


def test_a_capture_without_findings_has_nothing_to_keep(tmp_path: Path) -> None:
    src = private_capture(tmp_path / "clean.capture", "clean", 0, 0)
    with pytest.raises(NothingToKeepError, match="no finding"):
        shrink(src, tmp_path / "small.capture")
    assert not (tmp_path / "small.capture").exists()


def test_progress_is_drawn_on_stderr_when_asked(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    src = private_capture(tmp_path / "src.capture", "stale-prev-row", 2, 6)
    result = shrink(src, tmp_path / "small.capture", progress=True)
    err = capsys.readouterr().err
    assert "replay" in err and f"replay {result.replays - 2}" in err


def test_a_wrong_token_after_every_witness_step_does_not_hang_the_window(tmp_path: Path) -> None:
    """A simulated misattribution capture (tests/data) whose embedding is a violation through a
    substituted token at step 2, with the batch_change finding at step 1: the window once
    widened backwards from step 1 for ever (over 5,000 replays, then killed). The token
    finding's record is now a witness, and a window that cannot widen further takes the
    capture."""
    src = Path(__file__).parent / "data" / "shrink-substitution-after-witness.capture"
    before = tree_digest(src)
    result = shrink(src, tmp_path / "small.capture")
    assert result.steps_kept == [1, 2] and result.replays < 100
    assert evidence_of(forensics.replay(result.path), crash=True) == result.evidence
    assert tree_digest(src) == before
