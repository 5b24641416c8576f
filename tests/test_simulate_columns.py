"""Writing simulations a block at a time: the same capture as record by record, byte for byte."""

from __future__ import annotations

import filecmp
import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import forensics
import forensics.simulator.columns as simulate_columns
from forensics.errors import CaptureFormatError, OutputExistsError
from forensics.records import Record
from forensics.simulator.columns import StepColumns, write_simulation
from forensics.simulator.runs import Simulator
from forensics.simulator.scenarios import SCENARIOS, Faults, Scenario, configure
from forensics.simulator.step import Derived
from forensics.sites import pipeline_key
from forensics.store import arrow_codec
from forensics.store import arrow_numpy as an
from forensics.store.index import read_index
from forensics.store.writer import CaptureWriter, write_capture

DATA = Path(__file__).resolve().parent.parent / "data"
MIXED = Faults(stale_prev_row=0.3, vocab_sentinel=0.3, placeholder_leak=0.3, misattribution=0.3)

#: shapes that reach every branch of the block encoder: several blocks, a partial last block,
#: faults on most steps (discarded rows, sentinels), two ranks, no drafts, a wide buffer
CASES: dict[str, tuple[Scenario, int]] = {
    "soak": (replace(SCENARIOS["soak"], steps=4500), 0),
    "mixed": (replace(SCENARIOS["clean"], faults=MIXED, steps=5000, batch=16,
                      arrival_rate=0.2, mean_output=20), 4),
    "two-ranks": (replace(SCENARIOS["clean"], faults=MIXED, steps=2100, batch=7, ranks=2,
                          embedding_dtype="int64"), 2),
    "no-drafts": (replace(SCENARIOS["clean"], faults=MIXED, steps=300, batch=5,
                          spec_tokens=0, max_num_reqs=9), 2),
}


def segment_files(capture: Path) -> list[str]:
    return sorted(p.name for p in capture.iterdir() if p.name != "manifest.json")


@pytest.fixture(params=["fork", "thread"])
def strategy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Blocks written by forked processes (Linux) or by a thread (elsewhere)."""
    if request.param == "fork" and not sys.platform.startswith("linux"):
        pytest.skip("blocks are written by forked processes on Linux only")
    monkeypatch.setattr(simulate_columns, "FORK", request.param == "fork")
    return str(request.param)


@pytest.mark.parametrize("case", CASES)
def test_blocks_write_the_bytes_records_would(case: str, strategy: str, tmp_path: Path) -> None:
    scenario, seed = CASES[case]
    by_record = write_capture(tmp_path / "records.capture",
                              Simulator(scenario, seed).records(scenario.steps), {},
                              validated=True)
    by_block = write_simulation(tmp_path / "blocks.capture", Simulator(scenario, seed),
                                scenario.steps, {})
    names = segment_files(by_record)
    assert names == segment_files(by_block)
    assert len(names) == 2 * 4 * scenario.ranks  # one segment and its index per site and rank
    for name in names:
        assert filecmp.cmp(by_record / name, by_block / name, shallow=False), name
    assert len(forensics.load(by_block)) == 4 * scenario.ranks * scenario.steps


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_simulated_fields_keep_their_types_from_step_to_step(name: str) -> None:
    """The block encoder takes each field's type from the block's first step."""
    def signature(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return (value.dtype, value.ndim, value.shape[1:])
        return value if isinstance(value, Derived) else type(value)

    sim = Simulator(replace(SCENARIOS[name], faults=MIXED, batch=12), 1)
    first = {site: {k: signature(v) for k, v in values.items()}
             for site, values in sim.advance().sites.items()}
    for _ in range(400):
        assert {site: {k: signature(v) for k, v in values.items()}
                for site, values in sim.advance().sites.items()} == first


def test_simulate_out_is_the_block_writer(tmp_path: Path) -> None:
    out = forensics.simulate("misattribution", steps=5000, seed=3, out=tmp_path / "m.capture")
    records = forensics.simulate("misattribution", steps=5000, seed=3)
    assert isinstance(records, list)
    loaded = list(forensics.load(out))
    assert [pipeline_key(r) for r in loaded] == [pipeline_key(r) for r in records]
    for a, b in zip(loaded[::97], records[::97], strict=True):
        assert a.fields.keys() == b.fields.keys()
        for key, value in a.fields.items():
            assert np.array_equal(value, b.fields[key]) if isinstance(value, np.ndarray) \
                else value == b.fields[key], (a.site, a.step, key)


def test_a_failed_block_names_its_steps_and_leaves_nothing(strategy: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    def full_disk(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(CaptureWriter, "write_columns", full_disk)
    out = tmp_path / "s.capture"
    with pytest.raises((CaptureFormatError, OSError), match="No space left") as caught:
        write_simulation(out, Simulator(configure("clean", batch=4), 0), 5000, {})
    if strategy == "fork":
        assert "steps 1-4096" in str(caught.value)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_an_existing_output_is_kept(tmp_path: Path) -> None:
    out = write_simulation(tmp_path / "s.capture", Simulator("clean", 0), 3, {})
    before = segment_files(out)
    with pytest.raises(OutputExistsError):
        write_simulation(out, Simulator("clean", 1), 3, {})
    assert segment_files(out) == before
    write_simulation(out, Simulator("clean", 1), 5, {}, force=True)
    assert len(forensics.load(out)) == 20


def test_a_block_rejects_a_step_of_other_fields() -> None:
    sim = Simulator("clean", 0)
    block = StepColumns()
    block.add(sim.advance())
    fields = sim.advance()
    del fields.sites["embedding"]["cu_num_tokens"]
    with pytest.raises(ValueError, match="embedding fields"):
        block.add(fields)


def test_bundled_captures_are_what_their_settings_simulate(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """data/regenerate.py's settings still simulate the bundled records (the random draws and
    the model did not drift from the captures and their expected.json)."""
    spec = importlib.util.spec_from_file_location("regenerate", DATA / "regenerate.py")
    assert spec is not None and spec.loader is not None
    regenerate = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "regenerate", regenerate)  # its dataclasses need it
    spec.loader.exec_module(regenerate)
    for bundle in regenerate.bundles():
        sc = bundle.scenario
        bundled = list(forensics.load(DATA / f"{bundle.name}.capture"))
        if sc.runner == "v2":  # Model Runner V2's step model (forensics.simulator.v2)
            from forensics.simulator.v2 import V2Simulator, settings_of

            # read back in pipeline order (post_update before combine_tokens); the V2 bundles
            # end at the crash they record (regenerate.py)
            fresh = sorted(V2Simulator(settings_of(sc), bundle.seed).records(), key=pipeline_key)
            # a V2 site added after a bundle was written is not in it (its records draw
            # nothing at random, so the others are unchanged)
            held = {r.site for r in bundled}
            fresh = [r for r in fresh if r.site in held]
            assert bundled and len(bundled) <= len(fresh), bundle.name  # silent ones: equal
            fresh = fresh[:len(bundled)]
        else:
            fresh = list(Simulator(sc, bundle.seed).records(sc.steps))
            # a field added after a bundle was written (the embedding's positions, for token
            # continuity) is not in it; it draws nothing at random, so the rest is unchanged
            if not any("positions" in r.fields for r in bundled):
                fresh = [replace(r, fields={k: v for k, v in r.fields.items()
                                            if k != "positions"}) for r in fresh]
        assert [canonical(r) for r in bundled] == [canonical(r) for r in fresh], bundle.name


def canonical(record: Record) -> tuple[Any, ...]:
    values = tuple(sorted((k, (v.dtype.str, v.shape, v.tolist())
                           if isinstance(v, np.ndarray) else v)
                          for k, v in record.fields.items()))
    return (record.site, record.step, record.rank, record.summary, values)


WORDS = st.lists(st.none() | st.text(max_size=12), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(WORDS, st.data())
def test_coded_strings_equal_plain_strings(words: list[str | None], data: st.DataObject) -> None:
    codes = np.array(data.draw(st.lists(st.integers(0, len(words) - 1), max_size=40)),
                     dtype=np.int64)
    try:
        expected = an.strings([words[c] for c in codes])
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            an.coded_strings(words, codes)
        return
    got = an.coded_strings(words, codes)
    assert got.to_pylist() == expected.to_pylist()
    assert [b.to_pybytes() if b is not None else None for b in got.buffers()] == \
        [b.to_pybytes() if b is not None else None for b in expected.buffers()]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["int8", "int32", "int64", "uint16"]), st.integers(0, 3),
       st.lists(st.integers(0, 5), min_size=1, max_size=12), st.integers(0, 2**31))
def test_stacked_tensors_encode_as_any_tensors(dtype: str, width: int, rows: list[int],
                                               seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (lambda n: (n, width)) if width else (lambda n: (n,))
    arrays = [rng.integers(0, 100, shape(n)).astype(dtype) for n in rows]
    for got, expected in zip(arrow_codec.encode_stacked_tensor(arrays, dtype),
                             arrow_codec.encode_tensor(list(arrays), dtype), strict=True):
        assert got.equals(expected)
        assert [b.to_pybytes() if b is not None else None for b in got.buffers()] == \
            [b.to_pybytes() if b is not None else None for b in expected.buffers()]


def test_stacked_tensors_of_another_dtype_are_refused() -> None:
    arrays = [np.zeros(3, np.int32), np.zeros(2, np.int64)]
    with pytest.raises(ValueError, match="dtype int64; expected int32"):
        arrow_codec.encode_stacked_tensor(arrays, "int32")
    with pytest.raises(ValueError):
        arrow_codec.encode_stacked_tensor([np.zeros(3, np.int32), np.zeros((2, 2), np.int32)],
                                          "int32")


def test_write_columns_checks_the_schema_and_keeps_order(tmp_path: Path) -> None:
    sim = Simulator(configure("clean", batch=3), 0)
    block = StepColumns()
    for _ in range(3):
        block.add(sim.advance())
    (site, columns, arrays), *_ = block.encode(0)
    buffered = next(r for r in sim.step() if r.site == site)  # step 4
    writer = CaptureWriter(tmp_path / "c.capture", {})
    writer.append(buffered, validated=True)
    missing = {k: v for k, v in arrays.items() if k != "req_ids"}
    with pytest.raises(CaptureFormatError, match="do not fit the segment schema"):
        writer.write_columns(site, 0, columns, missing)
    writer.write_columns(site, 0, columns, arrays)
    writer.close()
    (index,) = writer.path.glob(f"{site}*.idx")
    entries = read_index(index)
    assert entries is not None
    assert [(int(e["step_min"]), int(e["step_max"])) for e in entries] == [(4, 4), (1, 3)]
    assert sorted(r.step for r in forensics.load(writer.path).records(site)) == [1, 2, 3, 4]


def test_progress_is_drawn_a_block_at_a_time(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    write_simulation(tmp_path / "p.capture", Simulator(configure("clean", batch=2), 0), 5000,
                     {}, progress=True)
    err = capsys.readouterr().err
    assert " 81% simulate clean" in err and "100% simulate clean" in err  # 4,096 then 5,000
    write_simulation(tmp_path / "q.capture", Simulator("clean", 0), 10, {})
    assert capsys.readouterr().err == ""
