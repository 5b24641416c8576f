"""The live-capture side: the vLLM plugin, its ring of records, and the guards.

- :func:`forensics.probe.plugin.register`: the ``vllm.general_plugins`` entry point ``forensics``
  (active only with ``FORENSICS_DIR``, or the older ``VLLM_FORENSICS_DIR``; README.md lists
  the settings);
- :func:`embedding_guard`: a context manager checking ``F.embedding`` lookups of eager models.

Importing this package imports neither torch nor vLLM.
"""

from __future__ import annotations

from typing import Any

__all__ = ["embedding_guard"]


def embedding_guard(*args: Any, **kwargs: Any) -> Any:
    """See :func:`forensics.probe.eager.embedding_guard` (imported on first use)."""
    from forensics.probe.eager import embedding_guard as guard

    return guard(*args, **kwargs)
