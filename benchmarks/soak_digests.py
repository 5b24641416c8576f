"""Digests of a soak's replay (issue 26): ``python benchmarks/soak_digests.py [--scale small]``.

Simulates the ``soak`` scenario exactly as ``benchmarks/run.py --scale SCALE`` does (batch 64,
4 drafts, seed 0: 100,000 records at ``small``), replays it through ``upstream`` and
``patched``, and prints one line per digest (SHA-256, first 16 hex digits) with its size:
``findings`` (every column), ``findings_core`` (the columns older trees have too),
``verdicts``, ``first_findings`` (the evidence ``shrink``, ``redact`` and ``expected.json``
keep), ``outcomes``, ``bounds``, and one ``bundled`` line per capture under ``data/`` (its
verdicts and first findings). Two trees replay to the same results when they print the same
lines (``diff``). The script reads only public entry points and imports the package of the
tree it sits in, so a copy of it runs on an older tree too
(``cp benchmarks/soak_digests.py OLD/benchmarks/ && cd OLD && python benchmarks/soak_digests.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BATCH, DRAFTS = 64, 4
#: the findings table's columns at 7ea4725 (later trees add judged, index_tensor, index_at,
#: held, indexed, value_class): ``findings_core`` digests these alone, comparable across trees
CORE_FINDING_COLUMNS = ("variant", "site", "step", "rank", "row", "element", "tensor", "kind",
                        "value", "lower", "upper", "origin", "resolved", "req_id", "record")
STEPS = {"tiny": 250, "small": 25_000, "full": 250_000}  # benchmarks/run.py's SCALES


def digest(data: bytes) -> str:
    """The first 16 hex digits of the SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()[:16]


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it (numpy scalars as Python numbers)."""
    return value.item() if hasattr(value, "item") else str(value)


def json_digest(obj: Any) -> str:
    """The digest of ``obj`` as sorted, compact JSON."""
    return digest(json.dumps(obj, sort_keys=True, separators=(",", ":"),
                             default=_plain).encode())


def frame_digest(frame: Any) -> str:
    """The digest of a DataFrame's rows in their order, its columns in name order."""
    if frame is None:
        return digest(b"none")
    ordered = frame[sorted(frame.columns)]
    return digest(ordered.to_csv(index=False, lineterminator="\n").encode())


def evidence(result: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The verdicts and first findings of ``result``, as the share commands compare them."""
    from forensics.share.evidence import evidence_of

    ev = evidence_of(result)
    return ev.verdicts, ev.first


def soak_lines(steps: int, work: Path) -> list[str]:
    """Simulate the soak of ``steps`` steps into ``work``, replay it, and digest the result."""
    import forensics
    from forensics.simulator.columns import write_simulation
    from forensics.simulator.runs import Simulator
    from forensics.simulator.scenarios import configure, manifest_for

    sc = configure("soak", steps=steps, batch=BATCH, spec_tokens=DRAFTS)
    capture = work / "soak.capture"
    write_simulation(capture, Simulator(sc, seed=0), steps, manifest_for(sc, 0))
    result = forensics.replay(forensics.load(capture), variants=["upstream", "patched"])
    verdicts, first = evidence(result)
    findings = result.findings
    return [f"soak steps={steps} records={len(result.records)} batch={BATCH} drafts={DRAFTS} "
            f"seed=0",
            f"findings {frame_digest(findings)} rows={len(findings)} "
            f"columns={len(findings.columns)}",
            f"findings_core {frame_digest(findings[list(CORE_FINDING_COLUMNS)])} "
            f"rows={len(findings)} columns={len(CORE_FINDING_COLUMNS)}",
            f"verdicts {json_digest(verdicts)} {json.dumps(verdicts, sort_keys=True)}",
            f"first_findings {json_digest(first)}",
            f"outcomes {frame_digest(result.outcomes)} rows={len(result.outcomes)}",
            f"bounds {frame_digest(result.bounds)} rows={len(result.bounds)}"]


def bundled_lines() -> list[str]:
    """Per bundled capture, one digest of its verdicts and first findings."""
    import forensics

    lines = []
    for path in sorted((ROOT / "data").glob("*.capture")):
        result = forensics.replay(forensics.load(path), variants=["upstream", "patched"])
        lines.append(f"bundled {json_digest(evidence(result))} {path.name}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--scale``, ``--steps``, ``--work``, ``--no-bundled``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=sorted(STEPS), default="small")
    parser.add_argument("--steps", type=int, help="steps of the soak (default: the scale's)")
    parser.add_argument("--work", type=Path, help="where the soak is written (default: a "
                                                  "temporary directory, removed)")
    parser.add_argument("--no-bundled", action="store_true", help="skip the bundled captures")
    args = parser.parse_args(argv)
    steps = args.steps or STEPS[args.scale]
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
        lines = soak_lines(steps, args.work)
    else:
        with tempfile.TemporaryDirectory(prefix="soak-digests-") as tmp:
            lines = soak_lines(steps, Path(tmp))
    lines += [] if args.no_bundled else bundled_lines()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
