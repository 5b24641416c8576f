"""vllm-forensics: capture, replay and explain out-of-range index tensors in vLLM.

The public API (heavy libraries are imported on first use, never by ``import forensics``):

- :func:`load` a capture directory -> :class:`Capture`
- :func:`replay` a capture through variants -> :class:`ReplayResult`
- :func:`findings_table`, :func:`first_violation`, :func:`summary_by_site`: fixed-column tables
- :mod:`forensics.plots`: ``plot_*`` functions (matplotlib)
- :func:`simulate`: synthetic captures of known incident shapes
- :func:`shrink`, :func:`redact`: a smaller or a shareable capture with the same evidence
- :func:`open_many`: one ``pyarrow.dataset`` per site over many captures (DuckDB, Polars)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from forensics.errors import ForensicsError
from forensics.records import Record

if TYPE_CHECKING:  # what type checkers see; at run time each name is imported on first use
    from forensics import plots
    from forensics.fleet.dataset import open_many
    from forensics.redaction import redact
    from forensics.replaying import ReplayResult, replay
    from forensics.shrinking import shrink
    from forensics.simulation import simulate
    from forensics.store.reader import Capture, load
    from forensics.store.writer import CaptureWriter
    from forensics.tables import findings_table, first_violation, summary_by_site

__version__ = "0.1.0"

#: public name -> module that defines it (imported lazily, on first attribute access); the
#: implementation modules have other names than their functions (``forensics.replaying``
#: defines ``replay``), so importing one never hides a function of this package
_LAZY: dict[str, str] = {
    "load": "forensics.store.reader",
    "Capture": "forensics.store.reader",
    "CaptureWriter": "forensics.store.writer",
    "replay": "forensics.replaying",
    "ReplayResult": "forensics.replaying",
    "findings_table": "forensics.tables",
    "first_violation": "forensics.tables",
    "summary_by_site": "forensics.tables",
    "simulate": "forensics.simulation",
    "shrink": "forensics.shrinking",
    "redact": "forensics.redaction",
    "plots": "forensics.plots",
    "open_many": "forensics.fleet.dataset",
}

__all__ = ["Capture", "CaptureWriter", "ForensicsError", "Record", "ReplayResult", "__version__",
           "findings_table", "first_violation", "load", "open_many", "plots", "redact", "replay",
           "shrink", "simulate", "summary_by_site"]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'forensics' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if name == "plots" else getattr(module, name)  # plots: the module itself
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
