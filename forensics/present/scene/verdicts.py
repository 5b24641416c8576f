"""The verdict matrix' scene: sites x variants, and each cell's text and colours."""

from __future__ import annotations

from typing import Any

from forensics.present.selection import (
    capture_name,
    result_sites,
    unjudged_title,
    variant_names,
)
from forensics.present.style import NO_VERDICT_COLOR, VERDICT_COLORS


def verdict_grid(result: Any) -> tuple[list[str], list[str], dict[str, dict[str, str]]]:
    """The verdict matrix' sites (rows, pipeline order), variants (columns, replay order) and
    verdicts (variant -> site -> verdict)."""
    verdicts: dict[str, dict[str, str]] = getattr(result, "verdicts", None) or {}
    return result_sites(result), variant_names(result) or list(verdicts), verdicts


def verdict_cell(verdict: str | None) -> tuple[str, str, str]:
    """A verdict matrix cell's (text, fill colour, text colour) for ``verdict`` (None: none)."""
    ink = "white" if verdict in ("violation", "error") else "black"
    return verdict or "-", VERDICT_COLORS.get(str(verdict), NO_VERDICT_COLOR), ink


def verdict_title(result: Any) -> str:
    """The verdict matrix' title; further lines name what the capture held that no variant
    judged (:func:`~forensics.present.selection.unjudged_title`), where its cells' verdicts
    do not reach."""
    return unjudged_title(result, f"{capture_name(result)} · all sites · all variants\nverdicts")
