"""Hostile input, round 4: ``forensics shrink``'s window on captures whose step numbers are
huge or sparse (step 0 and step 2**62), whose witnesses are only at the last step, and whose
evidence needs a step far from every witness: each replay of the window is on more stored
steps than the one before, so replays are bounded by the stored steps, not by the step
values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forensics.share.shrinking import _Search
from tests.instructions import assert_linear, scaling


def _window(steps: Sequence[int], witness: int, needed: int) -> tuple[list[int], list[list[int]]]:
    """The window of a search over one record per step in ``steps``, whose evidence is kept
    exactly when the record at step ``needed`` is in (a record far before the witness at step
    ``witness``); and the record positions of each replay."""
    search = object.__new__(_Search)
    search.index = pd.DataFrame({"step": np.array(steps, np.int64), "site": "embedding"})
    position = list(steps).index(witness)
    search.witnesses = lambda: {position}  # type: ignore[method-assign]
    replays: list[list[int]] = []

    def keeps(positions: Sequence[int]) -> bool:
        replays.append(sorted(positions))
        return list(steps).index(needed) in positions

    search.keeps = keeps  # type: ignore[method-assign]
    return search.window(sorted(search.witnesses())), replays


@pytest.mark.parametrize(("steps", "witness", "needed", "most"), [
    ([0, 2**62], 2**62, 0, 2),                       # once 63 replays of the same record
    ([0, 1, 2**62 - 1, 2**62], 2**62, 0, 3),
    ([k << 50 for k in range(1000)], 999 << 50, 0, 12),  # thousands of sparse steps
    ([0, 2**63 - 1], 2**63 - 1, 0, 2),               # the largest gap a step can make
])
def test_the_window_replays_each_set_of_steps_once(steps: list[int], witness: int, needed: int,
                                                   most: int) -> None:
    window, replays = _window(steps, witness, needed)
    assert needed in window and witness in window
    assert len(replays) <= most, len(replays)
    assert len({tuple(r) for r in replays}) == len(replays)  # no set replayed twice
    assert all(len(a) < len(b) for a, b in zip(replays, replays[1:], strict=False))


def test_a_dense_window_still_widens_by_doubling() -> None:
    """Consecutive steps, the needed one 100 before the witness: widths 0, 1, 2, 4, ... 128 (as
    before), each taking in more steps."""
    window, replays = _window(list(range(1000)), 999, 899)
    assert [len(r) for r in replays] == [1, 2, 3, 5, 9, 17, 33, 65, 129]
    assert window == list(range(871, 1000))


def _origins_by_scan(f: pd.DataFrame, positions: set[int]) -> set[int]:
    """The origins as shrink once found them (the specification): a scan of the upstream
    output findings for each sink finding."""
    sinks = f[f["record"].isin(list(positions)) & f["origin"].notna()]
    up = f[(f["variant"] == "upstream") & f["tensor"].str.startswith("out.", na=False)]
    found = set()
    for _, s in sinks.iterrows():
        rows = up[(up["site"] == s["origin"]) & (up["rank"] == s["rank"])
                  & (up["step"] <= s["step"]) & (up["value"] == s["value"])]
        if len(rows):
            found.add(int(rows.sort_values("step", kind="mergesort")["record"].iat[-1]))
    return found


def test_the_origins_of_the_witnesses_are_those_a_scan_finds() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        f = pd.DataFrame({
            "variant": rng.choice(["upstream", "patched"], n),
            "site": rng.choice(["async_output", "combine_tokens", "embedding"], n),
            "rank": rng.integers(0, 2, n), "step": rng.integers(0, 5, n),
            "value": rng.choice([1.0, 2.0, np.nan], n),
            "tensor": rng.choice(["out.input_ids", "input_ids", None], n),
            "origin": rng.choice(["async_output", "combine_tokens", None], n),
            "record": rng.integers(0, 12, n)})
        search = object.__new__(_Search)
        search.findings = f
        positions = set(rng.integers(0, 12, 5).tolist())
        assert search._origins(positions) == _origins_by_scan(f, positions)


def test_a_witness_with_thousands_of_bad_ids_finds_their_origins() -> None:
    """The bundled vocab-sentinel incident with its step-14 embedding holding 4,000 copies of
    the sentinel (8,000 sink findings, each with an origin): their origins are the sampler's
    outputs that wrote the sentinel."""
    import forensics
    from forensics.share.evidence import evidence_of
    from tests.conftest import DATA

    records = list(forensics.load(DATA / "incident-b-vocab-sentinel.capture"))
    sink = next(r for r in records if r.site == "embedding" and r.step == 14)
    sink.fields["input_ids"] = np.full(4000, sink.fields["input_ids"].max(),
                                       sink.fields["input_ids"].dtype)
    del sink.fields["cu_num_tokens"]
    result = forensics.replay(records)
    search = _Search(result, evidence_of(result), list(result.variants), False)
    f = result.findings
    positions = {int(i) for i in f[f["origin"].notna()]["record"]}
    assert int(f["origin"].notna().sum()) >= 8000
    origins = search._origins(positions)
    assert origins and all(result.records[i].site == "async_output" for i in origins)


def _sinks_and_outputs(count: int) -> pd.DataFrame:
    """``count`` sink findings (an embedding's bad id, each of another step) and the sampler's
    output finding that wrote each id."""
    steps = np.arange(count)
    outputs = pd.DataFrame({"variant": "upstream", "site": "async_output", "rank": 0,
                            "step": steps, "value": (steps % 50).astype(float),
                            "tensor": "out.sampled_token_ids", "origin": None, "record": steps})
    sinks = outputs.assign(site="embedding", tensor="input_ids", origin="async_output",
                           record=steps + count)
    return pd.concat([outputs, sinks], ignore_index=True)


def make_work(case: str, count: int, scratch: Path) -> Callable[[], object]:
    """Finding the origins of ``count`` sink findings (run by :mod:`tests.instructions`)."""
    search = object.__new__(_Search)
    search.findings = _sinks_and_outputs(count)
    return lambda: search._origins(set(range(count, 2 * count)))


def test_finding_the_origins_of_thousands_of_bad_ids_is_linear(tmp_path: Path) -> None:
    """Finding the witnesses' origins once scanned the findings for each sink (about 50 times one
    replay of the capture for 8,000 sinks); it is one binary search per distinct id, step and
    rank: 4x the sinks cost under 6x the instructions (:mod:`tests.instructions`)."""
    search = object.__new__(_Search)
    search.findings = _sinks_and_outputs(300)
    assert search._origins(set(range(300, 600))) == _origins_by_scan(search.findings,
                                                                     set(range(300, 600)))
    assert_linear(scaling(__file__, {"origins": 1000}, tmp_path)["origins"])
