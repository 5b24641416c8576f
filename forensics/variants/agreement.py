"""The agreement rule between two variants' outcomes on one record (DESIGN.md, Variants).

Two outcomes agree when both are ``ok`` with the same outputs (tensors equal in dtype, shape and
values; lists equal), or both failed with the same kind of error (``index_error`` or ``error``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forensics.errors import ForensicsError
from forensics.outcome import ERROR, INDEX_ERROR, OK, Outcome
from forensics.records import Record


def outcome_of(variant: Any, record: Record) -> Outcome:
    """Run ``variant`` on ``record``; return its Outcome, turning a raised IndexError into an
    ``index_error`` outcome and any other exception into ``error``.

    Raises:
        ForensicsError: a problem with the variant or the record (not with the code replayed).
    """
    try:
        return variant.run(record)
    except ForensicsError:
        raise
    except IndexError as exc:
        return Outcome(status=INDEX_ERROR, message=f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        return Outcome(status=ERROR, message=f"{type(exc).__name__}: {exc}")


def disagreement(a: Outcome, b: Outcome) -> str | None:
    """Return why ``a`` and ``b`` disagree, or None when they agree."""
    if a.status != b.status:
        return f"status {a.status!r} ({a.message}) vs {b.status!r} ({b.message})"
    if a.status != OK:
        return None
    for name in sorted(set(a.outputs) | set(b.outputs)):
        if name not in a.outputs or name not in b.outputs:
            return f"output {name!r} only in {'the first' if name in a.outputs else 'the second'}"
        why = _differ(a.outputs[name], b.outputs[name])
        if why:
            return f"output {name!r}: {why}"
    return None


def agree(a: Outcome, b: Outcome) -> bool:
    """True when the two outcomes agree under the agreement rule."""
    return disagreement(a, b) is None


def _as_array(value: Any) -> np.ndarray | None:
    if isinstance(value, np.ndarray):
        return value
    if type(value).__module__.startswith("torch") and hasattr(value, "numpy"):
        return value.detach().cpu().numpy()
    return None


def _differ(x: Any, y: Any) -> str | None:
    ax, ay = _as_array(x), _as_array(y)
    if ax is not None or ay is not None:
        if ax is None or ay is None:
            return f"a tensor vs a {type(x if ax is None else y).__name__}"
        if ax.dtype != ay.dtype or ax.shape != ay.shape:
            return f"{ax.dtype}{list(ax.shape)} vs {ay.dtype}{list(ay.shape)}"
        return None if np.array_equal(ax, ay) else f"{ax.tolist()} vs {ay.tolist()}"
    return None if _plain(x) == _plain(y) else f"{x!r} vs {y!r}"


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return int(value) if isinstance(value, np.integer) else value


__all__ = ["ERROR", "INDEX_ERROR", "OK", "agree", "disagreement", "outcome_of"]
