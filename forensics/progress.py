"""A minimal progress bar on stderr, shown only when stderr is a terminal; its label (which
may name a capture or a source file) is shown as inert text (``escaping.terminal``)."""

from __future__ import annotations

import sys
from typing import TextIO

from forensics.escaping import terminal

BAR_WIDTH = 30


class Progress:
    """``Progress(total, label)``; ``advance(n)`` redraws the bar; ``close()`` ends the line.

    Silent (draws nothing) unless ``stream`` is a terminal or ``force`` is true.
    """

    def __init__(self, total: int, label: str, stream: TextIO | None = None,
                 force: bool = False) -> None:
        self.total, self.label, self.done = max(total, 1), label, 0
        self.stream = stream or sys.stderr
        self.enabled = force or self.stream.isatty()

    def advance(self, count: int = 1, label: str | None = None) -> None:
        """Count ``count`` more units of work (and optionally relabel); redraw the bar."""
        self.done = min(self.total, self.done + count)
        if label is not None:
            self.label = label
        if self.enabled:
            filled = BAR_WIDTH * self.done // self.total
            label = terminal(self.label)[:40]
            self.stream.write(f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
                              f"{100 * self.done // self.total:3d}% {label:<40}")
            self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
