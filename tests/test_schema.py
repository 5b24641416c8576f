"""The light schema layer: records, validation and the store see sites only through
``forensics.schema`` (their schema and record checks), never the site registry with the models;
its lookups answer from the registry."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from forensics import schema, sites
from forensics.errors import UnknownSiteError

PACKAGE = Path(__file__).resolve().parents[1] / "forensics"
SCHEMA_ONLY = ["records.py", "validate.py", *(f"store/{p.name}" for p in
                                             sorted((PACKAGE / "store").glob("*.py")))]


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


@pytest.mark.parametrize("name", SCHEMA_ONLY)
def test_records_validation_and_the_store_import_no_site_module(name: str) -> None:
    imported = {m for m in _imports(PACKAGE / name)
                if m == "forensics.sites" or m.startswith("forensics.sites.")}
    assert not imported, (name, imported)  # ScreenUnsure and as_int64: forensics.screening


def test_the_schema_lookups_answer_from_the_registry() -> None:
    assert tuple(schema.SITES) == sites.SITES and schema.SITES == sites.SITES
    assert list(schema.SITES) == list(sites.SITES) and len(schema.SITES) == len(sites.SITES)
    assert "embedding" in schema.SITES and "nope" not in schema.SITES
    assert schema.SITES[-1] == sites.SINK
    assert schema.SITES.index(sites.SINK) == len(sites.SITES) - 1
    for name in sites.SITES:
        assert schema.site_schema(name) is sites.get_site(name)
        assert schema.site_order(name) == sites.SITES.index(name)
    with pytest.raises(UnknownSiteError, match="expected one of"):
        schema.site_schema("nope")
