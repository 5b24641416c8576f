"""The shape of ``forensics/`` (issue 43): no module over :data:`MOST_LINES` lines, and the SVG
painter (``present/svg/``) imports nothing private of the matplotlib painter
(``present/plots.py``): what both share lives in public, neutral modules (``present/scene/``,
``present/selection.py``, ``present/style.py``). Read from the source with ast; nothing imported."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "forensics"
MOST_LINES = 700
PAINTER = "forensics.present.plots"


def long_modules(root: Path = PACKAGE, most: int = MOST_LINES) -> dict[str, int]:
    """Each module under ``root`` longer than ``most`` lines, with its line count."""
    counts = {path.relative_to(root.parent).as_posix(): len(path.read_text().splitlines())
              for path in sorted(root.rglob("*.py"))}
    return {name: n for name, n in counts.items() if n > most}


def private_uses(source: str, module: str = PAINTER) -> set[str]:
    """The private names (``_x``) of ``module`` that ``source`` imports from it or reads as an
    attribute of it (``import ... as alias`` and ``from <package> import <module>`` followed)."""
    tree = ast.parse(source)
    package, _, leaf = module.rpartition(".")
    aliases: set[str] = set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == module:
            found |= {a.name for a in node.names if a.name.startswith("_")}
        elif isinstance(node, ast.ImportFrom) and node.module == package:
            aliases |= {a.asname or a.name for a in node.names if a.name == leaf}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.name == module and a.asname}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr.startswith("_")):
            found.add(node.attr)
    return found


def test_no_module_is_over_the_limit() -> None:
    assert long_modules() == {}, f"split these modules (at most {MOST_LINES} lines each)"


def test_the_svg_painter_imports_nothing_private_of_the_matplotlib_painter() -> None:
    found = {path.name: names for path in sorted((PACKAGE / "present" / "svg").glob("*.py"))
             if (names := private_uses(path.read_text()))}
    assert found == {}


def test_the_checks_see_what_they_guard(tmp_path: Path) -> None:
    """Both checks fail on the shapes they forbid (a long module; each way of reaching a
    private name of the painter) and pass on their public counterparts."""
    (tmp_path / "forensics").mkdir()
    (tmp_path / "forensics" / "long.py").write_text("x = 1\n" * (MOST_LINES + 1))
    (tmp_path / "forensics" / "short.py").write_text("x = 1\n" * MOST_LINES)
    assert long_modules(tmp_path / "forensics") == {"forensics/long.py": MOST_LINES + 1}
    assert private_uses("from forensics.present import plots\nplots._edges(1)\n") == {"_edges"}
    assert private_uses("from forensics.present.plots import _check_site\n") == {"_check_site"}
    assert private_uses("import forensics.present.plots as p\np._padded\n") == {"_padded"}
    assert private_uses("from forensics.present import plots\nplots.plot(r)\n") == set()
    assert private_uses("from forensics.present.scene import timeline\ntimeline._x\n") == set()
