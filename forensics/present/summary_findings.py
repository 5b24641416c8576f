"""Which findings are of summary records (a log's probe lines, a dump's ``summary`` records:
a least and a greatest value each, which nothing replays): what a variant cannot judge there
is no access inside an allocation, and the conclusion says so apart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from forensics.judge.findings import is_judged
from forensics.sites import site_order
from forensics.sites.core import OUT_OF_BOUNDS

if TYPE_CHECKING:
    import pandas as pd

    from forensics.replaying import ReplayResult


def summary_records(result: ReplayResult) -> frozenset[int]:
    """The indexes of ``result``'s summary records (the ``record`` of their findings)."""
    index = result.index
    if index is not None and len(index) and "summary" in index:
        return frozenset(i for i, flag in enumerate(index["summary"].tolist()) if flag)
    return frozenset(i for i, r in enumerate(result.records) if getattr(r, "summary", False))


def of_summaries(findings: pd.DataFrame, summaries: frozenset[int]) -> pd.Series:
    """Which of ``findings`` are of the summary records ``summaries``."""
    if not summaries or "record" not in findings.columns:
        return findings["variant"].isin(())  # none
    return findings["record"].isin(sorted(summaries)).astype(bool)


def mixed_summaries(findings: pd.DataFrame, variants: Sequence[str], apart: Sequence[str]
                    ) -> dict[str, tuple[int, list[str]]]:
    """Per variant, how many out-of-bounds ``findings`` (of summary records) it cannot judge
    outside the sites ``apart`` (of summary records only), and at which sites."""
    rows = findings[(findings["kind"] == OUT_OF_BOUNDS) & ~is_judged(findings)
                    & ~findings["site"].isin(list(apart))]
    counted = {v: rows[rows["variant"] == v] for v in variants}
    return {v: (len(mine), sorted(set(mine["site"]), key=site_order))
            for v, mine in counted.items() if len(mine)}
