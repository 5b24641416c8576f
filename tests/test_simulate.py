"""The simulator: consistent records, determinism, and exactly the findings each scenario is for."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from forensics.errors import ConfigurationError, OutputExistsError, UnknownScenarioError
from forensics.records import Record
from forensics.simulator.runs import Simulator, simulate
from forensics.simulator.scenarios import SCENARIOS, Faults, configure, get_scenario
from forensics.sites import SITES as ALL_SITES
from forensics.sites import pipeline_key
from forensics.validate import validate_record

DATA = Path(__file__).resolve().parent.parent / "data"
#: the sites of the V1 runner the step-level simulator records (V2's: test_simulate_v2.py)
SITES = tuple(s for s in ALL_SITES if s in ("batch_change", "prepare_input_ids", "async_output",
                                           "embedding"))
SHAPES = ("clean", "stale-prev-row", "vocab-sentinel", "placeholder-leak", "misattribution")

#: (site, kind, variant) each scenario must show under upstream and patched, and nothing else.
#: A stale or misattributed row feeds a token that is not its request's own (the CPU's stale
#: copy, or another request's): token continuity finds it at the embedding (issue 40).
EXPECTED_PAIRS = {
    "clean": set(),
    "stale-prev-row": {("batch_change", "out_of_bounds", "upstream"),
                       ("prepare_input_ids", "out_of_bounds", "upstream"),
                       ("embedding", "substituted", "upstream"),
                       ("embedding", "substituted", "patched")},
    # the simulator stages the sentinel for the embedding outside prepare_input_ids' inputs
    # (the fork's CPU path), so the upstream replay of prepare_input_ids writes another id
    # there: the continuity check reports the embedding's id as unwritten_input
    "vocab-sentinel": {("async_output", "out_of_bounds", "upstream"),
                       ("embedding", "out_of_bounds", "upstream"),
                       ("embedding", "unwritten_input", "upstream"),
                       ("embedding", "out_of_bounds", "patched")},
    "placeholder-leak": {("prepare_input_ids", "out_of_bounds", "upstream"),
                         ("prepare_input_ids", "out_of_bounds", "patched"),
                         ("embedding", "out_of_bounds", "upstream"),
                         ("embedding", "out_of_bounds", "patched")},
    "misattribution": {("batch_change", "misattributed", "upstream"),
                       ("batch_change", "misattributed", "patched"),
                       ("embedding", "substituted", "upstream"),
                       ("embedding", "substituted", "patched")},
}

INT32_FIELDS = {
    "batch_change": ("valid_sampled_token_count", "num_computed_tokens", "num_accepted_tokens",
                     "prev_num_draft_tokens", "cpu_num_computed_tokens"),
    "prepare_input_ids": ("prev_sampled_token_ids", "input_ids", "cu_num_tokens",
                          "num_draft_tokens", "draft_token_ids"),
    "async_output": ("sampled_token_ids_cpu", "output_len"),
    "embedding": ("input_ids", "cu_num_tokens"),
}


def by_step(records: list[Record]) -> dict[int, dict[str, Record]]:
    steps: dict[int, dict[str, Record]] = {}
    for record in records:
        steps.setdefault(record.step, {})[record.site] = record
    return steps


def test_unknown_scenario_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownScenarioError) as info:
        simulate("stale", steps=2)
    assert all(name in str(info.value) for name in SCENARIOS)
    with pytest.raises(ConfigurationError):
        configure("clean", batch=0)


@pytest.mark.parametrize("name", SHAPES)
def test_records_validate_with_vllm_dtypes(name: str) -> None:
    records = simulate(name, steps=40, seed=3)
    assert [r.site for r in records[:4]] == list(SITES)
    assert [pipeline_key(r) for r in records] == sorted(pipeline_key(r) for r in records)
    for i, record in enumerate(records):
        validate_record(record, f"record {i}")
        for field in INT32_FIELDS[record.site]:
            assert record[field].dtype == np.int32, (record.site, field)
        if "prev_positions" in record:
            assert record["prev_positions"].dtype == np.int64


@pytest.mark.parametrize("name", SHAPES)
def test_deterministic_per_seed(name: str) -> None:
    def run(seed: int) -> list[tuple]:
        return [(r.site, r.step, repr(sorted((k, np.asarray(v).tolist() if isinstance(
            v, np.ndarray) else v) for k, v in r.fields.items()))) for r in
            simulate(name, steps=30, seed=seed)]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_sites_agree_within_and_across_steps() -> None:
    sc = configure("clean", steps=300, batch=6)
    steps = by_step(simulate(sc, seed=5))
    shrinks = 0
    for step in sorted(steps):
        bc, pi, ao, em = (steps[step][s] for s in SITES)
        pp, req, prev_req = bc["prev_positions"], bc["req_ids"], bc["prev_req_ids"]
        p = len(bc["valid_sampled_token_count"])
        assert len(prev_req) == p == len(pi["prev_sampled_token_ids"])
        assert len(ao["sampled_token_ids_cpu"]) == p
        assert np.array_equal(pi["prev_positions"], pp)
        assert req == pi["req_ids"] == ao["req_ids"] == em["req_ids"]
        assert np.array_equal(pi["cu_num_tokens"], em["cu_num_tokens"])
        assert len(em["input_ids"]) == len(pi["input_ids"]) == pi["cu_num_tokens"][-1]
        for row, prev_row in enumerate(pp.tolist()):
            if prev_row >= 0:
                assert prev_req[prev_row] == req[row]
            else:
                assert req[row] not in prev_req
        assert sorted(pp[pp >= 0].tolist()) == sorted(set(pp[pp >= 0].tolist()))
        shrinks += len(req) < p
        sampled = ao["sampled_token_ids_cpu"]
        count = (sampled != -1).sum(axis=1)
        assert np.array_equal(count, bc["valid_sampled_token_count"])
        last = sampled[np.arange(p), count - 1]
        assert np.array_equal(last, pi["prev_sampled_token_ids"][:, 0])
    assert shrinks > 0, "the batch never shrank: condensation is not exercised"


def upstream_prepare(record: Record) -> np.ndarray:
    """DESIGN.md's slow path of prepare_input_ids (enough for in-range records)."""
    ids = record["input_ids"].astype(np.int64).copy()
    cu, drafts = record["cu_num_tokens"], record["num_draft_tokens"]
    prev_ids, k = record["prev_sampled_token_ids"][:, 0], record["prev_num_spec_tokens"]
    flat = record["draft_token_ids"].reshape(-1)
    for row, prev_row in enumerate(record["prev_positions"].tolist()):
        if prev_row < 0:
            continue
        slot = cu[row] - 1 - drafts[row]
        ids[slot] = prev_ids[prev_row]
        for j in range(drafts[row]):
            ids[slot + 1 + j] = flat[prev_row * k + j]
    return ids


def test_embedding_sees_the_ids_prepare_input_ids_produces() -> None:
    steps = by_step(simulate("clean", steps=120, seed=2))
    for sites in steps.values():
        assert np.array_equal(upstream_prepare(sites["prepare_input_ids"]),
                              sites["embedding"]["input_ids"])


@pytest.mark.parametrize("name", ["clean", "placeholder-leak", "vocab-sentinel"])
def test_output_tails_follow_full_lists(name: str) -> None:
    """Rebuild every output list from the records with vLLM 0.33.0's rule; tails must agree."""
    steps = by_step(simulate(name, steps=150, seed=4))
    full: dict[str, list[int]] = {}
    for step in sorted(steps):
        ao, pi = steps[step]["async_output"], steps[step]["prepare_input_ids"]
        prev = {r: i for i, r in enumerate(ao["prev_req_ids"]) if r is not None}
        for row, req in enumerate(ao["req_ids"]):
            tail, length = ao["output_tail"][row], int(ao["output_len"][row])
            out = full.setdefault(req, list(tail) if len(tail) == length else [])
            assert len(out) == length and out[len(out) - len(tail):] == tail, (step, req)
            placeholders = len(out) - len(np.trim_zeros(np.asarray(out) + 1, "b"))
            if req in prev and placeholders:
                ids = ao["sampled_token_ids_cpu"][prev[req]].tolist()
                count = ids.index(-1) if ids[-1] == -1 else len(ids)
                del out[len(out) - placeholders:]
                out.extend(ids[:min(count, placeholders)])
            out.extend([-1] * (1 + int(pi["num_draft_tokens"][row])))


def test_vocab_sentinel_reaches_the_next_embedding() -> None:
    sc = configure("vocab-sentinel", steps=60, batch=2, vocab=248320)
    steps = by_step(simulate(sc, seed=1))
    sentinel_steps = [s for s, sites in steps.items()
                      if (sites["async_output"]["sampled_token_ids_cpu"] == 248320).any()]
    assert sentinel_steps
    hits = [s for s in sentinel_steps if s + 1 in steps
            and steps[s + 1]["embedding"]["input_ids"].max() == 248320]
    assert hits


def replay_pairs(records: list[Record]) -> tuple[set[tuple[str, str, str]], object]:
    import forensics

    result = forensics.replay(records)
    findings = result.findings
    pairs = set(zip(findings["site"], findings["kind"], findings["variant"], strict=True))
    return pairs, result


@pytest.mark.parametrize("name", SHAPES)
def test_replay_shows_exactly_the_scenario_findings(name: str) -> None:
    pairs, result = replay_pairs(simulate(name, steps=200, seed=0))
    assert pairs == EXPECTED_PAIRS[name]
    findings = result.findings
    sink = findings[(findings["site"] == "embedding") & (findings["kind"] == "out_of_bounds")]
    if name == "vocab-sentinel":
        assert set(sink["origin"]) == {"async_output"}
        assert set(sink[sink["variant"] == "patched"]["resolved"]) == {True}
        assert set(sink[sink["variant"] == "upstream"]["resolved"]) == {False}
        assert result.verdicts["patched"]["embedding"] == "ok"
    if name == "placeholder-leak":
        assert set(sink["origin"]) == {"prepare_input_ids"}
        assert set(sink["resolved"]) == {False}


def test_soak_mixes_faults() -> None:
    sc = configure("soak", steps=400, batch=16)
    sc = type(sc)(**{**sc.__dict__, "faults": Faults(0.02, 0.02, 0.02, 0.02)})
    pairs, _ = replay_pairs(list(Simulator(sc, 0).records(sc.steps)))
    assert {kind for _, kind, _ in pairs} == {"out_of_bounds", "misattributed", "substituted",
                                              "unwritten_input"}  # the vocab sentinel's


def test_clean_long_run_has_no_finding() -> None:
    pairs, result = replay_pairs(simulate("clean", steps=10_000, batch=2, seed=11))
    assert pairs == set()
    assert all(v == "ok" for sites in result.verdicts.values() for v in sites.values())


def test_write_path_and_cli(tmp_path: Path) -> None:
    import forensics
    from forensics.cli import main

    out = simulate("misattribution", steps=20, seed=1, out=tmp_path / "m.capture")
    capture = forensics.load(out)
    assert len(capture) == 80 and capture.manifest["model"]["vocab_size"] == 32000
    assert capture.manifest["simulation"]["scenario"] == "misattribution"
    with pytest.raises(OutputExistsError):
        simulate("clean", steps=2, out=out)
    assert main(["simulate", "clean", "-o", str(out), "--steps", "3"]) == 2
    assert main(["simulate", "clean", "-o", str(out), "--steps", "3", "--force",
                 "--batch", "3", "--spec-tokens", "2", "--vocab", "1000"]) == 0
    assert len(forensics.load(out)) == 12
    assert main(["simulate", "nope", "-o", str(tmp_path / "x.capture")]) == 2


def test_bundled_captures_are_small_and_carry_expectations() -> None:
    captures = sorted(DATA.glob("*.capture"))
    names = {c.name for c in captures}
    assert {"incident-a-stale-prev-rows-refuted.capture",
            "incident-a-stale-prev-rows-confirmed.capture",
            "incident-b-vocab-sentinel.capture"} <= names
    for capture in captures:
        assert sum(f.stat().st_size for f in capture.rglob("*") if f.is_file()) < 1 << 20
        expected = json.loads((capture / "expected.json").read_text())
        assert set(expected["verdicts"]) == {"upstream", "patched"}
    refuted = json.loads((DATA / "incident-a-stale-prev-rows-refuted.capture"
                          / "expected.json").read_text())
    assert all(v == "ok" for sites in refuted["verdicts"].values() for v in sites.values())


def _sentinels(records: list[Record], vocab: int) -> list[tuple[int, int]]:
    """(step, row) of every sampled row of ``async_output`` that carries ``vocab``."""
    return [(r.step, int(row)) for r in records if r.site == "async_output"
            for row in np.flatnonzero((r["sampled_token_ids_cpu"] == vocab).any(axis=1))]


def test_a_forced_vocab_sentinel_is_placed_when_no_row_rejects() -> None:
    # every draft accepted: no row rejects one, so a drafting row is made to reject its last
    sc = replace(get_scenario("clean"), steps=12, batch=4, accept_rate=1.0,
                 faults=Faults(forced={"vocab_sentinel": (5,)}))
    records = simulate(sc, seed=3)
    assert _sentinels(records, sc.vocab) == [(6, _sentinels(records, sc.vocab)[0][1])]
    step6 = next(r for r in records if r.site == "async_output" and r.step == 6)
    row = step6["sampled_token_ids_cpu"][_sentinels(records, sc.vocab)[0][1]].tolist()
    # its accepted ids, then the sentinel in the first rejected slot, then -1
    first = row.index(sc.vocab)
    assert first == sc.spec_tokens and all(0 <= t < sc.vocab for t in row[:first])
    assert ("async_output", "out_of_bounds", "upstream") in replay_pairs(records)[0]


def test_a_forced_vocab_sentinel_waits_for_a_drafting_row() -> None:
    # every request ends after one id: each step's rows are all new, none drafts
    sc = replace(get_scenario("clean"), steps=6, batch=2, mean_output=1,
                 faults=Faults(forced={"vocab_sentinel": (3,)}))
    with pytest.raises(ConfigurationError, match="vocab_sentinel could not be placed"):
        simulate(sc, seed=0)


def test_a_forced_vocab_sentinel_needs_drafts() -> None:
    sc = replace(get_scenario("clean"), spec_tokens=0,
                 faults=Faults(forced={"vocab_sentinel": (3,)}))
    with pytest.raises(ConfigurationError, match="needs drafts"):
        Simulator(sc)


def test_the_help_names_every_scenario() -> None:
    import forensics.commands.simulate as command
    from forensics.simulator.scenarios import SCENARIOS

    help_text = " ".join((command.__doc__ or "").split())
    missing = [name for name in SCENARIOS if name not in help_text]
    assert not missing, missing
