"""How a batch of ready records reaches a capture writer: the one write path of the probe.

Records made only of joined copies go column-wise (:mod:`forensics.probe.columns`: one Arrow
batch per site and rank, the site's checks over the whole batch); the others one by one
(trusted ``append(validated=True)`` for records made only of the probe's own copies or plain
Python values, the checked ``append`` otherwise); then the writer fsyncs them. A record that
fails its checks is dropped and reported; an error of the writer drops the batch and is
reported. Used by the session's writer thread and by the writer process
(:mod:`forensics.probe.writer_process`) alike.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.errors import CaptureFormatError
from forensics.probe.copy import PendingRecord
from forensics.records import Record
from forensics.validate import (
    most_items,
    remember_signature,
    site_field_specs,
    validate_record,
    value_signature,
)

if TYPE_CHECKING:
    from forensics.probe.columns import Block

#: called with one of the probe's own errors and where it happened
Report = Callable[[BaseException, str], None]
#: called with a count's name and how much to add to it
Count = Callable[[str, int], None]


class BatchWriter:
    """Writes batches of ready records to ``writer`` (a CaptureWriter or a stand-in); the
    probe's own errors go to ``report``, the ``written`` and ``dropped`` counts to ``count``."""

    def __init__(self, writer: Any, report: Report, count: Count) -> None:
        self.writer, self.report, self.count = writer, report, count

    def write(self, ready: list[PendingRecord]) -> int:
        """Write ``ready`` and fsync it; return how many records the capture took."""
        from forensics.probe import columns  # pyarrow: loaded at the first write

        writer = self.writer
        blocks, others = columns.runs(ready) if hasattr(writer, "write_columns") \
            else ([], ready)
        written = sum(self._write_block(block) for block in blocks) + self._append(others)
        try:
            writer.flush()
        except Exception as exc:
            self.count("dropped", written)
            self.report(exc, "flushing the capture")
            return 0
        self.count("written", written)
        return written

    def _write_block(self, block: Block) -> int:
        """Write a block of records column-wise (see forensics.probe.columns); return how many
        were written. A block the segment's schema cannot take goes record by record."""
        from forensics.probe import columns

        kept = columns.screened(block, self.reject)
        if kept is None:
            return 0
        try:
            columns.write_run(self.writer, kept)
        except CaptureFormatError:  # the open segment has other columns: the writer merges
            return self._append(kept.pendings)
        except Exception as exc:
            self.count("dropped", kept.rows)
            self.report(exc, f"writing {kept.rows} {kept.site} records")
            return 0
        return kept.rows

    def _append(self, ready: list[PendingRecord]) -> int:
        """Hand ``ready`` to the writer one record at a time; return how many it took.

        Records of trusted values (:func:`trusted`) take ``append(validated=True)``: the
        site's columnar screen runs over all of them at once (per site and signature,
        :func:`forensics.probe.columns.unflagged`) and ``validate_record`` only on those it
        flags. The others get the writer's checked ``append``."""
        from forensics.probe.columns import unflagged

        taken: list[tuple[PendingRecord, Record, Any]] = []
        for pending in ready:
            try:
                record = pending.to_record()
                signature = value_signature(record)
                taken.append((pending, record, signature if trusted(record, signature)
                              else None))
            except Exception as exc:
                self.reject(pending, exc)
        checked = [i for i, item in enumerate(taken) if item[2] is not None]
        try:
            passed = {checked[i] for i in unflagged([taken[i][1:] for i in checked])}
        except Exception:  # a screen that cannot run: every trusted record checked singly
            passed = set()
        return sum(self._append_one(*item, i in passed) for i, item in enumerate(taken))

    def _append_one(self, pending: PendingRecord, record: Record, signature: Any,
                    screened: bool) -> int:
        """Append one record (see :meth:`_append`); 1 if the writer took it, else 0."""
        try:
            if signature is None:  # values taken from vLLM's Python state: checked append
                self.writer.append(record)
                return 1
            if not screened:
                validate_record(record, f"probe record of step {record.step}", typed=True,
                                signature=signature)
            self.writer.append(record, validated=True)
            return 1
        except Exception as exc:
            self.reject(pending, exc)
            return 0

    def reject(self, pending: PendingRecord, exc: Exception) -> None:
        """Drop ``pending`` (it failed its checks or the writer refused it) with an event."""
        self.count("dropped", 1)
        self.report(exc, f"appending a {pending.site} record (step {pending.step})")


#: per value signature: the list and dict fields to check per record, or None (not trusted)
_TRUSTED: dict[tuple[Any, ...], tuple[tuple[str, str], ...] | None] = {}
_CONTENT_KINDS = {"str_list": list, "opt_str_list": list, "index_map": dict, "ragged": list}
_INT64 = (-(2**63), 2**63 - 1)


def trusted(record: Record, signature: tuple[Any, ...]) -> bool:
    """True when every value of ``record`` is a numpy integer array of its field's rank, a
    plain ``int`` (what the probe's own copies produce), a list of ``str`` (``None`` too where
    the field allows it), a dict of ``str`` to int64 ``int`` or a list of lists of int64
    ``int`` (request ids, the previous batch, output tails, read from vLLM's Python state:
    their items are checked here, per record, in a few C-level passes), under a name of its
    site's schema: such a record takes the writer's trusted ``append(validated=True)`` after
    the typed check (names, required fields, cross-field checks). Anything else keeps the
    writer's full checks. What the signature pins down (names, types, ranks) is answered once
    per value ``signature``."""
    checks = _TRUSTED.get(signature, _UNKNOWN)
    if checks is _UNKNOWN:
        checks = _content_checks(record)
        remember_signature(_TRUSTED, signature, checks)
    if checks is None:
        return False
    fields = record.fields
    return all(_plain_items(kind, fields[name]) for name, kind in checks)


_UNKNOWN: Any = object()


def _content_checks(record: Record) -> tuple[tuple[str, str], ...] | None:
    """The (name, kind) of the list and dict fields of ``record`` whose items must be checked
    per record, or None when some value is of no trusted kind."""
    if record.summary:
        return None
    try:
        specs = site_field_specs(record.site)
    except Exception:  # an unknown site: the checked append names it
        return None
    checks: list[tuple[str, str]] = []
    for name, value in record.fields.items():
        spec = specs.get(name)
        if spec is None:
            return None
        if spec.kind == "tensor":
            if (type(value) is not np.ndarray or value.dtype.kind not in "iu"
                    or value.ndim != spec.ndim):
                return None
        elif type(value) is _CONTENT_KINDS.get(spec.kind):
            checks.append((name, spec.kind))
        elif spec.kind != "int" or type(value) is not int:
            return None
    return tuple(checks)


def _plain_items(kind: str, value: Any) -> bool:
    """True when the items of the list or dict ``value`` are what its ``kind`` stores as is:
    strings (valid Unicode; ``None`` too in an ``opt_str_list``), and for an ``index_map``
    int64 ``int`` values; for a ``ragged`` field, lists of int64 ``int``; and no more of them
    than a reader takes in one row (:func:`~forensics.validate.most_items`: past it, the
    checked append refuses the record, which is dropped with an event naming the field, where
    the trusted one wrote a record every reader then refused)."""
    held = most_items(kind)
    if held is not None and len(value) > held[0]:
        return False
    if kind == "ragged":
        return not set(map(type, value)) - {list} and _int64s(list(chain.from_iterable(value)))
    if kind == "index_map" and not _int64s(list(value.values())):
        return False
    texts = [v for v in value if v is not None] if kind == "opt_str_list" else value
    if set(map(type, texts)) - {str}:
        return False
    try:
        "".join(texts).encode("utf-8")  # a lone surrogate cannot be stored
    except UnicodeEncodeError:
        return False
    return True


def _int64s(numbers: list[Any]) -> bool:
    """True when every item of ``numbers`` is an ``int`` within int64."""
    return not set(map(type, numbers)) - {int} and (not numbers or (
        _INT64[0] <= min(numbers) and max(numbers) <= _INT64[1]))


def error_text(exc: BaseException) -> str:
    """One line naming ``exc``'s type and message, as events keep it."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()
