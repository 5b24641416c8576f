"""Differential tests of the replay's fast paths against the plain per-record path.

The replay streams records in chunks, runs and judges a site's records together (its columnar
``run_batch``) and holds no model outcome; ``prepare_input_ids.inert`` (where the patched run
inherits the upstream one) is a property of the models. Each must give, record by record,
exactly what ``variant.run(record)`` and the judge give one record at a time.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _site_records import STRATEGIES
from hypothesis import HealthCheck, given, settings

import forensics
from forensics.judge import findings as judge
from forensics.outcome import Outcome
from forensics.records import Record
from forensics.simulator.runs import simulate
from forensics.simulator.scenarios import SCENARIOS
from forensics.sites import pipeline_key
from forensics.variants.models import ModelVariant, PatchedVariant, UpstreamVariant

MODELS = {"upstream": UpstreamVariant(), "patched": PatchedVariant()}


def same_value(a: Any, b: Any) -> bool:
    """Equal arrays (values, dtype and shape), lists or scalars."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())
    return type(a) is type(b) and a == b


def assert_same_outcome(a: Outcome | None, b: Outcome | None, where: str) -> None:
    """The two outcomes are equal in status, message, outputs and accesses."""
    if a is None or b is None:
        assert a is b, where
        return
    assert (a.status, a.message) == (b.status, b.message), where
    assert sorted(a.outputs) == sorted(b.outputs), where
    for name in a.outputs:
        assert same_value(a.outputs[name], b.outputs[name]), (where, name)
    assert (a.accesses is None) == (b.accesses is None), where
    for x, y in zip(a.accesses or (), b.accesses or (), strict=True):
        assert (x.tensor, x.lower, x.upper) == (y.tensor, y.lower, y.upper), where
        for field in ("rows", "elements", "values"):
            assert same_value(getattr(x, field), getattr(y, field)), (where, field)


def scenario_records(name: str) -> list[Record]:
    """A short run of scenario ``name`` (faults forced often enough to show up)."""
    records = simulate(name, steps=40, batch=8, seed=3)
    assert isinstance(records, list)
    return records


def test_an_inert_record_gets_exactly_the_upstream_outcome() -> None:
    """Where ``prepare_input_ids.inert`` holds, the patched run inherits the upstream one."""
    from forensics.sites.prepare_input_ids import plans as pii_plans

    site = "prepare_input_ids"
    seen = {True: 0, False: 0}

    @settings(max_examples=300, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(record=STRATEGIES[site])
    def check(record: Record) -> None:
        inert = bool(pii_plans.inert(pii_plans.Batch.of([record]))[0])
        seen[inert] += 1
        if inert:
            assert_same_outcome(MODELS["upstream"].run(record), MODELS["patched"].run(record),
                                f"{site}: {record}")

    check()
    assert seen[True] and (seen[False] or site == "embedding"), seen


#: kinds the replay adds beside the per-record path's index findings: the token-continuity
#: check's and the race check's, read from the whole capture
WHOLE_CAPTURE_KINDS = ("substituted", "clamped_placeholder", "unwritten_input")


def _index_findings(found: pd.DataFrame) -> pd.DataFrame:
    """``found`` less the whole-capture kinds (their own tests: test_continuity, one_story)."""
    return found[~found["kind"].isin(WHOLE_CAPTURE_KINDS)].reset_index(drop=True)


def per_record(records: list[Record], variants: tuple[str, ...]
               ) -> tuple[dict[str, list[Outcome | None]], pd.DataFrame, pd.DataFrame]:
    """The plain path: ``run`` per record, fresh outcome objects, judged in one go."""
    outcomes = {v: [None if r.summary else MODELS[v].run(r) for r in records] for v in variants}
    reference = None
    if "upstream" not in variants:
        reference = [None if r.summary else MODELS["upstream"].run(r) for r in records]
    rows: list[tuple[Any, ...]] = []
    found = judge.build_findings(records, outcomes, reference, rows)
    return outcomes, found, judge.bounds_frame(rows)


@pytest.mark.parametrize("variants", [("upstream", "patched"), ("patched",)])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_replay_matches_the_per_record_path(scenario: str, variants: tuple[str, ...],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.import_module("forensics.replaying"), "CHUNK", 37)  # chunks
    records = sorted(scenario_records(scenario), key=pipeline_key)
    result = forensics.replay(records, variants=variants)
    outcomes, found, bounds = per_record(records, variants)
    pd.testing.assert_frame_equal(_index_findings(result.findings), found)
    pd.testing.assert_frame_equal(result.bounds, bounds)
    assert result.verdicts == judge.verdicts(records, outcomes, result.findings)
    for v in variants:
        assert isinstance(MODELS[v], ModelVariant)
        mine = result.outcomes[result.outcomes["variant"] == v]
        assert mine["status"].tolist() == [o.status for o in outcomes[v] if o is not None]
        assert mine["message"].tolist() == [o.message for o in outcomes[v] if o is not None]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_replay_of_a_capture_matches_the_per_record_path(
        scenario: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store path: model variants run on the capture's columns batch by batch, cut in
    chunks that straddle batches (no Record decoded); the same judgement as one record at a
    time."""
    from forensics.store.writer import write_capture

    monkeypatch.setattr(importlib.import_module("forensics.replaying"), "CHUNK", 37)
    monkeypatch.setattr("forensics.store.writer.FLUSH_EVERY", 50)  # several batches a site
    records = sorted(scenario_records(scenario), key=pipeline_key)
    write_capture(tmp_path / "s.capture", records)
    result = forensics.replay(tmp_path / "s.capture")
    outcomes, found, bounds = per_record(list(result.records), ("upstream", "patched"))
    pd.testing.assert_frame_equal(_index_findings(result.findings), found)
    pd.testing.assert_frame_equal(result.bounds, bounds)
    assert result.verdicts == judge.verdicts(list(result.records), outcomes, result.findings)
    for v in ("upstream", "patched"):
        mine = result.outcomes[result.outcomes["variant"] == v]
        assert mine["status"].tolist() == [o.status for o in outcomes[v] if o is not None]
        assert mine["message"].tolist() == [o.message for o in outcomes[v] if o is not None]


def test_a_replay_leaves_no_reference_cycle_through_its_data(tmp_path: Path) -> None:
    """The replay pauses the cyclic collector: a cycle made per chunk (a batch reachable from
    its own checks) would hold every chunk's arrays to the end."""
    import gc

    from forensics.store.writer import write_capture

    write_capture(tmp_path / "s.capture", sorted(scenario_records("soak"), key=pipeline_key))
    capture = forensics.load(tmp_path / "s.capture")
    forensics.replay(capture)  # imports and caches settle
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = forensics.replay(capture)
        del result
        gc.collect()
        held = [type(o) for o in gc.garbage if isinstance(o, np.ndarray)
                or type(o).__module__.startswith("forensics")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not held, held[:5]
