"""The model variants ``upstream`` and ``patched`` (the project's own reading of vLLM 0.33.0).

Each runs a record through its site module's ``upstream`` / ``patched`` model and fills
``Outcome.accesses``; ``run_batch`` runs a site's columnar run (the replay's path for a site
that has one). Variants never judge.
"""

from __future__ import annotations

from typing import Any

from forensics.errors import UnknownSiteError
from forensics.outcome import Outcome
from forensics.records import Record
from forensics.sites import get_site
from forensics.sites.core import BatchRun


class ModelVariant:
    """A model variant: ``kind`` names the model function of each site module."""

    name = "model"
    kind = "upstream"

    def run(self, record: Record) -> Outcome:
        """The outcome of the model on ``record`` (never raises for a failing call: the
        outcome is ``index_error`` or ``error`` with the message).

        Raises:
            UnknownSiteError: the record's site is not registered.
        """
        return get_site(record.site).model(self.kind == "patched")(record)

    def run_batch(self, site: str, prepared: Any) -> BatchRun:
        """The columnar run of records of ``site`` (none a summary) as the judge reads it;
        ``prepared`` is the site's ``prepare(records)``, shared by the model variants."""
        run_batch = get_site(site).run_batch
        if run_batch is None:
            raise UnknownSiteError(f"site {site!r} has no columnar run (no 'run_batch')")
        return run_batch(prepared, self.kind == "patched")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class UpstreamVariant(ModelVariant):
    """``upstream``: vLLM 0.33.0 behaviour, every path of DESIGN.md included."""

    name = "upstream"
    kind = "upstream"


class PatchedVariant(ModelVariant):
    """``patched``: the model with the guards of DESIGN.md (stale rows, vocabulary)."""

    name = "patched"
    kind = "patched"

