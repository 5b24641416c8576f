"""vllm-forensics: capture, replay and explain out-of-range index tensors in vLLM.

The public API (heavy libraries are imported on first use, never by ``import forensics``):

- :func:`load` a capture directory -> :class:`Capture`
- :func:`replay` a capture through variants -> :class:`ReplayResult`
- :func:`findings_table`, :func:`first_violation`, :func:`summary_by_site`: fixed-column tables
- :mod:`forensics.plots`: ``plot_*`` functions (matplotlib)
- :func:`simulate`: synthetic captures of known incident shapes
- :func:`shrink`, :func:`redact`: a smaller or a shareable capture with the same evidence
"""

from __future__ import annotations

import importlib
from typing import Any

from forensics.errors import ForensicsError
from forensics.records import Record

__version__ = "0.1.0"

#: public name -> module that defines it (imported lazily, on first attribute access)
_LAZY: dict[str, str] = {
    "load": "forensics.store.reader",
    "Capture": "forensics.store.reader",
    "CaptureWriter": "forensics.store.writer",
    "replay": "forensics.replay",
    "ReplayResult": "forensics.replay",
    "findings_table": "forensics.tables",
    "first_violation": "forensics.tables",
    "summary_by_site": "forensics.tables",
    "simulate": "forensics.simulate",
    "shrink": "forensics.shrink",
    "redact": "forensics.redact",
    "plots": "forensics.plots",
}

__all__ = ["ForensicsError", "Record", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'forensics' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    # forensics.plots is a module; the others are attributes of their module. (forensics.replay
    # and forensics.simulate share their module's name; those modules are callable, so the value
    # stays callable even after an import of the submodule rebinds the package attribute.)
    value = getattr(module, name, module)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
