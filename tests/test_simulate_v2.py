"""``forensics simulate`` on Model Runner V2: its scenarios, faults and captures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import forensics
from forensics.records import Record


def _records(scenario: str, seed: int = 1) -> list[Record]:
    records = forensics.simulate(scenario, seed=seed)
    assert isinstance(records, list)
    return records


def test_a_clean_v2_run_is_consistent_and_replays_without_a_finding() -> None:
    records = _records("v2-clean")
    assert {r.site for r in records} == {"post_update", "combine_tokens", "rejection_drafts",
                                         "embedding"}
    result = forensics.replay(records, variants=["upstream"])
    assert result.findings.empty
    by_step: dict[int, dict[str, Record]] = {}
    for r in records:
        by_step.setdefault(r.step, {})[r.site] = r
    for step, sites in by_step.items():  # the next step reads what post_update stored
        after = by_step.get(step + 1)
        if after is None:
            continue
        stored = np.asarray(sites["post_update"]["last_sampled_tokens_after"])
        assert np.array_equal(stored, np.asarray(after["combine_tokens"]["last_sampled_tokens"]))


def test_the_same_seed_gives_the_same_run() -> None:
    one, two = _records("v2-vocab-sample", 3), _records("v2-vocab-sample", 3)
    assert [(r.site, r.step) for r in one] == [(r.site, r.step) for r in two]
    assert all(np.array_equal(np.asarray(a["idx_mapping"] if "idx_mapping" in a else
                                         a["input_ids"]),
                              np.asarray(b["idx_mapping"] if "idx_mapping" in b else
                                         b["input_ids"])) for a, b in zip(one, two, strict=True))


def test_a_negative_draft_is_found_at_combine_tokens_and_the_embedding() -> None:
    table = forensics.replay(_records("v2-negative-draft"), variants=["upstream"]).findings
    combined = table[table["site"] == "combine_tokens"]
    sinks = table[table["site"] == "embedding"]
    assert len(combined) > 0 and set(combined["value"]) == {-1}
    assert list(sinks["origin"].unique()) == ["combine_tokens"]
    assert set(zip(sinks["step"], sinks["req_id"], strict=True)) == set(
        zip(combined["step"], combined["req_id"], strict=True))


def test_a_vocab_size_sample_is_counted_stored_and_fed_a_step_later() -> None:
    table = forensics.replay(_records("v2-vocab-sample"), variants=["upstream"]).findings
    stored = table[table["tensor"] == "out.last_sampled_tokens"]
    counted = table[table["tensor"] == "output_bin_counts"]
    sinks = table[table["site"] == "embedding"]
    assert len(stored) > 0 and set(stored["value"]) == {512}
    assert sorted(counted["step"]) == sorted(stored["step"])
    assert sorted(sinks["step"]) == sorted(s + 1 for s in stored["step"])
    assert list(sinks["origin"].unique()) == ["combine_tokens"]


def test_the_cli_writes_a_v2_capture(tmp_path: Path) -> None:
    out = tmp_path / "v2.capture"
    done = subprocess.run([sys.executable, "-m", "forensics.cli", "simulate", "v2-clean", "-o",
                           str(out), "--steps", "6"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    shown = subprocess.run([sys.executable, "-m", "forensics.cli", "inspect", str(out),
                            "--json"], capture_output=True, text=True, timeout=600)
    summary = json.loads(shown.stdout)
    assert summary["runner"] == "v2"
    assert set(summary["sites"]) == {"post_update", "combine_tokens", "rejection_drafts",
                                     "embedding"}
