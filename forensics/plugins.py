"""Third-party sites and variants, found through entry points (no edit of this package).

A distribution declares, in its ``pyproject.toml``::

    [project.entry-points."forensics.sites"]
    my_site = "my_package.my_site:SITE"   # a forensics.sites.Site object

    [project.entry-points."forensics.variants"]
    my_fix = "my_package.variants:MyFix"  # a factory called with no argument

A plugin that fails to load, or is not what its group needs (a ``Site``; a variant factory), is
skipped with a warning naming it and the reason (it never breaks ``import forensics``). Each
registry (:class:`forensics.registry.Registry`) reads its group once.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

from forensics.errors import reason

SITES_GROUP, VARIANTS_GROUP = "forensics.sites", "forensics.variants"


def entry_points(group: str) -> Iterator[tuple[str, Any]]:
    """``(name, loaded object)`` of each entry point of ``group`` that loads."""
    from importlib.metadata import entry_points as found

    for point in found(group=group):
        try:
            yield point.name, point.load()
        except Exception as exc:  # noqa: BLE001  (a broken plugin is skipped, not fatal)
            warnings.warn(f"forensics: skipping the {group} plugin {point.name!r} "
                          f"({point.value}): {type(exc).__name__}: {reason(exc)}; fix or uninstall "
                          f"the distribution that declares it", stacklevel=2)
