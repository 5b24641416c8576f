"""The verdict matrix' scene: sites x variants, and each cell's text and colours."""

from __future__ import annotations

from typing import Any

from forensics.present.selection import capture_name, result_sites, variant_names
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


#: the most characters of the verdict matrix' lines on what no variant judged, and their width
UNJUDGED_TITLE, UNJUDGED_WIDTH = 320, 80


def verdict_title(result: Any) -> str:
    """The verdict matrix' title; a third line names what the capture held that no variant
    judged (:func:`~forensics.store.unjudged.unjudged_of`: records never written, events
    left out, files cut short, sites not known), where its cells' verdicts do not reach."""
    import textwrap

    from forensics.escaping import capped
    from forensics.store.unjudged import unjudged_of, unjudged_text

    title = f"{capture_name(result)} · all sites · all variants\nverdicts"
    unjudged = unjudged_text(unjudged_of(getattr(result, "capture", None)))
    if not unjudged:
        return title
    lines = textwrap.wrap(f"not judged: {capped(unjudged, UNJUDGED_TITLE)}", UNJUDGED_WIDTH)
    return "\n".join([title, *lines])
