"""The site registry: the :class:`~forensics.sites.base.Site` of each site, in pipeline order.

Each built-in site is a module ending with ``SITE = Site(...)``, its schema and operations
(see :class:`~forensics.sites.base.Site`; numpy only: torch is imported inside functions).
Third-party sites come through the entry-point group ``forensics.sites``: each entry point
names a ``Site`` object (``my_package.my_site:SITE``; :mod:`forensics.plugins`); they come
before the sink in pipeline order. A plugin that is not a ``Site`` is skipped with a warning
naming what it lacks.
"""

from __future__ import annotations

from typing import Any

from forensics.errors import UnknownSiteError
from forensics.plugins import SITES_GROUP
from forensics.records import Record
from forensics.registry import Registry
from forensics.sites import (
    async_output,
    batch_change,
    combine_tokens,
    embedding,
    post_update,
    prepare_input_ids,
)
from forensics.sites.base import REQUIRED, Site

__all__ = ["REGISTRY", "SINK", "SITES", "Site", "first_out_of_bounds", "get_site", "site_order"]


def as_site(loaded: object) -> Site[Any]:
    """``loaded`` (what a ``forensics.sites`` entry point names) as a Site.

    Raises:
        TypeError: it is not a Site, naming what it lacks and the fix.
    """
    if isinstance(loaded, Site):
        return loaded
    missing = [name for name in REQUIRED if not hasattr(loaded, name)]
    what = "a module" if type(loaded).__name__ == "module" else type(loaded).__name__
    raise TypeError(f"it names {what}, not a forensics.sites.Site"
                    f"{' (it lacks ' + ', '.join(missing) + ')' if missing else ''}; declare "
                    f"SITE = forensics.sites.Site(...) in the plugin's module and point the "
                    f"entry point at it ('my_package.my_site:SITE')")


#: name -> Site, in pipeline order: the order in which a step's sites run (ties are broken
#: towards the sink)
REGISTRY: Registry[Site[Any]] = Registry(
    "site", UnknownSiteError, group=SITES_GROUP, accept=as_site, name_of=lambda s: s.name,
    plugins_before=embedding.NAME)
for _module in (batch_change, prepare_input_ids, async_output, post_update, combine_tokens,
                embedding):
    REGISTRY.register(_module.SITE.name, _module.SITE)
SINK = embedding.SITE.name


def get_site(name: str) -> Site[Any]:
    """Return the Site called ``name``; raise UnknownSiteError listing the valid sites."""
    return REGISTRY.get(name)


def first_out_of_bounds(record: Record, patched: bool = False) -> dict[str, Any] | None:
    """The first index or id of ``record``'s run (``patched``: the patched model) outside its
    valid range, as a finding dict (``row, element, tensor, kind, value, lower, upper,
    req_id``; lowest row, then element, unknown rows last), or None: the site's own columnar
    run and checks on a batch of one, for the probe's guard (host values in a Record).

    Raises:
        UnknownSiteError: the record's site is not registered.
    """
    site = get_site(record.site)
    run = site.run_records([record], patched)
    if run is not None:
        found = run.checks.findings(run.req_ids).get(0, [])
    else:
        found = site.judge(record, site.model(patched)(record))
    bad = [f for f in found if f["kind"] == "out_of_bounds"]
    never = 2**62
    return min(bad, key=lambda f: (never if f["row"] is None else f["row"],
                                   never if f["element"] is None else f["element"]),
               default=None)


def site_order(name: str) -> int:
    """Position of ``name`` in pipeline order (raises UnknownSiteError)."""
    get_site(name)
    return SITES.index(name)


REGISTRY.load_plugins()  # last: a plugin module may import this package's functions
SITES: tuple[str, ...] = tuple(REGISTRY.names())
