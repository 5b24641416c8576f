"""Simulated captures for the shrink and redact tests: each fault scenario, with one instance
of its fault forced at a chosen step (so every capture has evidence), and a manifest and events
that carry a host name, paths, a pid and free text (so redaction has something to remove)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from forensics.simulator.runs import simulate
from forensics.simulator.scenarios import Scenario, get_scenario
from forensics.store.writer import write_capture

#: fault scenario -> the fault it injects
FAULT_SCENARIOS = {"stale-prev-row": "stale_prev_row", "vocab-sentinel": "vocab_sentinel",
                   "placeholder-leak": "placeholder_leak", "misattribution": "misattribution"}
HOST, MODEL_PATH, NOTE = "gpu-node-17.corp.internal", "/models/secret-llama-70b", "customer ACME"
PRIVATE_MANIFEST = {
    "model": {"model": MODEL_PATH, "name": "secret-llama-70b"},
    "process": {"rank": 0, "pid": 424242, "host": HOST, "tag": "p424242"},
    "notes": f"{NOTE} crash on {HOST}",
}
PRIVATE_EVENTS = [{"kind": "engine_dead", "step": 3, "rank": 0, "host": HOST,
                   "message": f"EngineDeadError in {MODEL_PATH}/model.py on {HOST}"}]


def scenario(name: str, fault_step: int, steps: int = 24, batch: int = 4) -> Scenario:
    """The scenario ``name`` (its own fault rate kept) with one fault forced at
    ``fault_step``; ``clean`` stays clean."""
    sc = replace(get_scenario(name), steps=steps, batch=batch)
    if name in FAULT_SCENARIOS:
        forced = {FAULT_SCENARIOS[name]: (fault_step,)}
        sc = replace(sc, faults=replace(sc.faults, forced=forced))
    return sc


def private_capture(path: Path, name: str, seed: int, fault_step: int, steps: int = 24) -> Path:
    """Write the simulated capture with the private manifest and events; return its path."""
    records = simulate(scenario(name, fault_step, steps), seed=seed)
    return write_capture(path, records, manifest=PRIVATE_MANIFEST, events=PRIVATE_EVENTS)


def tree_digest(root: Path) -> str:
    """A digest of every file name and byte under ``root`` (to prove it unchanged)."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()
