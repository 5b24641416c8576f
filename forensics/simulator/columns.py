"""Long simulations written fast: many steps' fields encoded as one Arrow record batch per site.

:class:`StepColumns` gathers the compact :class:`~forensics.simulator.runs.StepFields` of a block of
steps, field by field, and encodes each site's columns in a few numpy calls: request ids are
spelled out once per distinct id, output tails are built from their counts. The batches are the
ones :func:`~forensics.store.writer.write_capture` would write for the same records (a test
compares the segment files byte for byte), without a :class:`~forensics.records.Record`, a
Python string or a list per row. :func:`write_simulation` runs a simulator into a new capture.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from forensics.errors import CaptureFormatError, reason
from forensics.escaping import terminal
from forensics.progress import Progress
from forensics.simulator.step import Derived, StepFields, request_names
from forensics.store import arrow_numpy as an
from forensics.store.arrow_codec import (
    SHAPE_SUFFIX,
    ColumnSig,
    arrow_type,
    columns_of,
    encode_field,
    encode_stacked_tensor,
)
from forensics.store.writer import FLUSH_EVERY, CaptureWriter, new_capture

if TYPE_CHECKING:
    from forensics.simulator.runs import Simulator


class StepColumns:
    """The fields of a block of steps, kept per site and field until :meth:`encode`."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self._rids: list[np.ndarray] = []
        self._prev_rids: list[np.ndarray] = []
        self._discarded: list[tuple[int, int]] = []  # (step in the block, previous row)
        self._tails: list[np.ndarray] = []
        self._layout: dict[str, dict[str, Any]] = {}  # site -> field -> Derived, or None
        self._first: dict[str, dict[str, Any]] = {}  # site -> the first step's fields
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
            self._first[site] = values
            self._layout[site] = {name: value if type(value) is Derived else None
                                  for name, value in values.items()}
            self._values[site] = [(name, []) for name, value in values.items()
                                  if type(value) is not Derived]

    def signatures(self) -> dict[str, dict[str, ColumnSig]]:
        """Each site's column signature (field name -> kind and dtype), from the first step."""
        return {site: columns_of(site, first) for site, first in self._first.items()}

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
        for site, columns in self.signatures().items():
            arrays = dict(shared)
            values = dict(self._values[site])
            for name, kind in self._layout[site].items():
                if kind is not None:
                    arrays[name] = derived[kind]
                elif columns[name][0] == "tensor":
                    data, shape = encode_stacked_tensor(values[name], columns[name][1])
                    arrays[name], arrays[name + SHAPE_SUFFIX] = data, shape
                else:
                    arrays.update(encode_field(name, *columns[name], values[name]))
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


def _flat(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The arrays joined, and each one's length."""
    lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    return np.concatenate(arrays), lengths


def _request_ids(rids: np.ndarray, discarded: np.ndarray | None = None) -> pa.Array:
    """``req-<id>`` of each id as a string array (null where ``discarded``)."""
    low, high = (int(rids.min()), int(rids.max())) if len(rids) else (0, -1)
    if high - low < 4 * len(rids) + 1024:  # ids of a block are a narrow range: no sort
        ids, codes = range(low, high + 1), rids - low
    else:
        unique, codes = np.unique(rids, return_inverse=True)
        ids = unique.tolist()
    words: list[str | None] = list(request_names(ids))
    if discarded is not None and discarded.any():
        words.append(None)
        codes = np.where(discarded, len(words) - 1, codes)
    return an.coded_strings(words, codes)


def _output_tails(tails: list[np.ndarray], lengths: np.ndarray) -> pa.Array:
    """Each row's output tail (see :func:`forensics.simulator.runs.output_tail`) as
    list<list<int64>>: the id before the placeholders, when the list holds one, then the
    placeholders."""
    size, placeholders, last = np.concatenate(tails, axis=1)
    has_id = size > placeholders
    inner = np.where(has_id, placeholders + 1, size)
    values = np.full(int(inner.sum()), -1, dtype=np.int64)
    starts = np.cumsum(inner) - inner
    values[starts[has_id]] = last[has_id]
    return an.lists(lengths, an.lists(inner, an.primitive(values)), None, arrow_type("ragged"))


def block_steps(ranks: int, sites: int) -> int:
    """Steps per record batch: as many as :func:`~forensics.store.writer.write_capture` puts
    in one flush (``FLUSH_EVERY`` records of ``sites`` sites a step), at least one."""
    return max(1, FLUSH_EVERY // (sites * ranks))


def write_steps(writer: CaptureWriter, simulator: Simulator, steps: int,
                progress: bool = False) -> None:
    """Run ``simulator`` for ``steps`` steps, writing each block of steps as one record batch
    per site and rank, while the next block is simulated: on Linux a forked process encodes
    and writes each block (a second core, no shared interpreter lock); elsewhere a thread does.
    ``progress``: draw a bar on stderr, a block at a time.

    Raises whatever encoding or writing raised (OSError from the disk, as a
    CaptureFormatError naming the steps when a forked process failed), and ConfigurationError
    when a forced fault could not be placed (:meth:`Simulator.check_placed`).
    """
    ranks = simulator.scenario.ranks
    size = block_steps(ranks, len(simulator.sites))
    blocks = _ForkedBlocks if FORK else _ThreadedBlocks
    bar = Progress(steps, f"simulate {simulator.scenario.name}", force=True) if progress \
        else None
    with blocks(writer, ranks) as out:
        block = StepColumns()
        for step in range(1, steps + 1):
            block.add(simulator.advance())
            if len(block) == size or step == steps:
                out.put(block)
                if bar is not None:
                    bar.advance(len(block))
                block = StepColumns()
    if bar is not None:
        bar.close()
    simulator.check_placed()


#: blocks are written by forked processes (Linux: fork is cheap and safe for this code)
FORK = sys.platform == "linux" and hasattr(os, "fork")


def _write_block(writer: CaptureWriter, block: StepColumns, ranks: int) -> None:
    batches = [(site, rank, columns, arrays) for rank in range(ranks)
               for site, columns, arrays in block.encode(rank)]
    for site, rank, columns, arrays in sorted(batches, key=lambda b: (b[0], b[1])):
        writer.write_columns(site, rank, columns, arrays)


class _ForkedBlocks:
    """Each block is encoded and written by a process forked for it, one at a time, appending
    to segments this process opened; this process goes on simulating meanwhile."""

    def __init__(self, writer: CaptureWriter, ranks: int) -> None:
        self.writer, self.ranks = writer, ranks
        self.child: tuple[int, int, str] | None = None  # pid, error pipe, steps

    def __enter__(self) -> _ForkedBlocks:
        return self

    def put(self, block: StepColumns) -> None:
        """Hand ``block`` to a new process, once the previous one is done."""
        self._wait()
        for site, columns in sorted(block.signatures().items()):
            for rank in range(self.ranks):
                self.writer.open_segment(site, rank, columns)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: write the block, report, exit without cleanup
            os.close(read_end)
            code = 0
            try:
                _write_block(self.writer, block, self.ranks)
            except BaseException as exc:
                os.write(write_end, f"{type(exc).__name__}: {reason(exc)}".encode()[:4096])
                code = 1
            finally:
                os._exit(code)
        os.close(write_end)
        self.child = (pid, read_end, f"steps {block.steps[0]}-{block.steps[-1]}")

    def _wait(self) -> None:
        if self.child is None:
            return
        pid, read_end, steps = self.child
        self.child = None
        _, status = os.waitpid(pid, 0)
        with os.fdopen(read_end, "rb") as pipe:
            message = pipe.read().decode(errors="replace")
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise CaptureFormatError(f"writing {steps} of '{terminal(self.writer.shown)}' failed "
                                     f"in process {pid} (exit {code}): "
                                     f"{message or 'no message'}")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None and self.child is not None:
            os.kill(self.child[0], signal.SIGKILL)
            with contextlib.suppress(CaptureFormatError):
                self._wait()
            return
        self._wait()


class _ThreadedBlocks:
    """A thread that encodes and writes the blocks it is given, in order, one queued at most
    (numpy, Arrow and the disk release the interpreter lock for their bulk work)."""

    def __init__(self, writer: CaptureWriter, ranks: int) -> None:
        self.writer, self.ranks = writer, ranks
        self.queue: queue.Queue[StepColumns | None] = queue.Queue(maxsize=1)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="forensics-simulate-writer",
                                       daemon=True)

    def __enter__(self) -> _ThreadedBlocks:
        self.thread.start()
        return self

    def put(self, block: StepColumns) -> None:
        """Queue ``block`` (waits while one is queued); raises the thread's error, if any."""
        self._raise()
        self.queue.put(block)

    def _run(self) -> None:
        while (block := self.queue.get()) is not None:
            if self.error is None:
                try:
                    _write_block(self.writer, block, self.ranks)
                except BaseException as exc:  # handed to the simulating thread
                    self.error = exc

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.queue.put(None)
        self.thread.join()
        if exc is None:
            self._raise()


def write_simulation(path: str | os.PathLike[str], simulator: Simulator, steps: int,
                     manifest: dict[str, Any] | None = None, force: bool = False,
                     progress: bool = False,
                     final: Callable[[], dict[str, Any]] | None = None) -> Path:
    """Run ``simulator`` for ``steps`` steps into a new capture at ``path``; return the path.
    ``progress``: draw a bar on stderr. ``final``: the manifest once the run is over (what it
    injected), written in place of ``manifest`` before the capture is put in place.

    Raises:
        OutputExistsError: ``path`` exists and ``force`` is false, or it is not a capture.
    """
    from forensics.store.manifest import build_manifest, write_manifest_once

    with new_capture(path, manifest, force) as writer:
        write_steps(writer, simulator, steps, progress)
        if final is not None:
            writer.close()
            write_manifest_once(writer.path, build_manifest(final()), again=True)
    return Path(path)
