"""A site is one module (or one package): only a built-in site's own modules and the registry
name it in code.

"Names it" means a string literal equal to the site's name (docstrings and comments, which
explain, are left out), a variable or function of that name, or an import of its module.
What another module needs to know of a site it reads from the registry
(:class:`forensics.sites.base.Site`): token fields, origin chain, real-code adapter or kernel, probe
hook (which also says which site records, or simulates, a vLLM function's calls), what feeds
the sink, log lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

from forensics.sites import REGISTRY

ROOT = Path(__file__).resolve().parents[2] / "forensics"
BUILT_IN = ("batch_change", "prepare_input_ids", "async_output", "rejection_drafts", "post_update",
            "combine_tokens", "embedding")
REGISTRY_LINE = "sites/__init__.py"


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of ``tree``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def named_sites(source: str) -> set[str]:
    """The built-in sites ``source`` names in code (see the module docstring)."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            names.add(node.value)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.update(node.name.split("."))
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update(node.module.split("."))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names & set(BUILT_IN)


def naming_files() -> dict[str, set[str]]:
    """Every source file under forensics/ that names a built-in site, with the sites."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        named = named_sites(path.read_text(encoding="utf-8"))
        if named:
            found[path.relative_to(ROOT).as_posix()] = named
    return found


def test_the_built_in_sites_are_registered() -> None:
    assert set(BUILT_IN) <= set(REGISTRY.names())


def test_only_a_sites_module_and_the_registry_line_name_it() -> None:
    found = naming_files()
    for site in BUILT_IN:  # a site is one module, or one package (its modules name only it)
        own = [f for f in found if f == f"sites/{site}.py" or f.startswith(f"sites/{site}/")]
        for path in own:
            assert found.pop(path) <= {site}, (site, path)
    found.pop(REGISTRY_LINE)
    assert not found, {f: sorted(s) for f, s in found.items()}


def test_the_check_sees_each_way_of_naming_a_site() -> None:
    assert named_sites('x = "embedding"') == {"embedding"}
    assert named_sites("from forensics.sites import batch_change") == {"batch_change"}
    assert named_sites("import forensics.sites.async_output") == {"async_output"}
    assert named_sites("from forensics.sites.prepare_input_ids import X") == {
        "prepare_input_ids"}
    assert named_sites('def f():\n    """embedding"""\n    return layer.embedding') == set()
    assert named_sites("prepare_input_ids = 1") == {"prepare_input_ids"}
