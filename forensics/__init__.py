"""vllm-forensics: capture, replay and explain out-of-range index tensors in vLLM.

The public API (heavy libraries are imported on first use, never by ``import forensics``):

- :func:`load` a capture directory -> :class:`Capture`
- :func:`replay` a capture through variants -> :class:`ReplayResult`
- :func:`findings_table`, :func:`first_violation`, :func:`summary_by_site`: fixed-column tables
- :mod:`forensics.plots`: ``plot_*`` functions (matplotlib)
- :func:`simulate`: synthetic captures of known incident shapes
- :func:`shrink`, :func:`redact`: a smaller or a shareable capture with the same evidence
- :func:`open_many`: one ``pyarrow.dataset`` per site over many captures (DuckDB, Polars)
- :func:`conclude`, :func:`next_steps`, :func:`scan`, :func:`import_sources`,
  :func:`embedding_guard`, and the notebooks' display helpers (:func:`display_frame`,
  :func:`styled`, :func:`show_header`, ...)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from forensics.errors import ForensicsError
from forensics.records import Record

if TYPE_CHECKING:  # what type checkers see; at run time each name is imported on first use
    from forensics.fleet.dataset import open_many
    from forensics.importers import import_sources
    from forensics.judge.scan import ScanResult, scan
    from forensics.present import plots
    from forensics.present.conclusion import conclude, next_steps
    from forensics.present.report import show_header
    from forensics.present.tables import (
        display_frame,
        events_table,
        findings_details,
        findings_table,
        first_violation,
        grouped_findings,
        styled,
        summary_by_site,
    )
    from forensics.probe.eager import embedding_guard
    from forensics.replaying import ReplayResult, replay
    from forensics.share.redaction import redact
    from forensics.share.shrinking import shrink
    from forensics.simulator.runs import simulate
    from forensics.store.reader import Capture, load
    from forensics.store.writer import CaptureWriter

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
    "findings_table": "forensics.present.tables",
    "first_violation": "forensics.present.tables",
    "summary_by_site": "forensics.present.tables",
    "simulate": "forensics.simulator.runs",
    "shrink": "forensics.share.shrinking",
    "redact": "forensics.share.redaction",
    "plots": "forensics.present.plots",
    "open_many": "forensics.fleet.dataset",
    "conclude": "forensics.present.conclusion",
    "next_steps": "forensics.present.conclusion",
    "display_frame": "forensics.present.tables",
    "events_table": "forensics.present.tables",
    "findings_details": "forensics.present.tables",
    "grouped_findings": "forensics.present.tables",
    "styled": "forensics.present.tables",
    "show_header": "forensics.present.report",
    "scan": "forensics.judge.scan",
    "ScanResult": "forensics.judge.scan",
    "import_sources": "forensics.importers",
    "embedding_guard": "forensics.probe.eager",
}

__all__ = ["Capture", "CaptureWriter", "ForensicsError", "Record", "ReplayResult", "ScanResult",
           "__version__", "conclude", "display_frame", "embedding_guard", "events_table",
           "findings_details",
           "findings_table", "first_violation", "grouped_findings", "import_sources", "load",
           "next_steps", "open_many", "plots", "redact", "replay", "scan", "show_header", "shrink",
           "simulate", "styled", "summary_by_site"]


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
