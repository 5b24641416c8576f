"""Findings as data: filter a replay's findings and write them as CSV, Parquet or JSON lines.

:func:`select_findings` filters by variant, site, steps and request; :func:`write_findings`
writes the format named by the file's suffix (:data:`FORMATS`); :func:`parse_steps` reads the
command line's ``A:B`` (both ends included, either may be left out).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.atomic import user_path, write_atomically
from forensics.errors import ConfigurationError
from forensics.escaping import csv_cell, terminal
from forensics.judge.findings import COLUMNS, finding_records, sort_findings
from forensics.records import INT64_MAX
from forensics.sites import get_site

if TYPE_CHECKING:
    import pandas as pd

FORMATS = (".csv", ".parquet", ".jsonl")
#: a step of ``--steps``: ASCII digits only (``int`` also reads ``٣``, ``+3`` and ``1_0``)
_STEP = re.compile(r"-?[0-9]+")
#: the digits of the largest step a capture holds (:data:`~forensics.records.INT64_MAX`)
STEP_DIGITS = len(str(INT64_MAX))


def parse_steps(text: str) -> tuple[int | None, int | None]:
    """``"10:20"`` -> ``(10, 20)``, ``"10:"`` -> ``(10, None)``, ``"7"`` -> ``(7, 7)``.

    Raises ConfigurationError naming the expected form, an end past the largest step a capture
    holds, or a range that ends before it starts (``"5:1"`` kept no step, and said "no
    findings").
    """
    first, sep, last = text.partition(":")
    parts = [first.strip(), last.strip()] if sep else [first.strip()]
    if not all(part == "" or _STEP.fullmatch(part) for part in parts) or parts == [""]:
        raise ConfigurationError(f"--steps {text[:40]!r} is not A:B; give two integers such as "
                                 f"--steps 10:20 (both included), 10: or :20")
    for part in parts:
        _within_steps(text, part)
    low = int(parts[0]) if parts[0] else None
    high = (int(parts[1]) if parts[1] else None) if sep else low
    if low is not None and high is not None and low > high:
        raise ConfigurationError(f"--steps {text[:40]!r} ends before it starts; give A <= B, "
                                 f"such as --steps {high}:{low}")
    return low, high


def _within_steps(text: str, part: str) -> None:
    """Raise ConfigurationError when the end ``part`` of ``--steps text`` is an integer past the
    steps a capture can hold, either way (read by its digits first: ``int`` refuses thousands
    of them)."""
    digits = part.lstrip("-")
    if not part or (len(digits) <= STEP_DIGITS and -INT64_MAX - 1 <= int(part) <= INT64_MAX):
        return
    shown = part if len(part) <= 40 else f"a number of {len(digits)} digits"
    where = (f"below {-INT64_MAX - 1}, the smallest int64 (a step is never negative)"
             if part.startswith("-") else
             f"past the largest step a capture can hold, {INT64_MAX} (2**63 - 1, "
             f"{STEP_DIGITS} digits)")
    raise ConfigurationError(f"--steps {text[:40]!r}: {shown} is {where}; give each end from 0 "
                             f"to {INT64_MAX}, or leave it open, as in --steps 10: or :20")


def select_findings(findings: pd.DataFrame, variant: str | None = None,
                    site: str | None = None, steps: tuple[int | None, int | None] = (None, None),
                    request: str | None = None) -> pd.DataFrame:
    """The findings matching every given filter (columns :data:`forensics.judge.findings.COLUMNS`),
    in first-finding order. Raises UnknownSiteError for an unknown ``site``."""
    frame = findings[list(COLUMNS)]
    if variant is not None:
        frame = frame[frame["variant"] == variant]
    if site is not None:
        get_site(site)
        frame = frame[frame["site"] == site]
    if steps[0] is not None:
        frame = frame[frame["step"] >= steps[0]]
    if steps[1] is not None:
        frame = frame[frame["step"] <= steps[1]]
    if request is not None:
        frame = frame[frame["req_id"] == request]
    return sort_findings(frame)


def errored_records(outcomes: pd.DataFrame, site: str | None = None,
                    steps: tuple[int | None, int | None] = (None, None)) -> dict[str, int]:
    """Per variant, how many records (of ``site``, within ``steps``) ended in an ``error``
    outcome (a kernel worker timed out or failed, the variant raised): judged by nothing, they
    hold no finding, so "no findings" is not all there is to say of them."""
    frame = outcomes[outcomes["status"].astype(str) == "error"]
    if site is not None:
        frame = frame[frame["site"].astype(str) == site]
    if steps[0] is not None:
        frame = frame[frame["step"] >= steps[0]]
    if steps[1] is not None:
        frame = frame[frame["step"] <= steps[1]]
    return {str(v): int(n) for v, n in frame["variant"].astype(str).value_counts(sort=False)
            .items() if n}


def output_path(path: str | Path) -> Path:
    """``path`` checked as a findings file: a suffix of :data:`FORMATS`, not a directory.

    Raises ConfigurationError naming the accepted suffixes.
    """
    target = user_path(path)
    if target.suffix.lower() not in FORMATS or target.is_dir():
        raise ConfigurationError(f"-o '{terminal(target)}': give a file ending in one of "
                                 f"{list(FORMATS)}")
    return target


def write_findings(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write ``frame`` to ``path`` in the format of its suffix; return the path.

    Raises ConfigurationError for another suffix or a directory; OutputError (naming the file,
    which is left as it was) when it cannot be written.
    """
    target = output_path(path)
    writers = {".csv": _write_csv, ".jsonl": _write_jsonl, ".parquet": _write_parquet}
    return write_atomically(target, lambda tmp: writers[target.suffix.lower()](frame, tmp),
                            shared=True)


def _write_csv(frame: pd.DataFrame, target: Path) -> None:
    """CSV with every text cell through :func:`forensics.escaping.csv_cell` (no formula)."""
    frame.map(csv_cell).to_csv(target, index=False)


def _write_jsonl(frame: pd.DataFrame, target: Path) -> None:
    with target.open("w", encoding="utf-8") as out:
        for row in finding_records(frame):
            out.write(json.dumps(row) + "\n")


def _write_parquet(frame: pd.DataFrame, target: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = finding_records(frame)
    table = pa.Table.from_pylist(rows, schema=_schema()) if rows else _schema().empty_table()
    pq.write_table(table, target)


def _schema() -> Any:
    import pyarrow as pa

    types = {"row": pa.int64(), "element": pa.int64(), "step": pa.int64(), "rank": pa.int64(),
             "value": pa.int64(), "lower": pa.int64(), "upper": pa.int64(),
             "record": pa.int64(), "resolved": pa.bool_(), "index_at": pa.int64(),
             "held": pa.bool_(), "judged": pa.bool_(), "position": pa.int64(),
             "expected": pa.int64(), "expected_step": pa.int64()}
    return pa.schema([(c, types.get(c, pa.string())) for c in COLUMNS])
