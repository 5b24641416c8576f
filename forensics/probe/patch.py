"""Installing the wrappers into vLLM 0.33.x, now or when the modules are first imported.

A module that imported a function by name keeps its own reference, so
``update_num_computed_tokens_for_batch_change`` is replaced both where it is defined and in
``vllm.v1.worker.gpu_model_runner``. Modules not yet imported are patched by an import hook
right after they execute, so loading the plugin never imports the (slow) runner itself.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from forensics.probe import hooks, v2_hooks
from forensics.sites import hooked_by

SPEC_UTILS = "vllm.v1.spec_decode.utils"
RUNNER = "vllm.v1.worker.gpu_model_runner"
INPUT_BATCH = "vllm.v1.worker.gpu_input_batch"
BATCH_CHANGE_FN = "update_num_computed_tokens_for_batch_change"


@dataclass(frozen=True)
class Target:
    """``owner.attribute`` of ``module`` (owner "" for a module global), for ``site``: the
    registered site whose ``Site.hook`` names that function (None: always installed, the step
    counter and the failure flush)."""

    module: str
    owner: str
    attribute: str
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]]
    recorded: bool = True  # False: always installed, for no site

    @property
    def site(self) -> str | None:
        """The site this target records (None: always installed)."""
        if not self.recorded:
            return None
        qualname = f"{self.owner}.{self.attribute}" if self.owner else self.attribute
        return hooked_by()[qualname]


TARGETS: tuple[Target, ...] = (
    Target(SPEC_UTILS, "", BATCH_CHANGE_FN, hooks.wrap_batch_change),
    Target(RUNNER, "", BATCH_CHANGE_FN, hooks.wrap_batch_change),  # imported by name there
    Target(RUNNER, "GPUModelRunner", "_prepare_input_ids", hooks.wrap_prepare_input_ids),
    Target(RUNNER, "GPUModelRunner", "_model_forward", hooks.wrap_model_forward),
    Target(RUNNER, "GPUModelRunner", "execute_model", hooks.wrap_execute_model, False),
    Target(RUNNER, "GPUModelRunner", "sample_tokens", hooks.wrap_sample_tokens, False),
    Target(INPUT_BATCH, "InputBatch", "update_async_output_token_ids", hooks.wrap_async_output),
)


TARGETS += v2_hooks.targets(Target)  # Model Runner V2 (vllm.v1.worker.gpu)

#: (holder, attribute, original) for every installed wrapper, to undo them
_INSTALLED: list[tuple[Any, str, Any]] = []
_FINDER: _PatchingFinder | None = None


def _patch_target(module: ModuleType, target: Target) -> None:
    holder = getattr(module, target.owner) if target.owner else module
    current = holder.__dict__[target.attribute] if isinstance(holder, type) else getattr(
        holder, target.attribute)
    original = getattr(current, "__forensics_original__", None)
    if original is not None:  # wrapped already (e.g. imported by name from a patched module)
        _INSTALLED.append((holder, target.attribute, original))
        return
    wrapper = target.wrap(current)
    wrapper.__forensics_original__ = current  # type: ignore[attr-defined]
    setattr(holder, target.attribute, wrapper)
    _INSTALLED.append((holder, target.attribute, current))


def patch_module(module: ModuleType, sites: Sequence[str]) -> None:
    """Install the wrappers of ``sites`` (plus the always-on ones) that live in ``module``."""
    for target in TARGETS:
        if target.module == module.__name__ and (target.site is None or target.site in sites):
            _patch_target(module, target)


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, sites: Sequence[str]) -> None:
        self.inner, self.sites = inner, sites

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        patch_module(module, self.sites)


class _PatchingFinder(importlib.abc.MetaPathFinder):
    """Patches the target modules right after they execute (the first import)."""

    def __init__(self, sites: Sequence[str]) -> None:
        self.sites = tuple(sites)
        self.names = {t.module for t in TARGETS}

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, self.sites)
                return spec
        return None


def install(sites: Sequence[str]) -> None:
    """Wrap the vLLM code of ``sites``: modules already imported now, the others on import."""
    global _FINDER
    for name in {t.module for t in TARGETS}:
        module = sys.modules.get(name)
        if module is not None:
            patch_module(module, sites)
    if _FINDER is None:
        _FINDER = _PatchingFinder(sites)
        sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    """Remove every wrapper and the import hook (tests; a process normally keeps them)."""
    global _FINDER
    while _INSTALLED:
        holder, attribute, original = _INSTALLED.pop()
        setattr(holder, attribute, original)
    if _FINDER is not None and _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    _FINDER = None


def installed() -> list[str]:
    """Names of the installed wrappers, ``module.owner.attribute``."""
    return [f"{getattr(h, '__module__', None) or h.__name__}.{getattr(h, '__qualname__', '')}"
            f".{a}".replace("..", ".") for h, a, _ in _INSTALLED]
