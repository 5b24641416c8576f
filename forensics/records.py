"""The Record type, the field-spec vocabulary, and record validation against a site's schema.

A record is one call of one site (see DESIGN.md): ``site``, ``step``, ``rank``, the site's input
fields and, when the probe recorded them, output fields named ``<field>_after``.

Field values held by a :class:`Record` (numpy keeps ``import forensics`` light; ``Record.tensor``
gives a zero-copy torch view):

========== ==================================================================
kind       Python value
========== ==================================================================
tensor     ``numpy.ndarray`` of an integer dtype (width as captured), ndim 1 or 2
int        ``int``
str_list   ``list[str]``
opt_str_list ``list[str | None]`` (``None``: a discarded row)
index_map  ``dict[str, int]``
ragged     ``list[list[int]]`` (one list per batch row)
========== ==================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.digits import plain_int
from forensics.errors import CaptureFormatError

#: the prefix of a record's own column named like one of ours (``open_many``'s ``capture``,
#: ``to_frame``'s ``<field>_len``): ``extra.NAME``, so it never takes our column's place
EXTRA_PREFIX = "extra."
#: the range of an int64: an int field's, and every integer column's of a capture
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: the ``limits`` of an int field that counts or sizes something (0 allowed), and of one that
#: must be positive
COUNT, POSITIVE = (0, INT64_MAX), (1, INT64_MAX)
#: a record's rank is below this: a capture's segment file names hold a rank of at most six
#: digits (:data:`forensics.store.paths.SEGMENT_RE`), a larger one's records would be read by
#: no one
MAX_RANK = 10**6

if TYPE_CHECKING:
    import torch

#: the most keys a field's dict holds (an ``index_map``: one per request of a batch, which
#: vLLM's ``max_num_seqs`` bounds, 256 or 1024 by default), counted before it is built (by the
#: importers, and from a capture's map column): a dict of a million keys (each ``{}``) took
#: 2.2 s and 250 MB to parse before its record was refused
MAX_FIELD_KEYS = 1 << 16
#: the most JSON lists and objects a header (and each ``__metadata__`` text), or an ``.npz``'s
#: JSON texts together, may hold, counted before it is parsed: an empty list is 2 bytes of JSON
#: and 56 of Python. A record's lists are its ragged fields' rows (one per request of a batch)
#: and its dicts a few: four fields of :data:`MAX_FIELD_KEYS` rows (a million ``{}`` were 3 MB
#: of JSON within the cap of 1 << 20 it was, and 0.5 s and 100 MB to parse before their
#: record was refused); a capture's ragged field holds at most as many lists
MAX_CONTAINERS = 4 * MAX_FIELD_KEYS

FIELD_KINDS = ("tensor", "int", "str_list", "opt_str_list", "index_map", "ragged")


@dataclass(frozen=True)
class FieldSpec:
    """One field of a site's schema: its name, kind, tensor rank and whether it is required;
    ``token_ids``: its values are token ids (redaction permutes them); ``token_bound``: it
    bounds the token ids (``vocab_size``: redaction permutes the ids below every such bound);
    ``rank_shared``: every rank of one tensor-parallel engine holds the same values (a rank
    divergence there is a finding, :mod:`forensics.fleet.stitch`); ``limits``: the range an
    ``int`` field (a count or a bound) lies in, both ends included (None: any int64), checked
    when records are read and by the generated repro (:mod:`forensics.share.repro`)."""

    name: str
    kind: str
    ndim: int = 1
    required: bool = True
    doc: str = ""
    token_ids: bool = False
    token_bound: bool = False
    rank_shared: bool = False
    limits: tuple[int, int] | None = None


@dataclass
class Record:
    """One call of one site. ``fields`` maps field names to values (see the module docstring)."""

    site: str
    step: int
    rank: int = 0
    fields: dict[str, Any] = field(default_factory=dict)
    summary: bool = False

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    def __contains__(self, name: object) -> bool:
        return name in self.fields

    def get(self, name: str, default: Any = None) -> Any:
        """Return the field ``name``, or ``default`` when the record does not carry it."""
        return self.fields.get(name, default)

    def tensor(self, name: str) -> torch.Tensor:
        """Return the tensor field ``name`` as a torch tensor sharing memory with the record.

        Arrays read from a capture are read-only views of the segment's memory map: treat the
        tensor as read-only and ``.clone()`` it before handing it to code that writes in place.
        """
        import warnings

        import torch

        array = np.asarray(self.fields[name])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # read-only arrays: zero-copy on purpose
            return torch.from_numpy(array)


def _expect(cond: bool, where: str, name: str, expected: str, got: object) -> None:
    if not cond:
        raise CaptureFormatError(
            f"{where}: field {name!r} must be {expected}, got {_describe(got)}; "
            f"fix the producer or the dump"
        )


def _describe(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"array dtype={value.dtype} shape={tuple(value.shape)}"
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}"


def check_value(spec: FieldSpec, value: Any, where: str) -> Any:
    """Validate and normalise one field value against ``spec``; return the normalised value.

    Raises:
        CaptureFormatError: naming ``where`` (file and record), the field and what was expected.
    """
    if spec.kind == "tensor":
        array = np.asarray(value) if not isinstance(value, np.ndarray) else value
        _expect(array.dtype.kind in "iu", where, spec.name, "an integer tensor", value)
        _expect(array.ndim == spec.ndim, where, spec.name, f"{spec.ndim}-dimensional", value)
        return array
    if spec.kind == "int":
        ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
            ok, value = True, value.item()
        _expect(ok, where, spec.name, "an integer", value)
        _expect(INT64_MIN <= int(value) <= INT64_MAX, where, spec.name,
                "an integer int64 holds (a capture stores it as one)", value)
        return int(value)
    if spec.kind in ("str_list", "opt_str_list"):
        ok = isinstance(value, (list, tuple)) and all(
            isinstance(v, str) or (v is None and spec.kind == "opt_str_list") for v in value
        )
        _expect(ok, where, spec.name, "a list of str", value)
        return list(value)
    if spec.kind == "index_map":
        ok = isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, (int, np.integer)) and not isinstance(v, bool)
            for k, v in value.items()
        )
        _expect(ok, where, spec.name, "a dict of str to int", value)
        return {k: int(v) for k, v in value.items()}
    if spec.kind == "ragged":
        rows = [np.asarray(r).tolist() if isinstance(r, np.ndarray) else r for r in value] \
            if isinstance(value, (list, tuple)) else None
        ok = rows is not None and all(
            isinstance(r, list) and all(plain_int(v) for v in r)
            for r in rows
        )
        _expect(ok, where, spec.name, "a list of lists of int", value)
        return rows
    raise AssertionError(f"unknown field kind {spec.kind!r}")
