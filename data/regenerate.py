"""Rebuild the bundled captures in data/ and their expected.json, deterministically.

    .venv/bin/python data/regenerate.py            # every capture
    .venv/bin/python data/regenerate.py clean      # only those whose name contains 'clean'

Each capture is simulated (forensics.simulate) from fixed settings and seeds, written with the
store's write_capture, then replayed under upstream and patched; the replay's verdicts and first
findings become the capture's expected.json (read by `forensics check` and the pytest plugin).
The facts behind the incident settings are in ../shared/docs/INCIDENTS.md; data/INDEX.md says
what each capture shows.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from forensics.share.evidence import EXPECTED_KEYS, evidence_of
from forensics.simulator.runs import Simulator
from forensics.simulator.scenarios import SCENARIOS, Faults, Scenario, manifest_for

DATA = Path(__file__).resolve().parent

#: Incident A: DeepSeek-V4-Flash (vocabulary 129280), TP 2 on two DGX Spark, MTP, a 4-way burst.
INCIDENT_A = Scenario(
    "incident-a", "4-way concurrent burst, TP 2, MTP; crash window of incident A",
    steps=48, batch=4, spec_tokens=2, vocab=129280, accept_rate=0.6, arrival_rate=0.0,
    mean_output=60, prompt_len=(24, 40), ranks=2)
A_CRASH = [
    {"kind": "illegal_memory_access", "detail": None, "rank": 1,
     "message": "CUDA error: an illegal memory access was encountered"},
    {"kind": "engine_dead", "detail": None, "rank": 0,
     "message": "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."},
]

#: Incident B: Qwen3.8-27B INT4 + MTP (4 drafts), vocabulary 248320, 2 staggered requests, SM70.
INCIDENT_B = Scenario(
    "incident-b", "2 requests x (1 + 4 drafts), SM70 rejection path writes vocab_size",
    faults=Faults(forced={"vocab_sentinel": (12,)}), steps=14, batch=2, spec_tokens=4,
    vocab=248320, accept_rate=0.5, arrival_rate=1.0, mean_output=4000, prompt_len=(48, 64),
    embedding_dtype="int64")
B_CRASH = [
    {"kind": "cuda_assert", "detail": "srcIndex < srcSelectDimSize",
     "location": "Indexing.cu:1515", "function": "indexSelectSmallIndex", "rank": 0,
     "message": "Indexing.cu:1515: indexSelectSmallIndex: block: [0,0,0], thread: [0,0,0] "
                "Assertion `srcIndex < srcSelectDimSize` failed."},
    {"kind": "engine_dead", "detail": None, "rank": 0,
     "message": "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
                "(the process exited 0)"},
]


#: Model Runner V2 (the default runner of vLLM 0.32/0.33 on GPUs): 4 slots, 3 drafts
V2_CRASH = [
    {"kind": "cuda_assert", "detail": "srcIndex < srcSelectDimSize",
     "location": "Indexing.cu:1515", "function": "indexSelectSmallIndex", "rank": 0,
     "message": "Indexing.cu:1515: indexSelectSmallIndex: block: [0,0,0], thread: [0,0,0] "
                "Assertion `srcIndex < srcSelectDimSize` failed."},
]


@dataclass
class Bundle:
    """One bundled capture: its scenario, seed, notes and crash events."""

    name: str
    scenario: Scenario
    seed: int
    notes: str
    model: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: a V2 run ends at the first id out of range (the crash); a silent fault runs to the end
    ends_at_crash: bool = True


def first_shrink(sc: Scenario, seed: int) -> int:
    """The first step whose batch is smaller than the previous one (where a stale row could
    outlive the previous batch's tensors)."""
    sim = Simulator(replace(sc, faults=Faults()), seed)
    prev = sc.batch
    for step in range(1, sc.steps + 1):
        rows = len(sim.step()[0]["prev_positions"])
        if rows < prev:
            return step
        prev = rows
    raise SystemExit(f"{sc.name}: no batch shrink within {sc.steps} steps; change the seed")


def bundles() -> list[Bundle]:
    """Every bundled capture, in the order INDEX.md lists them."""
    a_model = {"name": "DeepSeek-V4-Flash (1,048,576-token context build)",
               "hardware": "2x DGX Spark", "speculative": "MTP"}
    shrink = first_shrink(INCIDENT_A, seed=3)
    confirmed = replace(INCIDENT_A, faults=Faults(forced={"stale_prev_row": (shrink,)}))
    b_model = {"name": "Qwen3.8-27B INT4 + MTP", "hardware": "1x V100-PCIE-32GB (SM70)",
               "max_model_len": 229376, "max_num_seqs": 4, "kv_cache_dtype": "fp8",
               "async_scheduling": True}
    shapes = [Bundle(name, SCENARIOS[name], 0, f"synthetic: {SCENARIOS[name].description}")
              for name in ("clean", "stale-prev-row", "misattribution")]
    # vLLM 0.33.0 (the manifest's) clamps input_ids before the embedding with speculative
    # decoding: the leaked -1 is read as token 0, silently (issue 40)
    leak = Bundle("placeholder-leak", replace(SCENARIOS["placeholder-leak"], clamps=True), 0,
                  "synthetic: a -1 placeholder survives on a row absent from the previous batch; "
                  "vLLM 0.33.0's _preprocess clamps it to token 0 before the embedding")
    shapes.insert(2, leak)
    return [
        Bundle("incident-a-stale-prev-rows-refuted", INCIDENT_A, 3,
               "Incident A crash window, simulated without any stale row: the guard's "
               "hypothesis (a positive prev_positions past the previous batch) is refuted by "
               "clean batch_change and prepare_input_ids records on both ranks.",
               a_model, A_CRASH),
        Bundle("incident-a-stale-prev-rows-confirmed", confirmed, 3,
               f"Counterpart of the refuted capture: the same window with one stale row "
               f"injected at step {shrink}, where the batch first shrinks; the hypothesis "
               f"would look like this if it held.", a_model),
        Bundle("incident-b-vocab-sentinel", INCIDENT_B, 1,
               "Incident B: the rejection path writes vocab_size (248320) into a rejected "
               "slot at step 12; async_output counts it as a token at step 13; the embedding "
               "of step 14 (10 ids: 2 requests x (1 + 4 drafts), int64) indexes row 248320 "
               "of 248320.", b_model, B_CRASH),
        *shapes,
        Bundle("v2-negative-draft", replace(SCENARIOS["v2-negative-draft"], steps=24, batch=4,
                                            vocab=151936), 3,
               "Model Runner V2: a -1 placeholder is a request's first draft in its slot of "
               "req_states.draft_tokens; combine_sampled_and_draft_tokens copies it into "
               "input_ids (V2 does not clamp) and the embedding indexes row -1. The capture "
               "ends at that step.", {"runner": "v2"}, V2_CRASH),
        Bundle("v2-vocab-sample", replace(SCENARIOS["v2-vocab-sample"], steps=24, batch=4,
                                          vocab=151936), 11,
               "Model Runner V2: vocab_size (151936) is a request's last sampled id; post_update "
               "counts it in output_bin_counts (the next slot's row), stores it as the slot's "
               "last sampled token, and combine_sampled_and_draft_tokens writes it into the next "
               "step's input_ids; the embedding indexes row 151936 of 151936. The capture ends "
               "at that step.", {"runner": "v2"}, V2_CRASH),
        Bundle("v2-wrong-last-token", replace(SCENARIOS["v2-wrong-last-token"], steps=24,
                                              batch=4, vocab=151936), 5,
               "Model Runner V2: another valid id replaces a request's last sampled token in "
               "its slot (last_sampled_tokens); combine_sampled_and_draft_tokens feeds it, the "
               "embedding reads it in range, nothing crashes: the output is silently wrong.",
               {"runner": "v2"}, ends_at_crash=False),
        Bundle("v2-zeroed-combine", replace(SCENARIOS["v2-zeroed-combine"], steps=24, batch=4,
                                            vocab=151936), 0,
               "Model Runner V2: combine_sampled_and_draft_tokens writes token 0 where a "
               "request's drafts belong (the shape of #54137): the drafts are judged against "
               "the wrong tokens; nothing crashes.", {"runner": "v2"}, ends_at_crash=False),
    ]


def records_of(sc: Scenario, seed: int, ends_at_crash: bool = True) -> list[Any]:
    """The simulated records of ``sc``; a V2 run ends at the first step whose embedding gets an
    id out of range (where the engine would have crashed), unless ``ends_at_crash`` is off."""
    if sc.runner != "v2":
        return list(Simulator(sc, seed).records(sc.steps))
    import numpy as np

    from forensics.simulator.runs import simulate

    records = simulate(sc, seed=seed)
    assert isinstance(records, list)
    if not ends_at_crash:
        return records
    bad = [r.step for r in records if r.site == "embedding"
           and not ((np.asarray(r["input_ids"]) >= 0)
                    & (np.asarray(r["input_ids"]) < r["num_embeddings"])).all()]
    if not bad:
        raise SystemExit(f"{sc.name}: no fault reached the embedding; change the seed")
    return [r for r in records if r.step <= bad[0]]


def build(bundle: Bundle) -> Path:
    """Write one capture and its expected.json; return its path."""
    import forensics
    from forensics.store.writer import write_capture

    sc = bundle.scenario
    out = DATA / f"{bundle.name}.capture"
    records = records_of(sc, bundle.seed, bundle.ends_at_crash)
    manifest = manifest_for(sc, bundle.seed, bundle.notes)
    runner = bundle.model.pop("runner", None)
    if runner is not None:
        manifest["runner"] = runner
    manifest["model"].update(bundle.model)
    manifest["simulation"]["regenerate"] = "data/regenerate.py"
    last = records[-1].step
    events = [{**event, "step": last} for event in bundle.events]
    write_capture(out, records, manifest, force=True, events=events)
    expected = evidence_of(forensics.replay(out), EXPECTED_KEYS).to_json()
    (out / "expected.json").write_text(json.dumps(expected, indent=2, sort_keys=True) + "\n")
    return out


def size_of(path: Path) -> int:
    """Bytes on disk of the files in ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv: list[str]) -> int:
    """Rebuild the captures whose names contain one of ``argv`` (all when empty)."""
    for bundle in bundles():
        if argv and not any(word in bundle.name for word in argv):
            continue
        out = build(bundle)
        size = size_of(out)
        expected = json.loads((out / "expected.json").read_text())
        print(f"{out.name}: {size / 1024:.0f} KiB, verdicts {expected['verdicts']}")
        if size >= 1 << 20:
            raise SystemExit(f"{out.name} is {size} bytes; bundled captures stay under 1 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
