"""The site registry: the :class:`~forensics.sites.base.Site` of each site, in pipeline order.

Each built-in site is a module (or a package: ``async_output``, ``prepare_input_ids``) whose
code ends with ``SITE = Site(...)``, its schema and operations
(see :class:`~forensics.sites.base.Site`; numpy only: torch is imported inside functions).
Third-party sites come through the entry-point group ``forensics.sites``: each entry point
names a ``Site`` object (``my_package.my_site:SITE``; :mod:`forensics.plugins`); they come
before the sink in pipeline order. A plugin that is not a ``Site`` is skipped with a warning
naming what it lacks.

The plugin API is what this package exports (:data:`PLUGIN_API`): a plugin site needs nothing
from the private modules (``CONTRIBUTING.md``, "A site of your own", shows a complete one).
"""

from __future__ import annotations

import functools
from typing import Any

from forensics.errors import UnknownSiteError
from forensics.outcome import Outcome
from forensics.plugins import SITES_GROUP
from forensics.records import FieldSpec, Record
from forensics.registry import Registry
from forensics.sites import (
    async_output,
    batch_change,
    combine_tokens,
    embedding,
    post_update,
    prepare_input_ids,
    rejection_drafts,
)
from forensics.sites._common import RunColumns, Violation, first_violation
from forensics.sites.base import REQUIRED, LogLine, Site
from forensics.sites.core import BatchRun, CheckList, Checks, owner, within

#: what a third-party site builds itself from: its schema (``FieldSpec``), its run over a batch
#: of records held as columns (``RunColumns`` in, ``BatchRun`` of ``Checks`` out; ``owner`` and
#: ``within`` place flat values in their records and rows), the checks of another variant's
#: ``Outcome``, the probe's per-call check (``Violation``, ``first_violation``), a text log's
#: line (``LogLine``) and the ``Site`` itself
PLUGIN_API = ("BatchRun", "CheckList", "Checks", "FieldSpec", "LogLine", "Outcome", "Record",
              "RunColumns", "Site", "Violation", "first_violation", "owner", "within")
__all__ = ["ORIGIN_CHAIN", "PLUGIN_API", "REGISTRY", "SINK", "SITES", "get_site", "hooked_at",
           "hooked_by", "hooked_sites", "pipeline_key", "site_order",
           "BatchRun", "CheckList", "Checks", "FieldSpec", "LogLine", "Outcome", "Record",
           "RunColumns", "Site", "Violation", "first_violation", "owner", "within"]


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
for _module in (batch_change, prepare_input_ids, async_output, rejection_drafts, post_update,
                combine_tokens, embedding):
    REGISTRY.register(_module.SITE.name, _module.SITE)
SINK = embedding.SITE.name


def get_site(name: str) -> Site[Any]:
    """Return the Site called ``name``; raise UnknownSiteError listing the valid sites."""
    return REGISTRY.get(name)


def site_order(name: str) -> int:
    """Position of ``name`` in pipeline order (raises UnknownSiteError)."""
    get_site(name)
    return SITES.index(name)


def origin_chain(names: tuple[str, ...]) -> tuple[str, ...]:
    """The sites of ``names`` (pipeline order) that may be an origin, the sink excluded,
    farthest from the sink first: by ``Site.origin_position``, else pipeline position."""
    def place(name: str) -> float:
        declared = get_site(name).origin_position
        return names.index(name) if declared is None else declared

    return tuple(sorted((n for n in names if n != SINK and get_site(n).origin), key=place))


def hooked_sites() -> tuple[str, ...]:
    """The sites the probe can record (those naming a ``Site.hook``), in pipeline order."""
    return tuple(name for name in SITES if get_site(name).hook is not None)


def reproducible_sites() -> list[str]:
    """The sites whose module declares a repro (``Site.repro``: ``forensics repro`` writes a
    test for them), in pipeline order."""
    return [name for name in SITES if get_site(name).repro is not None]


@functools.cache
def hooked_by() -> dict[str, str]:
    """vLLM function qualname (``Class.method`` or a module global) -> the registered site
    whose ``Site.hook`` names it: the site recording (or simulating) that function's calls."""
    return {hook.partition(":")[2]: name for hook, name in hooked_at().items()}


@functools.cache
def hooked_at() -> dict[str, str]:
    """vLLM function as ``Site.hook`` names it (``module:qualname``) -> the registered site
    whose hook it is (:func:`hooked_by`, told apart by module: a site may share its name with
    the vLLM function it records)."""
    return {hook: name for name in hooked_sites() if (hook := get_site(name).hook) is not None}


def pipeline_key(record: Record) -> tuple[int, int, int]:
    """Sort key of ``record`` in pipeline order: (step, rank, site order)."""
    return (record.step, record.rank, site_order(record.site))


REGISTRY.load_plugins()  # last: a plugin module may import this package's functions
SITES: tuple[str, ...] = tuple(REGISTRY.names())
#: the sites whose values may be the origin of a sink finding, farthest from the sink first
#: (at equal steps the origin goes to the one nearer the sink)
ORIGIN_CHAIN = origin_chain(SITES)
