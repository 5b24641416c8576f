"""The site registry: one module per site, registered here in pipeline order.

Each site module defines at module level (numpy only; torch is imported inside functions):

- ``NAME``: the site name;
- ``FIELDS``: its input :class:`~forensics.records.FieldSpec` tuple;
- ``OUTPUT_FIELDS``: input fields the call changes (recorded as ``<field>_after``);
- ``SUMMARY_BOUND``: the bound field a summary record carries beside ``min``/``max``;
- ``check_record(record, where)``: site-specific consistency checks beyond the schema;
- ``upstream(record)`` / ``patched(record)``: the models, returning a ``forensics.outcome.Outcome``;
- optionally ``prepare(records)`` and ``run_batch(prepared, patched) -> BatchRun``: the columnar
  run the replay uses (:mod:`forensics.sites.core`), ``upstream_many(records)`` /
  ``patched_many(records)`` and ``patch_inert(record)`` (true only where ``patched`` gives
  exactly ``upstream``'s outcome).

Third-party sites register through the entry-point group ``forensics.sites``
(:mod:`forensics.plugins`); each comes before the sink in pipeline order.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

from forensics.errors import UnknownSiteError
from forensics.plugins import SITES_GROUP, entry_points
from forensics.records import Record
from forensics.sites import async_output, batch_change, embedding, prepare_input_ids

#: Pipeline order: the order in which a step's sites run (and ties are broken towards the sink).
SITE_MODULES: dict[str, ModuleType] = {
    batch_change.NAME: batch_change,
    prepare_input_ids.NAME: prepare_input_ids,
    async_output.NAME: async_output,
    embedding.NAME: embedding,
}
SINK = embedding.NAME
#: what a site module must define (the optional parts: see the module docstring)
PROTOCOL = ("NAME", "FIELDS", "OUTPUT_FIELDS", "SUMMARY_BOUND", "SUMMARY_TENSOR", "upstream",
            "patched", "judge")


def _add_plugins() -> None:
    """Register the sites of the ``forensics.sites`` entry points, before the sink."""
    sink = SITE_MODULES.pop(SINK)
    for name, module in entry_points(SITES_GROUP):
        missing = [a for a in PROTOCOL if not hasattr(module, a)]
        if missing or module.NAME in SITE_MODULES or module.NAME == SINK:
            warnings.warn(f"forensics: skipping the site plugin {name!r}: "
                          f"{'it lacks ' + str(missing) if missing else 'its NAME is taken'}; "
                          f"a site module defines {list(PROTOCOL)}", stacklevel=2)
            continue
        SITE_MODULES[module.NAME] = module
    SITE_MODULES[SINK] = sink



def get_site(name: str) -> ModuleType:
    """Return the module of site ``name``; raise UnknownSiteError listing the valid sites."""
    try:
        return SITE_MODULES[name]
    except (KeyError, TypeError):
        raise UnknownSiteError(
            f"unknown site {name!r}; expected one of {list(SITES)}"
        ) from None


def first_out_of_bounds(record: Record, patched: bool = False) -> dict[str, Any] | None:
    """The first index or id of ``record``'s run (``patched``: the patched model) outside its
    valid range, as a finding dict (``row, element, tensor, kind, value, lower, upper,
    req_id``; lowest row, then element, unknown rows last), or None: the site's own columnar
    run and checks on a batch of one, for the probe's guard (host values in a Record).

    Raises:
        UnknownSiteError: the record's site is not registered.
    """
    module = get_site(record.site)
    prepare = getattr(module, "prepare", None)
    if prepare is not None:
        run = module.run_batch(prepare([record]), patched)
        found = run.checks.findings(run.req_ids).get(0, [])
    else:
        found = module.judge(record, getattr(module, "patched" if patched else "upstream")(
            record))
    bad = [f for f in found if f["kind"] == "out_of_bounds"]
    never = 2**62
    return min(bad, key=lambda f: (never if f["row"] is None else f["row"],
                                   never if f["element"] is None else f["element"]),
               default=None)


def site_order(name: str) -> int:
    """Position of ``name`` in pipeline order (raises UnknownSiteError)."""
    get_site(name)
    return SITES.index(name)


_add_plugins()  # last: a plugin module may import this package's functions
SITES: tuple[str, ...] = tuple(SITE_MODULES)
