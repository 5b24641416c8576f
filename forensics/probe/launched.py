"""When the kernel flight recorder counts a launch (:func:`launched`): once it ran, or raised.

The launch path (:func:`~forensics.probe.kernels.wrap_run`) copies a launch's arguments before
it runs; a signal's handler that raised meanwhile (a Ctrl-C: ``KeyboardInterrupt``) ended the
call before the launch ran, yet it was counted in ``kernel_summary``'s ``kernels_seen`` (and
kept, numbered in its step, as a launch). The arguments are copied uncounted, and the launch is
counted, numbered and kept here once the launch returned or raised.
"""

from __future__ import annotations

from typing import Any


def counted(recorder: Any, meta: Any, pending: Any) -> None:
    """:func:`launched` of a launch of ``meta`` (None: its kernel could not be told) when it is
    recorded; an error of the recorder's is counted, never raised into the launch."""
    if meta is None or not meta.wanted:
        return
    try:
        launched(recorder, meta, pending)
    except Exception:
        recorder.errors += 1


def launched(recorder: Any, meta: Any, pending: Any) -> None:
    """Count a launch of ``meta`` that ran (or raised) in ``kernels_seen``; one captured into a
    CUDA graph (``pending`` None) in ``graph_launches`` too; else number ``pending`` in its step
    and keep it in the recorder (unless each launch is handed to the writer)."""
    key = meta.key
    recorder.seen[key] = recorder.seen.get(key, 0) + 1
    if pending is None:
        if recorder._capturing():
            recorder.graph_seen[key] = recorder.graph_seen.get(key, 0) + 1
        return
    pending.ordinal = next_ordinal(recorder, pending.step)
    if not recorder.hands_off_each_launch:
        recorder._launches(pending.step).append(pending)


def next_ordinal(recorder: Any, step: int) -> int:
    """The launch ordinal of a new launch of ``recorder`` at ``step`` (0 for its first)."""
    last, count = recorder._ordinal
    count = count + 1 if last == step else 1
    recorder._ordinal = (step, count)
    return count - 1
