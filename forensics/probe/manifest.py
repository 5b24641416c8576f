"""The manifest the probe gives a capture: versions, model facts, and who wrote it."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forensics.probe.session import ProbeSession


def _attempt(getter: Any) -> Any:
    try:
        return getter()
    except Exception:  # a fact that is not reachable in this vLLM build or process
        return None


def _speculative(runner: Any) -> dict[str, Any] | None:
    config = getattr(runner, "speculative_config", None)
    if config is None:
        return None
    keys = ("method", "num_speculative_tokens", "model", "draft_tensor_parallel_size")
    return {key: _plain(getattr(config, key, None)) for key in keys}


def _plain(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def model_facts(runner: Any) -> dict[str, Any]:
    """Facts about the model and scheduling read from a ``GPUModelRunner`` (None if absent)."""
    if runner is None:
        return {}
    model_config = getattr(runner, "model_config", None)
    return {
        "model": _attempt(lambda: _plain(model_config.model)),  # type: ignore[union-attr]
        "vocab_size": _attempt(lambda: int(model_config.get_vocab_size())),  # type: ignore[union-attr]
        "max_model_len": _attempt(lambda: int(model_config.max_model_len)),  # type: ignore[union-attr]
        "speculative_config": _attempt(lambda: _speculative(runner)),
        "async_scheduling": _attempt(lambda: bool(runner.use_async_scheduling)),
        "async_spec_decode": _attempt(lambda: bool(runner.use_async_spec_decode)),
    }


def build_manifest(session: ProbeSession) -> dict[str, Any]:
    """Return the probe's manifest entries for ``session``'s capture (JSON-serialisable).

    The store adds the format version, creator, versions (of the modules in use: vLLM's CPU
    build included) and time; the first process to write wins.
    """
    from forensics.probe.v2_hooks import runner_kind

    settings = session.settings
    return {
        "runner": (runner_kind(session.runner) or "unknown") if session.runner is not None
        else "unknown",
        "engine_id": settings.engine_id,
        "model": model_facts(session.runner),
        "probe": {"mode": settings.mode, "sites": list(settings.sites), "ring": settings.ring,
                  "flush_every": settings.flush_every, "handoff": session.handoff},
        "process": {"rank": session.rank, "pid": os.getpid(), "host": socket.gethostname(),
                    "tag": session.process},
    }
