"""This process's tag in the capture (``host-pid``: the name of its segments and events file),
one that no file of the capture holds yet.

A pid is reused: a process that ended and a new one given its pid (on the same host), or two
sessions of one process in sequence, took the same tag, and the later one appended its events
to the events file of the earlier (two ``probe_start`` and two ``probe_stop`` in one file),
which the probe never does to what it did not create. A tag taken already becomes
``host-N-pid`` with the least N from 2 that no file holds.
"""

from __future__ import annotations

import os
from typing import Any

from forensics.probe.settings import process_tag


def unclaimed(session: Any) -> str:
    """This process's tag, made distinct from those of the files in ``session``'s capture
    folder (the plain tag when the folder is not held or cannot be listed)."""
    tag = process_tag()
    taken = _taken(session)
    if tag not in taken:
        return tag
    host, pid = tag.rsplit("-", 1)
    return next(name for n in range(2, len(taken) + 3)
                if (name := f"{host}-{n}-{pid}") not in taken)


def _taken(session: Any) -> set[str]:
    """The process tags the segments and events files in ``session``'s folder are named with."""
    from forensics.store.paths import EVENTS_RE, parse_segment_name

    try:
        names = os.listdir(session.folder().fd)
    except OSError:
        return set()
    taken = {match["process"] for name in names if (match := EVENTS_RE.fullmatch(name))}
    return taken | {segment.process for name in names
                    if (segment := parse_segment_name(name)) is not None}
