"""Expected results of a capture (``NAME.capture/expected.json``): compare, explain, regenerate.

Used by ``forensics check`` and the pytest plugin. The object is the one
``ReplayResult.expected()`` returns: ``{"format": 1, "verdicts": {variant: {site: verdict}},
"first_finding": {variant: {...} | null}}``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.errors import CaptureFormatError

EXPECTED_NAME = "expected.json"
OBTAINED_NAME = "expected.obtained.json"
DEFAULT_VARIANTS = ("upstream", "patched")


@dataclass
class CheckResult:
    """Outcome of checking one capture: ``differences`` is empty when it matches."""

    capture: Path
    differences: list[str] = field(default_factory=list)
    obtained: dict[str, Any] = field(default_factory=dict)
    obtained_path: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.differences

    def explain(self) -> str:
        """A readable report of the differences and the command that accepts the new result."""
        lines = [f"{self.capture.name}: replay differs from {EXPECTED_NAME}:"]
        lines += [f"  - {d}" for d in self.differences]
        if self.obtained_path is not None:
            lines.append(f"  obtained result written to {self.obtained_path}")
        lines.append(f"  to accept it: pytest --forensics-captures {self.capture.parent} "
                     f"--forensics-regen  (or copy {OBTAINED_NAME} over {EXPECTED_NAME})")
        return "\n".join(lines)


def read_expected(capture: Path) -> dict[str, Any]:
    """Parse ``capture/expected.json``.

    Raises:
        CaptureFormatError: the file is missing or malformed, naming it and the fix.
    """
    path = Path(capture) / EXPECTED_NAME
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CaptureFormatError(f"{path}: no expected results; create them with "
                                 f"`pytest --forensics-captures {Path(capture).parent} "
                                 f"--forensics-regen`") from None
    except (OSError, ValueError) as exc:
        raise CaptureFormatError(f"{path}: not valid JSON ({exc}); regenerate it with "
                                 f"--forensics-regen") from None
    if not isinstance(data, dict) or not isinstance(data.get("verdicts"), dict):
        raise CaptureFormatError(f"{path}: field 'verdicts' missing; expected an object "
                                 f"{{variant: {{site: verdict}}}}; regenerate it with "
                                 f"--forensics-regen")
    return data


def compare(expected: dict[str, Any], obtained: dict[str, Any],
            variants: Sequence[str]) -> list[str]:
    """Readable differences between two expected objects over ``variants`` (empty: equal)."""
    diffs: list[str] = []
    for variant in variants:
        want = expected.get("verdicts", {}).get(variant)
        if want is None:
            diffs.append(f"variant {variant!r} is not in {EXPECTED_NAME}; regenerate it with "
                         f"--forensics-regen --forensics-variant {variant}")
            continue
        got = obtained["verdicts"].get(variant, {})
        for site in sorted(set(want) | set(got)):
            if want.get(site) != got.get(site):
                diffs.append(f"{variant}/{site}: expected verdict {want.get(site)!r}, "
                             f"got {got.get(site)!r}")
        want_first = expected.get("first_finding", {}).get(variant)
        got_first = obtained.get("first_finding", {}).get(variant)
        if want_first != got_first:
            diffs.append(f"{variant}: first finding changed: expected {_short(want_first)}, "
                         f"got {_short(got_first)}")
    return diffs


def _short(finding: dict[str, Any] | None) -> str:
    if not finding:
        return "none"
    return ("{kind} in {site} at step {step} rank {rank} row {row} element {element} "
            "({tensor}={value})").format(**{k: finding.get(k) for k in (
                "kind", "site", "step", "rank", "row", "element", "tensor", "value")})


def obtain(capture: Path, variants: Sequence[str]) -> dict[str, Any]:
    """Replay ``capture`` through ``variants`` and return its expected object."""
    from forensics.replay import replay

    return replay(capture, variants=list(variants)).expected()


def check(capture: Path | str, variants: Sequence[str] | None = None,
          write_obtained: bool = True) -> CheckResult:
    """Replay ``capture`` and compare with its ``expected.json``.

    ``variants`` defaults to those in the expected file (or upstream and patched). On a mismatch
    the obtained object is written to ``expected.obtained.json`` beside it.
    Raises:
        CaptureFormatError: no or malformed expected.json; any error of load or replay.
    """
    capture = Path(capture)
    expected = read_expected(capture)
    chosen = list(variants or expected["verdicts"] or DEFAULT_VARIANTS)
    known = [v for v in chosen if v in expected["verdicts"]]
    obtained = obtain(capture, known) if known else {"verdicts": {}, "first_finding": {}}
    result = CheckResult(capture, compare(expected, obtained, chosen), obtained)
    if result.differences and write_obtained:
        result.obtained_path = write_json(capture / OBTAINED_NAME, obtained)
    elif not result.differences:
        (capture / OBTAINED_NAME).unlink(missing_ok=True)
    return result


def regenerate(capture: Path | str, variants: Sequence[str] = DEFAULT_VARIANTS) -> Path:
    """Replay ``capture`` through ``variants`` and write the result as its ``expected.json``."""
    capture = Path(capture)
    path = write_json(capture / EXPECTED_NAME, obtain(capture, variants))
    (capture / OBTAINED_NAME).unlink(missing_ok=True)
    return path


def write_json(path: Path, data: dict[str, Any]) -> Path:
    """Write ``data`` as indented JSON atomically (temp file + rename); return ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path
