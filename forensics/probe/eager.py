"""``embedding_guard()``: bounds checks (and optional records) for eager models outside vLLM."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from forensics.errors import ConfigurationError
from forensics.probe import guard
from forensics.records import MAX_RANK, Record
from forensics.sites import SINK  # the embedding: the lookup this guard checks and records


@dataclass
class EmbeddingGuard:
    """What an :func:`embedding_guard` block saw: lookups, violations, the capture written."""

    mode: str
    capture: Path | None
    rank: int = 0
    calls: int = 0
    violations: list[guard.Violation] = field(default_factory=list)
    writer: Any = None

    def check(self, ids: Any, weight: Any) -> None:
        """Check one lookup of ``ids`` into ``weight``; record it; raise in guard mode."""
        step, self.calls = self.calls, self.calls + 1
        host = ids.detach().to("cpu").numpy()
        rows = int(weight.shape[0])
        if self.writer is not None:
            fields = {"input_ids": np.array(host).reshape(-1), "num_embeddings": rows}
            self.writer.append(Record(SINK, step, self.rank, fields))
        found = guard.check_ids(SINK, "input_ids", host, rows)
        if found is None:
            return
        self.violations.append(found)
        if self.mode == "guard":
            if self.writer is not None:
                self.writer.flush()
            raise guard.bounds_error(found, step, self.rank, self.capture)


@contextmanager
def embedding_guard(capture: str | Path | None = None, *, mode: str = "guard",
                    rank: int = 0) -> Iterator[EmbeddingGuard]:
    """Check every ``torch.nn.functional.embedding`` lookup inside the block.

    Ids outside ``[0, weight rows)`` raise :class:`~forensics.errors.IndexBoundsError` before
    the lookup in ``mode="guard"``; in ``mode="record"`` they are only collected in
    ``.violations``. With ``capture``, each lookup is also written there as an ``embedding``
    record (step = the lookup's number in the block). ``nn.Embedding`` goes through
    ``F.embedding``, so modules are covered. Yields the :class:`EmbeddingGuard`.

    Raises:
        ConfigurationError: ``mode`` is not ``guard`` or ``record``; ``capture`` exists (a
            folder, a file or a link: another capture's records, or a folder someone else
            planted, are never written into).
    """
    import torch.nn.functional as F

    if mode not in ("guard", "record"):
        raise ConfigurationError(f"embedding_guard mode {mode!r} is not a mode; expected "
                                 f"'guard' or 'record'")
    _refuse_rank(rank)
    from forensics.atomic import user_path

    state = EmbeddingGuard(mode, user_path(capture) if capture is not None else None, rank)
    if state.capture is not None and (state.capture.exists() or state.capture.is_symlink()):
        from forensics.escaping import terminal

        raise ConfigurationError(f"embedding_guard capture '{terminal(state.capture)}' exists; "
                                 "give a new name (each block writes a capture of its own)")
    if state.capture is not None:
        from forensics.probe.settings import process_tag
        from forensics.store.writer import CaptureWriter

        state.writer = CaptureWriter(state.capture, {"creator": "forensics.embedding_guard"},
                                     process=process_tag())
    original = F.embedding

    def checked(input: Any, weight: Any, *args: Any, **kwargs: Any) -> Any:
        state.check(input, weight)
        return original(input, weight, *args, **kwargs)

    F.embedding = checked
    try:
        yield state
    except BaseException:
        F.embedding = original
        _close(state, quiet=True)
        raise
    F.embedding = original
    _close(state, quiet=False)


def _refuse_rank(rank: Any) -> None:
    """Raise ConfigurationError unless ``rank`` is a rank a capture holds (0 to 999,999): one
    out of range was refused only by the first lookup's record, inside the block (the user's
    model's call raised it), and left a capture of no record behind."""
    import numbers

    from forensics.escaping import terminal

    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) \
            or not 0 <= int(rank) < MAX_RANK:
        raise ConfigurationError(f"embedding_guard rank {terminal(repr(rank)[:40])} is not a rank; "
                                 f"give the tensor-parallel rank, 0 to {MAX_RANK - 1}")


def _close(state: EmbeddingGuard, quiet: bool) -> None:
    """Close the guard's capture writer, if any; ``quiet`` (the block raised: its error, an
    ``IndexBoundsError`` of the guard's, is the one the caller sees): a failure to close is
    only logged."""
    if state.writer is None:
        return
    try:
        state.writer.close()
    except Exception as exc:
        if not quiet:
            raise
        import logging

        logging.getLogger("forensics.probe").warning(
            "forensics embedding_guard: closing the capture %s failed: %s", state.capture, exc)
