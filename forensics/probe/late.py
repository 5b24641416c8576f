"""A record that comes after the probe's close: its thread was inside a recorded call (past
:meth:`~forensics.probe.session.ProbeSession.wants`) as another thread closed the session.

Its ``probe_stop`` is already written and the writer closed: the record was queued into a
ring no one would read again (the writer process started anew for it, writing nothing), and
the capture said nothing of it: ``probe_stop`` said 2 records, 2 written, of an engine that
made 3. :func:`said` says so in the log instead.
"""

from __future__ import annotations

import logging
from typing import Any

LOG = logging.getLogger("forensics.probe")


def said(session: Any, pending: Any, failed: bool) -> None:
    """One log line naming ``pending`` (a record of ``session`` that came after its close): in
    no capture; a guard finding's record (``failed``) makes its message say it is not kept."""
    if failed:
        session.kept = False
    LOG.warning("forensics probe: a %s record (step %d, rank %d) came after the probe closed "
                "(its thread was inside a recorded call as the session closed): it is in no "
                "capture, and the probe_stop, written at the close, does not count it",
                pending.site, pending.step, pending.rank)


def refused(session: Any, event: dict[str, Any]) -> bool:
    """Whether ``event`` comes after ``session``'s close (checked where the writer takes it,
    so that none is written after ``probe_stop``, which is written once the session closed)."""
    return bool(session._closed) and event.get("kind") != "probe_stop"


def event_said(kind: str, fields: dict[str, Any]) -> None:
    """One log line naming an event ``kind`` that came after the probe closed: in no capture
    (an engine's exception was written after ``probe_stop``, by a writer process started anew
    for it, or dropped without a word)."""
    where = f" ({fields['where']})" if "where" in fields else ""
    LOG.warning("forensics probe: event %s%s came after the probe closed: it is in no "
                "capture, and the probe_stop, written at the close, does not say it",
                kind, where)
