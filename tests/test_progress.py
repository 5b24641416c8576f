"""The progress bar draws only on a terminal (or when forced)."""

from __future__ import annotations

import io

from forensics.progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_when_not_a_terminal() -> None:
    stream = io.StringIO()
    bar = Progress(4, "replay", stream=stream)
    bar.advance(2)
    bar.close()
    assert stream.getvalue() == ""


def test_draws_on_a_terminal() -> None:
    stream = _Tty()
    bar = Progress(4, "replay", stream=stream)
    bar.advance(2, "upstream: embedding")
    bar.advance(2)
    bar.close()
    text = stream.getvalue()
    assert " 50% upstream: embedding" in text and "100%" in text and text.endswith("\n")
