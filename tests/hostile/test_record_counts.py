"""Hostile input, round 3 (issue 38, point 3): no count, length or shape a record claims sizes a
loop or an allocation past the data it stores or the allocation budget, and a budget error
names the capture file, the record, the field and the fix.

The audit is field by field: every field of one record of every built-in site is set to the
extremes of its kind (a huge or negative count, a tensor of its dtype's largest or smallest
values); the record is either refused by validation in one line naming the field, or both
models run it and judge it without an exception and within a small allocation peak.
"""

from __future__ import annotations

import base64
import copy
import json
import tracemalloc
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from forensics.errors import AllocationBudgetError, CaptureFormatError
from forensics.records import Record
from forensics.sites import SITES, get_site
from forensics.validate import site_field_specs, validate_record

#: the most bytes one model run and judgement of a tiny record may allocate at its peak
PEAK = 32 << 20
#: the integers an ``int`` field is set to: the bound cap, int32's ends, far past int32
INT_EXTREMES = (2**24, 2**31 - 1, -(2**31), 2**62)


@cache
def site_records() -> dict[str, Record]:
    """One full record of each built-in site with rows in it, from two tiny simulations."""
    from forensics.simulator.runs import simulate

    found: dict[str, Record] = {}
    for scenario in ("clean", "v2-clean"):
        records = simulate(scenario, steps=3, seed=0, batch=3)
        assert isinstance(records, list)
        for record in records:
            if not record.summary and record.step >= 1:
                found.setdefault(record.site, record)
    return found


def extremes(value: Any, kind: str) -> list[tuple[str, Any]]:
    """The hostile values of a field of ``kind`` holding ``value``."""
    if kind == "int":
        return [(str(v), v) for v in INT_EXTREMES]
    if kind != "tensor" or not isinstance(value, np.ndarray) or not value.size:
        return []
    info = np.iinfo(value.dtype)
    return [(f"all {v}", np.full_like(value, v))
            for v in sorted({info.max, info.min, min(info.max, 2**24)})]


@cache
def warm_up(site: str) -> None:
    """Run both models once on the untouched record of ``site``."""
    for patched in (False, True):
        get_site(site).run(site_records()[site], patched)


def run_within_peak(record: Record) -> list[str]:
    """Both models' statuses on ``record``, each run and judged within :data:`PEAK` bytes
    (after one run of the site's untouched record: a model's first run imports its libraries,
    torch for ``batch_change``, which is no allocation of the record's)."""
    site = get_site(record.site)
    warm_up(record.site)
    statuses = []
    for patched in (False, True):
        tracemalloc.start()
        try:
            outcome = site.run(record, patched)
            site.judge(record, outcome)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < PEAK, (record.site, patched, peak)
        statuses.append(outcome.status)
    return statuses


def test_every_built_in_site_has_a_record_here() -> None:
    """The audit below covers every built-in site (a new site joins it or fails here)."""
    assert sorted(site_records()) == sorted(SITES)


@pytest.mark.parametrize("site", sorted(SITES))
def test_every_field_at_its_extremes_is_refused_or_run_within_bounds(site: str) -> None:
    """Each field of a record of ``site``, at each extreme: validation refuses it naming the
    field, or both models run and judge it (no OverflowError from a huge id stored into an
    int32 buffer, no loop or buffer sized by the claimed count)."""
    base = site_records()[site]
    specs = site_field_specs(site)
    ran = refused = 0
    for name, value in base.fields.items():
        for label, hostile in extremes(value, specs[name].kind):
            record = copy.copy(base)
            record.fields = {**base.fields, name: hostile}
            try:
                validate_record(record, f"record at step {record.step} in 'x.capture'")
            except CaptureFormatError as exc:
                assert len(str(exc).splitlines()) == 1 and "'x.capture'" in str(exc), exc
                refused += 1
                continue
            statuses = run_within_peak(record)
            assert set(statuses) <= {"ok", "index_error", "error"}, (name, label, statuses)
            ran += 1
    assert ran and ran + refused >= len(specs) // 2, (ran, refused)


def test_a_summary_record_at_its_extremes_is_judged_within_bounds() -> None:
    """A summary record of each site claiming min and max 2**62 apart (a span no loop or
    histogram may be sized by) and its bound at the cap is judged beside a full record of
    the site, the process's peak resident memory growing by less than :data:`PEAK` (after
    one replay that loads the libraries a replay uses)."""
    import resource

    from forensics.replaying import replay

    replay([site_records()["embedding"]])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for site in sorted(SITES):
        base = site_records()[site]
        summary = validate_record(Record(site, base.step + 1, 0, {
            "min": -(2**62), "max": 2**62, get_site(site).summary_bound: 2**24}, summary=True),
            "test")
        assert set(replay([base, summary]).verdicts) == {"upstream", "patched"}, site
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert grown < PEAK, grown


# ------------------------------------------------- a budget error names the capture file


def test_a_budget_error_names_the_capture_file_record_field_and_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A variant's allocation past ``FORENSICS_MAX_ALLOC`` ends the replay in one line that
    starts with the capture file, then the record, the field, its value and the fix; records
    held in memory (no file) keep the message as it was."""
    from forensics.budget import require_alloc
    from forensics.replaying import replay
    from forensics.store.writer import write_capture

    def budgeted(record: Record) -> Any:
        width = int(record["num_embeddings"])
        require_alloc(8 * width * width, f"record at step {record.step}", "num_embeddings",
                      width)
        raise AssertionError("the budget let 8 * 4096**2 bytes through")

    records = [validate_record(Record("embedding", s, 0, {
        "input_ids": np.arange(4, dtype=np.int32), "num_embeddings": 4096}), "test")
        for s in range(2)]
    capture = write_capture(tmp_path / "big.capture", records)
    monkeypatch.setenv("FORENSICS_MAX_ALLOC", "1M")
    with pytest.raises(AllocationBudgetError) as raised:
        replay(capture, {"budgeted": budgeted})
    line = str(raised.value)
    assert line.startswith(f"capture '{capture}', record at step 0: 'num_embeddings' is "
                           "4096, which would allocate 134217728 bytes"), line
    assert "fix the record's num_embeddings" in line and len(line.splitlines()) == 1, line
    with pytest.raises(AllocationBudgetError) as in_memory:
        replay(records, {"budgeted": budgeted})
    assert str(in_memory.value).startswith("record at step 0: 'num_embeddings'"), in_memory


# ---------------------------------------------- a kernel launch's claimed storage and shape

LAUNCH = {"format": 1, "step": 0, "rank": 0, "ordinal": 0, "path": "compiled", "grid": [1],
          "kernel": {"module": "vllm.v1.worker.gpu.stand_in", "name": "_fn",
                     "source_sha256": "0" * 64},
          "args": ["ptr", "n"], "constexprs": {}, "scalars": {"n": 1}, "unrecorded": {},
          "tensors": {"ptr": {"dtype": "int64", "shape": [2], "strides": [1], "offset": 0,
                              "storage": 16, "contents": "storage",
                              "data": base64.b64encode(bytes(16)).decode()}}}


def launch_with(**tensor: Any) -> dict[str, Any]:
    """:data:`LAUNCH` with its tensor ``ptr``'s keys replaced by ``tensor``'s."""
    event = json.loads(json.dumps(LAUNCH))
    event["tensors"]["ptr"].update(tensor)
    return event


def test_a_launch_shape_whose_product_wraps_is_refused() -> None:
    """A view of shape 2**32 x 2**32 (whose int64 product wraps to 0) with no data once
    passed the data-size check; it is refused naming the tensor and 'data'."""
    from forensics.kernels.format import check_launch

    assert check_launch(LAUNCH, "launch 0 in 'k.capture'").tensors["ptr"].storage == 16
    event = launch_with(shape=[2**32, 2**32], strides=[0, 0], contents="view", data="")
    with pytest.raises(CaptureFormatError, match=r"tensor 'ptr'.*'data'.*needs "
                                                 r"147573952589676412928"):
        check_launch(event, "launch 0 in 'k.capture'")


def test_a_launch_storage_past_the_budget_is_not_allocated(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``none`` tensor claiming a storage of 2**40 bytes is not replayable, in one line
    naming the tensor, 'storage', its value and the budget, before anything is allocated
    (the replay is handed no torch: an allocation would fail otherwise)."""
    from forensics.kernels.format import check_launch
    from forensics.kernels.replay_worker import NotReplayable, _allocate, _blocks

    launch = check_launch(launch_with(storage=2**40, contents="none", data=None), "launch 0")
    with pytest.raises(NotReplayable) as raised:
        _allocate(_blocks(launch)[0], launch, None, [])
    line = str(raised.value)
    assert line.startswith("tensor ptr: 'storage' is 1099511627776, which would allocate"), line
    assert "past the allocation budget of 1073741824 bytes" in line, line
    monkeypatch.setenv("FORENSICS_MAX_ALLOC", "4K")
    small = check_launch(launch_with(storage=8192, contents="none", data=None), "launch 0")
    with pytest.raises(NotReplayable, match="budget of 4096 bytes"):
        _allocate(_blocks(small)[0], small, None, [])
