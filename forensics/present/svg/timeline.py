"""The timeline view as an SVG panel (placeholder until the view is written)."""

from __future__ import annotations

from typing import Any

from forensics.present.svg.canvas import Panel


def timeline_panel(result: Any, **kwargs: Any) -> Panel:
    """Not written yet."""
    raise NotImplementedError("the SVG timeline view is not written yet")
