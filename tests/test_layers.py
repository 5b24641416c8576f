"""Imports follow the layers (issue 43): a module imports only its own layer and those below
it, read with the parser of ``test_import_graph`` (module level and inside functions;
``TYPE_CHECKING`` blocks left out). The layers, top to bottom:

commands (and ``cli``, ``pytest_plugin``) -> share, fleet -> present -> known -> replaying ->
judge -> variants, importers, probe, simulator, kernels -> store -> sites, validate -> the
base modules (every other module of ``forensics/``, the package's facade included).

The imports that still run back up are listed in :data:`ALLOWED_UP`, each with its reason; a
new one fails the test, as does any import of the variant runners by ``judge/`` (the judge
reads results, it never runs a variant)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_import_graph import import_graph

#: the layer of each package or top-level module of ``forensics`` (higher is upper); the
#: rest are base modules (0)
LAYERS = {
    "commands": 9, "cli": 9, "pytest_plugin": 9,
    "share": 8, "fleet": 8,
    "present": 7,
    "known": 6,
    "replaying": 5,
    "judge": 4,
    "variants": 3, "importers": 3, "probe": 3, "simulator": 3, "kernels": 3,
    "store": 2,
    "sites": 1, "validate": 1,
}
#: the most imports that may run back up the layers (issue 43's bar)
MOST_UP = 4
#: the imports that run back up today, each with why it stays
ALLOWED_UP = {
    ("forensics.judge.race", "forensics.known.schema"):
        "the race check reads the writer and reader sites of the known-issue catalogue's "
        "[race] table (forensics/known/catalogue.toml), whose one validating reader is "
        "known.schema; the replay (below known) runs the check",
}


def layer(module: str) -> int:
    """The layer of a dotted module name of ``forensics`` (0: a base module)."""
    parts = module.split(".")
    return LAYERS.get(parts[1], 0) if len(parts) > 1 else 0


def imports_up(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) for every import of ``graph`` that runs back up the layers."""
    return sorted((module, target) for module, targets in graph.items() for target in targets
                  if layer(target) > layer(module))


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """The import graph of ``forensics/``, read once for the tests of this module."""
    return import_graph()


def test_at_most_four_imports_run_back_up_and_each_is_known(graph: dict[str, set[str]]
                                                              ) -> None:
    found = imports_up(graph)
    assert len(found) <= MOST_UP, f"{len(found)} imports run back up the layers: {found}"
    unknown = [pair for pair in found if pair not in ALLOWED_UP]
    assert not unknown, (f"imports run back up the layers: {unknown}; import downwards, or "
                         "move the shared piece into the lower layer")


def test_the_judge_never_imports_a_variant_runner(graph: dict[str, set[str]]) -> None:
    judge = {m: sorted(t for t in targets if t.startswith("forensics.variants"))
             for m, targets in graph.items() if m.startswith("forensics.judge")}
    assert judge and not any(judge.values()), f"judge/ imports the variant runners: {judge}"


def test_an_upward_import_inside_a_function_is_found(tmp_path: Path) -> None:
    package = tmp_path / "forensics"
    (package / "judge").mkdir(parents=True)
    (package / "variants").mkdir()
    for path in ("__init__.py", "judge/__init__.py", "variants/__init__.py",
                 "variants/runner.py", "replaying.py"):
        (package / path).write_text("")
    (package / "judge" / "race.py").write_text(
        "from forensics.variants import runner\n\ndef check():\n"
        "    from forensics.replaying import run_variant\n    return run_variant\n")
    graph = import_graph(package)
    assert imports_up(graph) == [("forensics.judge.race", "forensics.replaying")]
    assert graph["forensics.judge.race"] >= {"forensics.variants.runner"}
