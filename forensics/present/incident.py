"""An incident notebook runs on its incident's capture only.

A notebook that tells one incident's story (``01_stale_prev_rows``: incident A;
``02_vocab_sentinel``: incident B) holds that incident's narrative as written text ("the engine
died...", "the hypothesis is refuted for this crash") and replays bundled data next to the
capture it is given: run on any other capture, its sentences would describe that capture as
the incident. Such a notebook declares it in its metadata::

    "forensics": {"incident": "incident A",
                  "captures": ["../data/incident-a-stale-prev-rows-refuted.capture"]}

(paths relative to the notebook), and :func:`refuse_other_capture` refuses, in one line, to run
it on a capture that is not one of those (the same directory once resolved: a copy, even an
unchanged one, is another capture). A notebook without that metadata (``00_quickstart``,
``03_triage``, the user's own) computes every sentence from the capture and runs on any.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forensics.errors import ConfigurationError
from forensics.escaping import terminal

METADATA_KEY = "forensics"
GENERAL_NOTEBOOK = "03_triage"


def incident_of(notebook: Path) -> tuple[str, list[Path]] | None:
    """The incident ``notebook`` tells and the captures that are that incident's (resolved),
    or ``None`` for a notebook that declares none (or that cannot be read: running it says
    why)."""
    try:
        data = json.loads(notebook.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    declared: Any = data.get("metadata", {}).get(METADATA_KEY) if isinstance(data, dict) else None
    if not isinstance(declared, dict) or not isinstance(declared.get("captures"), list):
        return None
    captures = [(notebook.parent / str(path)).resolve() for path in declared["captures"]]
    return str(declared.get("incident", "its incident")), captures


def refuse_other_capture(notebook: Path, capture: Path) -> None:
    """Nothing when ``notebook`` declares no incident or ``capture`` is one of its incident's.

    Raises:
        ConfigurationError: one line naming the notebook, the capture and the fix (the general
            notebook, or the incident's capture).
    """
    declared = incident_of(notebook)
    if declared is None or capture.resolve() in declared[1]:
        return
    incident, captures = declared
    own = " or ".join(f"'{terminal(path)}'" for path in captures)
    raise ConfigurationError(
        f"notebook {terminal(notebook.stem)!r} tells {terminal(incident)}'s story (its text and "
        f"bundled data are that incident's) and capture '{terminal(capture)}' is not "
        f"{terminal(incident)}'s: its sentences would describe this capture wrongly; use "
        f"--notebook {GENERAL_NOTEBOOK} (the general notebook, the default) for this capture, "
        f"or give it {terminal(incident)}'s capture {own}")
