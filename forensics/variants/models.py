"""The model variants ``upstream`` and ``patched`` (the project's own reading of vLLM 0.33.0).

Each runs a site's columnar run (``Site.run_batch``): ``run_batch`` over a batch (the
replay's path), ``run`` on one record (``Site.upstream`` / ``Site.patched``, a batch of one).
Variants never judge.
"""

from __future__ import annotations

from typing import Any

from forensics.outcome import Outcome
from forensics.records import Record
from forensics.sites import get_site
from forensics.sites.core import BatchRun


class ModelVariant:
    """A model variant: ``kind`` names the model (upstream or patched) of each site's run."""

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
        ``prepared`` is the site's ``prepared(cols)``, shared by the model variants."""
        return get_site(site).run_batch(prepared, self.kind == "patched")

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

