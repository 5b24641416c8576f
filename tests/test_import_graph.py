"""The import graph of ``forensics/`` has no cycle: every import between its modules, at module
level or inside a function (an import inside a function is how a cycle hides), read with ast.
Imports under ``if TYPE_CHECKING:`` are left out: they never run."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "forensics"


def module_names(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the package under ``root``."""
    names = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a (possibly relative) ``from ... import`` names."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imported(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules ``module`` (at ``path``) imports, type-checking blocks left out."""
    tree = ast.parse(path.read_text())
    checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, path.name == "__init__.py")
            for alias in node.names:
                target = f"{source}.{alias.name}"
                found.add(target if target in known else source)
    return {m for m in found if m in known and m != module}


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of ``graph`` with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    known = module_names(root)
    return {name: imported(name, path, known) for name, path in known.items()}


def test_the_package_has_no_import_cycle() -> None:
    found = [sorted(c) for c in cycles(import_graph())]
    assert not found, f"import cycles in forensics/: {found}"


def test_a_cycle_hidden_in_a_function_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import g\n\ndef f():\n    return g()\n")
    (package / "b.py").write_text("def g():\n    from pkg import a\n    return a\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from pkg import a\n")
    graph = import_graph(package)
    assert graph["pkg.c"] == set()
    assert cycles(graph) == [{"pkg.a", "pkg.b"}]


def test_relative_imports_resolve(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "x.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import y\n")
    (package / "sub" / "y.py").write_text("from ..x import thing\nfrom .. import x\n")
    graph = import_graph(package)
    assert graph["pkg.sub"] == {"pkg.sub.y"} and graph["pkg.sub.y"] == {"pkg.x"}
