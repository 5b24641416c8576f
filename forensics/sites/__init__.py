"""The site registry: one module per site, registered here in pipeline order.

Each site module defines at module level (numpy only; torch is imported inside functions):

- ``NAME``: the site name;
- ``FIELDS``: its input :class:`~forensics.records.FieldSpec` tuple;
- ``OUTPUT_FIELDS``: input fields the call changes (recorded as ``<field>_after``);
- ``SUMMARY_BOUND``: the bound field a summary record carries beside ``min``/``max``;
- ``check_record(record, where)``: site-specific consistency checks beyond the schema;
- ``upstream(record)`` / ``patched(record)``: the models, returning a ``forensics.outcome.Outcome``;
- optionally ``upstream_many(records)`` / ``patched_many(records)`` (vectorised) and
  ``patch_inert(record)`` (true only where ``patched`` gives exactly ``upstream``'s outcome).
"""

from __future__ import annotations

from types import ModuleType

from forensics.errors import UnknownSiteError
from forensics.sites import async_output, batch_change, embedding, prepare_input_ids

#: Pipeline order: the order in which a step's sites run (and ties are broken towards the sink).
SITE_MODULES: dict[str, ModuleType] = {
    batch_change.NAME: batch_change,
    prepare_input_ids.NAME: prepare_input_ids,
    async_output.NAME: async_output,
    embedding.NAME: embedding,
}
SITES: tuple[str, ...] = tuple(SITE_MODULES)
SINK = embedding.NAME


def get_site(name: str) -> ModuleType:
    """Return the module of site ``name``; raise UnknownSiteError listing the valid sites."""
    try:
        return SITE_MODULES[name]
    except (KeyError, TypeError):
        raise UnknownSiteError(
            f"unknown site {name!r}; expected one of {list(SITES)}"
        ) from None


def site_order(name: str) -> int:
    """Position of ``name`` in pipeline order (raises UnknownSiteError)."""
    get_site(name)
    return SITES.index(name)
