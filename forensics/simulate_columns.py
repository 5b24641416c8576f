"""Long simulations written fast: many steps' fields encoded as one Arrow record batch per site.

:class:`StepColumns` gathers the compact :class:`~forensics.simulate.StepFields` of a block of
steps, field by field, and encodes each site's columns in a few numpy calls: request ids are
spelled out once per distinct id, output tails are built from their counts. The batches are the
ones :func:`~forensics.store.writer.write_capture` would write for the same records (a test
compares the segment files byte for byte), without a :class:`~forensics.records.Record`, a
Python string or a list per row. :func:`write_simulation` runs a simulator into a new capture.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from forensics.simulate import Derived, Simulator, StepFields
from forensics.store import arrow_numpy as an
from forensics.store.arrow_codec import ColumnSig, arrow_type, encode_field
from forensics.store.writer import FLUSH_EVERY, CaptureWriter, new_capture

SITES_PER_STEP = 4
_KINDS = {Derived.REQ_IDS: "str_list", Derived.PREV_REQ_IDS: "opt_str_list",
          Derived.OUTPUT_TAIL: "ragged"}


class StepColumns:
    """The fields of a block of steps, kept per site and field until :meth:`encode`."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self._rids: list[np.ndarray] = []
        self._prev_rids: list[np.ndarray] = []
        self._discarded: list[tuple[int, int]] = []  # (step in the block, previous row)
        self._tails: list[np.ndarray] = []
        self._layout: dict[str, dict[str, Any]] = {}  # site -> field -> Derived, or None
        self._values: dict[str, list[tuple[str, list[Any]]]] = {}

    def __len__(self) -> int:
        return len(self.steps)

    def add(self, fields: StepFields) -> None:
        """Keep one step's fields (its arrays are kept, not copied).

        Raises ValueError when a site's fields differ from the first step's."""
        if not self._layout:
            self._start(fields)
        if fields.discarded:
            self._discarded.extend((len(self.steps), row) for row in fields.discarded)
        self.steps.append(fields.step)
        self._rids.append(fields.rids)
        self._prev_rids.append(fields.prev_rids)
        self._tails.append(fields.tails)
        for site, values in fields.sites.items():
            if len(values) != len(self._layout[site]):
                raise ValueError(f"step {fields.step}: {site} fields {sorted(values)} differ "
                                 f"from the block's {sorted(self._layout[site])}")
            for name, column in self._values[site]:
                column.append(values[name])

    def _start(self, fields: StepFields) -> None:
        for site, values in fields.sites.items():
            self._layout[site] = {name: value if type(value) is Derived else None
                                  for name, value in values.items()}
            self._values[site] = [(name, []) for name, value in values.items()
                                  if type(value) is not Derived]

    def encode(self, rank: int) -> list[tuple[str, dict[str, ColumnSig], dict[str, pa.Array]]]:
        """Each site's column signature and Arrow columns for rank ``rank``, in site order,
        ready for :meth:`~forensics.store.writer.CaptureWriter.write_columns`."""
        count = len(self.steps)
        shared: dict[str, pa.Array] = {
            "step": an.primitive(np.array(self.steps, dtype=np.int64)),
            "rank": an.primitive(np.full(count, rank, dtype=np.int64)),
            "summary": an.primitive(np.zeros(count, dtype=bool)),
        }
        derived = self._derived()
        out = []
        for site, layout in self._layout.items():
            columns: dict[str, ColumnSig] = {}
            arrays = dict(shared)
            values = dict(self._values[site])
            for name, kind in layout.items():
                if kind is not None:
                    columns[name] = (_KINDS[kind], "")
                    arrays[name] = derived[kind]
                    continue
                column = values[name]
                sig = _signature(site, name, column)
                columns[name] = sig
                arrays.update(encode_field(name, *sig, column))
            out.append((site, columns, arrays))
        return out

    def _derived(self) -> dict[Derived, pa.Array]:
        """The request-id and output-tail columns, shared by every site of the block."""
        rids, lengths = _flat(self._rids)
        prev_rids, prev_lengths = _flat(self._prev_rids)
        discarded = np.zeros(len(prev_rids), dtype=bool)
        if self._discarded:
            starts = np.cumsum(prev_lengths) - prev_lengths
            where = np.array(self._discarded, dtype=np.int64)
            discarded[starts[where[:, 0]] + where[:, 1]] = True
        return {
            Derived.REQ_IDS: an.lists(lengths, _request_ids(rids), None,
                                      arrow_type("str_list")),
            Derived.PREV_REQ_IDS: an.lists(prev_lengths, _request_ids(prev_rids, discarded),
                                           None, arrow_type("opt_str_list")),
            Derived.OUTPUT_TAIL: _output_tails(self._tails, lengths),
        }


def _signature(site: str, name: str, column: list[Any]) -> ColumnSig:
    """The column type of a field's values (all of one type, as the record path requires)."""
    types = {value.dtype if isinstance(value, np.ndarray) else type(value) for value in column}
    first = column[0]
    if len(types) == 1 and isinstance(first, np.ndarray) and first.dtype.kind in "iu":
        return ("tensor", first.dtype.newbyteorder("=").name)
    if types == {int}:
        return ("int", "")
    raise TypeError(f"{site}.{name}: simulated values of types {sorted(map(str, types))}; "
                    "expected integer arrays of one dtype, or ints")


def _flat(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The arrays joined, and each one's length."""
    lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    return np.concatenate(arrays), lengths


def _request_ids(rids: np.ndarray, discarded: np.ndarray | None = None) -> pa.Array:
    """``req-<id>`` of each id as a string array (null where ``discarded``)."""
    ids, codes = np.unique(rids, return_inverse=True)
    words: list[str | None] = [f"req-{i}" for i in ids.tolist()]
    if discarded is not None and discarded.any():
        words.append(None)
        codes = np.where(discarded, len(words) - 1, codes)
    return an.coded_strings(words, codes)


def _output_tails(tails: list[np.ndarray], lengths: np.ndarray) -> pa.Array:
    """Each row's output tail (see :func:`forensics.simulate.output_tail`) as list<list<int64>>:
    the id before the placeholders, when the list holds one, then the placeholders."""
    size, placeholders, last = np.concatenate(tails, axis=1)
    has_id = size > placeholders
    inner = np.where(has_id, placeholders + 1, size)
    values = np.full(int(inner.sum()), -1, dtype=np.int64)
    starts = np.cumsum(inner) - inner
    values[starts[has_id]] = last[has_id]
    return an.lists(lengths, an.lists(inner, an.primitive(values)), None, arrow_type("ragged"))


def block_steps(ranks: int) -> int:
    """Steps per record batch: as many as :func:`~forensics.store.writer.write_capture` puts
    in one flush (``FLUSH_EVERY`` records), at least one."""
    return max(1, FLUSH_EVERY // (SITES_PER_STEP * ranks))


def write_steps(writer: CaptureWriter, simulator: Simulator, steps: int) -> None:
    """Run ``simulator`` for ``steps`` steps, writing each block of steps as one record batch
    per site and rank."""
    ranks = simulator.scenario.ranks
    block = StepColumns()
    size = block_steps(ranks)
    for _ in range(steps):
        block.add(simulator.advance())
        if len(block) == size:
            _write_block(writer, block, ranks)
            block = StepColumns()
    if len(block):
        _write_block(writer, block, ranks)


def _write_block(writer: CaptureWriter, block: StepColumns, ranks: int) -> None:
    batches = [(site, rank, columns, arrays) for rank in range(ranks)
               for site, columns, arrays in block.encode(rank)]
    for site, rank, columns, arrays in sorted(batches, key=lambda b: (b[0], b[1])):
        writer.write_columns(site, rank, columns, arrays)


def write_simulation(path: str | os.PathLike[str], simulator: Simulator, steps: int,
                     manifest: dict[str, Any] | None = None, force: bool = False) -> Path:
    """Run ``simulator`` for ``steps`` steps into a new capture at ``path``; return the path.

    Raises:
        OutputExistsError: ``path`` exists and ``force`` is false, or it is not a capture.
    """
    with new_capture(path, manifest, force) as writer:
        write_steps(writer, simulator, steps)
    return Path(path)
