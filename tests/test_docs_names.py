"""The contributor docs describe the code as it is: every file path and every dotted
``forensics.*`` name they put in backticks exists (read from the source, nothing imported)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "CONTRIBUTING.md", ROOT / "README.md"]
#: where a path written relative to a part of the tree is looked for
BASES = (ROOT, ROOT / "forensics", ROOT / "forensics" / "probe", ROOT / "forensics" / "present",
         ROOT / "tests")
_PATH = re.compile(r"`((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+\.py)`")
_DOTTED = re.compile(r"`(forensics(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")


def _named(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """(doc, name) for each name ``pattern`` finds; a placeholder in capitals (``NAME.py``,
    ``test_X.py``'s ``X``) stands for the reader's own file and is left out."""
    return sorted({(doc.name, name) for doc in DOCS for name in pattern.findall(doc.read_text())
                   if not Path(name).stem.isupper()})


@cache
def _all_python_files() -> frozenset[str]:
    return frozenset(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                     if ".venv" not in p.parts and ".git" not in p.parts)


def _path_exists(name: str) -> bool:
    if "/" not in name:
        return any(Path(p).name == name for p in _all_python_files())
    return any((base / name).is_file() for base in BASES) or \
        any(p.endswith("/" + name) for p in _all_python_files())


@pytest.mark.parametrize(("doc", "path"), _named(_PATH))
def test_a_path_the_docs_name_exists(doc: str, path: str) -> None:
    assert _path_exists(path), f"{doc} names {path}, which is not in the tree"


@cache
def _defined(module_file: Path) -> frozenset[str]:
    """Names bound at the top level of a module (defs, classes, assignments, imports)."""
    tree = ast.parse(module_file.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If):  # TYPE_CHECKING blocks and the like
            for sub in ast.walk(node):
                if isinstance(sub, (ast.ImportFrom, ast.Import)):
                    names |= {(a.asname or a.name).split(".")[0] for a in sub.names}
    if "__getattr__" in names:  # a lazy module: names listed in its tables count
        names |= {n.value for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return frozenset(names)


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if module.is_file():
            rest = parts[cut:]
            return not rest or rest[0] in _defined(module)
    return False


@pytest.mark.parametrize(("doc", "name"), _named(_DOTTED))
def test_a_dotted_name_the_docs_use_exists(doc: str, name: str) -> None:
    assert _resolves(name), f"{doc} names {name}, which the code does not define"


def test_the_checks_see_names() -> None:
    assert len(_named(_PATH)) > 20 and len(_named(_DOTTED)) > 5
    assert not _path_exists("forensics/nowhere.py") and not _resolves("forensics.sites.nothing")
