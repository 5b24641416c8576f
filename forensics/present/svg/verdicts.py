"""The verdict matrix as an SVG figure (placeholder until the view is written)."""

from __future__ import annotations

from typing import Any

from forensics.present.svg.canvas import Figure


def verdict_figure(result: Any) -> Figure:
    """Not written yet."""
    raise NotImplementedError("the SVG verdict matrix is not written yet")
