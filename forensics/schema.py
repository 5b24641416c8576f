"""A site's schema: its name, fields, summary columns and the checks of a record's shape.

:class:`SiteSchema` is what the store, the records API and validation need to know of a site;
the runs and the judge live in :class:`forensics.sites.base.Site`, a subclass. Importing this
module imports no site: the store and validation look a site up in the registry
(:mod:`forensics.sites`), where every built-in and plugin site declares its schema beside its
models.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from forensics.records import FIELD_KINDS, FieldSpec, Record

#: the fields every summary record holds besides its bound: the least and greatest value of the
#: tensor it describes
SUMMARY_COMMON = ("min", "max")

if TYPE_CHECKING:
    import numpy as np

    from forensics.sites._common import BatchColumns


#: a site's name: what a capture's segment file names hold
#: (:data:`forensics.store.paths.SEGMENT_RE`; the records of a site named otherwise would be
#: written where no reader looks)
SITE_NAME = r"[a-z][a-z0-9_]{0,63}"


class SiteDefinitionError(TypeError):
    """A site declared with a malformed schema or operation (a programming error in the
    declaring module, raised when its ``Site(...)`` is built)."""


@dataclass(frozen=True, kw_only=True)
class SiteSchema:
    """The schema of one site.

    Attributes:
        name: the site name (:data:`SITE_NAME`), as records and capture files carry it.
        fields: the input fields a record of the site carries (required ones first is usual).
        output_fields: input fields the call changes, recorded as ``<field>_after``.
        summary_bound: the bound a summary record carries beside ``min`` / ``max``.
        summary_tensor: the tensor a summary record's ``min`` / ``max`` describe.
        check_record: cross-field checks of one record beyond the field schema,
            ``(record, where) -> None`` raising ``CaptureFormatError`` naming ``where`` and the
            field (None: none);
        check_batch: the same checks over a batch held as columns, the bool mask of the
            records they may reject (None: the store checks record by record).
    """

    name: str
    fields: tuple[FieldSpec, ...]
    output_fields: tuple[str, ...]
    summary_bound: str
    summary_tensor: str
    check_record: Callable[[Record, str], None] | None = None
    check_batch: Callable[[BatchColumns], np.ndarray] | None = None

    def __post_init__(self) -> None:
        where = f"site {self.name!r}"
        if not isinstance(self.name, str) or not re.fullmatch(SITE_NAME, self.name):
            raise SiteDefinitionError(f"a site's name must be 1-64 characters of a-z 0-9 _, "
                                      f"starting with a letter (a capture's file names hold "
                                      f"it), got {self.name!r}")
        if not isinstance(self.fields, tuple) or not all(
                isinstance(f, FieldSpec) for f in self.fields):
            raise SiteDefinitionError(f"{where}: 'fields' must be a tuple of "
                                      f"forensics.records.FieldSpec")
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise SiteDefinitionError(f"{where}: 'fields' names a field twice: {names}")
        bad_kinds = [f.name for f in self.fields if f.kind not in FIELD_KINDS]
        if bad_kinds:
            raise SiteDefinitionError(f"{where}: fields {bad_kinds} have an unknown kind; "
                                      f"expected one of {list(FIELD_KINDS)}")
        unknown = [o for o in self.output_fields if o not in names]
        if not isinstance(self.output_fields, tuple) or unknown:
            raise SiteDefinitionError(f"{where}: 'output_fields' must be a tuple of its field "
                                      f"names; not fields: {unknown}")
        for attr in ("summary_bound", "summary_tensor"):
            if not isinstance(getattr(self, attr), str) or not getattr(self, attr):
                raise SiteDefinitionError(f"{where}: {attr!r} must be a non-empty str")
        check_function(self, "check_record", required=False)
        check_function(self, "check_batch", required=False)

    @functools.cached_property
    def token_fields(self) -> frozenset[str]:
        """The fields that hold token ids (``FieldSpec.token_ids``), ``_after`` copies too."""
        return frozenset(n for n, spec in self.field_specs().items() if spec.token_ids)

    @functools.cached_property
    def token_bounds(self) -> tuple[str, ...]:
        """The fields that bound token ids (``FieldSpec.token_bound``)."""
        return tuple(spec.name for spec in self.fields if spec.token_bound)

    def summary_ids(self, tensor: object = None) -> frozenset[str]:
        """The fields of a summary record that hold token ids: ``min`` and ``max`` unless the
        tensor they describe (``tensor``: the record's own, else ``summary_tensor``; ``out.X``:
        the output ``X``) is a field of this site holding none, and an extra named like one of
        its token fields (:attr:`token_fields`)."""
        described = (tensor if isinstance(tensor, str) else self.summary_tensor)
        base = described.removeprefix("out.")
        plain = base in self.field_specs() and base not in self.token_fields
        return self.token_fields | frozenset(() if plain else SUMMARY_COMMON)

    def field_specs(self) -> dict[str, FieldSpec]:
        """Every field a full record of the site may carry, ``<field>_after`` outputs
        included (a new dict each call)."""
        specs = {spec.name: spec for spec in self.fields}
        for out in self.output_fields:
            base = specs[out]
            specs[f"{out}_after"] = FieldSpec(f"{out}_after", base.kind, base.ndim,
                                              required=False, token_ids=base.token_ids)
        return specs


def check_function(site: SiteSchema, attr: str, required: bool) -> None:
    """Raise SiteDefinitionError unless ``site.<attr>`` is callable (or None, if optional)."""
    value = getattr(site, attr)
    if not callable(value) and (value is not None or required):
        raise SiteDefinitionError(f"site {site.name!r}: {attr!r} must be a function, got "
                                  f"{type(value).__name__}")
