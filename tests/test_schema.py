"""The light schema layer: records and the schema know no site; the store and validation look a
site's schema up in the registry (:mod:`forensics.sites`) directly, with no proxy between."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from forensics import schema, sites
from forensics.records import Record
from forensics.sites import pipeline_key

PACKAGE = Path(__file__).resolve().parents[1] / "forensics"
NO_SITE = ["records.py", "schema.py"]


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in the file (type-checking blocks left out)."""
    tree = ast.parse(path.read_text())
    checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and ast.unparse(node.test) == "TYPE_CHECKING" for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


@pytest.mark.parametrize("name", NO_SITE)
def test_records_and_the_schema_import_no_site_module(name: str) -> None:
    imported = {m for m in _imports(PACKAGE / name)
                if m == "forensics.sites" or m.startswith("forensics.sites.")}
    assert not imported, (name, imported)


def test_the_schema_module_has_no_registry_lookups() -> None:
    assert not {"SITES", "site_schema", "site_order"} & set(vars(schema))


def test_records_sort_in_pipeline_order_by_the_registry() -> None:
    records = [Record(name, step, 0) for step in (1, 0) for name in reversed(sites.SITES)]
    ordered = sorted(records, key=pipeline_key)
    assert [(r.step, r.site) for r in ordered] == [(s, n) for s in (0, 1) for n in sites.SITES]
    assert not hasattr(Record, "key")
