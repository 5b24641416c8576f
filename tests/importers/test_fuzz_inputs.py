"""Mutation fuzzing of .pt, .npz, .safetensors and log inputs: only ForensicsError escapes.

Cases run in a forked child under RLIMIT_AS (see tests/store/store_helpers.run_fuzz_cases).
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from importer_helpers import SM70_LOG, as_dict, record_to_npz, record_to_safetensors, valid_records
from store_helpers import mutate, run_fuzz_cases

from forensics.importers import import_sources


def _seeds(tmp_path: Path) -> dict[str, Path]:
    records = valid_records()
    torch.save([{k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                 for k, v in as_dict(r).items()} for r in records[:4]], tmp_path / "seed.pt")
    record_to_npz(tmp_path / "seed.npz", records[1])
    record_to_safetensors(tmp_path / "seed.safetensors", records[2])
    (tmp_path / "seed.log").write_text(SM70_LOG)
    return {p.suffix: p for p in tmp_path.glob("seed.*")}


@pytest.mark.parametrize(("suffix", "count"), [(".pt", 80), (".npz", 80),
                                               (".safetensors", 80), (".log", 60)])
def test_fuzzed_inputs(tmp_path: Path, suffix: str, count: int) -> None:
    seed = _seeds(tmp_path)[suffix]
    rng = random.Random(suffix)
    cases = []
    data = seed.read_bytes()
    for n in range(count):
        mutated = data
        for _ in range(rng.choice([1, 1, 2, 4])):
            mutated = mutate(mutated, rng)
        case = tmp_path / f"case{n}{suffix}"
        case.write_bytes(mutated)
        cases.append(case)
    out = tmp_path / "out.capture"
    run_fuzz_cases(cases, lambda case: import_sources([case], out, force=True))


def test_unmutated_seeds_import(tmp_path: Path) -> None:
    for path in _seeds(tmp_path).values():
        import_sources([path], tmp_path / f"{path.suffix[1:]}.capture")
