"""The Triton kernels of the installed vLLM's worker, sampling and speculative-decoding packages.

Read from the source files (Python's ``ast``; nothing is imported): every function decorated
with ``triton.jit`` (or ``jit``, ``triton.jit(...)``, under other decorators too).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

#: the packages (under ``vllm``) whose kernels the recorder records
PACKAGES = ("v1/worker", "v1/sample", "v1/spec_decode")


def vllm_root() -> Path | None:
    """The installed vLLM's package directory (found, not imported), or None."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _is_jit(decorator: ast.expr) -> bool:
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(node, ast.Attribute):
        return node.attr == "jit"
    return isinstance(node, ast.Name) and node.id == "jit"


def kernels_in(path: Path, module: str) -> list[tuple[str, str]]:
    """``(module, kernel name)`` of each ``@triton.jit`` function of one file."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    return [(module, node.name) for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and any(map(_is_jit, node.decorator_list))]


def installed_kernels(root: Path | None = None) -> list[tuple[str, str]]:
    """Every ``(module, kernel)`` of the installed vLLM's worker packages, sorted."""
    root = vllm_root() if root is None else root
    if root is None:
        return []
    found: list[tuple[str, str]] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root.parent).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found += kernels_in(path, module)
    return sorted(set(found))
