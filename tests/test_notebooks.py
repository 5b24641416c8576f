"""The investigation notebooks: each opens with a papermill ``parameters`` cell, calls only the
public API, and runs to the end against the bundled data (any error fails the test).

Stored notebooks carry no outputs: tests/test_foundation.py checks that.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

import forensics

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
EXPECTED = ("00_quickstart", "01_stale_prev_rows", "02_vocab_sentinel", "03_triage",
            "04_share")
#: what a notebook may reach through ``forensics.``: the public API only
PUBLIC = set(forensics.__all__)
PUBLIC_IMPORTS = {"forensics"}


def notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def _code(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def test_every_notebook_is_there() -> None:
    assert [p.stem for p in notebooks()] == list(EXPECTED)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_notebook_opens_with_a_parameters_cell(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", []), "first code cell is the parameters"
    names = {t.id for node in ast.walk(ast.parse(code[0].source)) if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    assert "capture" in names
    assert any(c.cell_type == "markdown" for c in nb.cells[:2]), "opens with an explanation"


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_notebook_uses_the_public_api_only(path: Path) -> None:
    for source in _code(path):
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("forensics"):
                assert node.module in PUBLIC_IMPORTS or (
                    node.module == "forensics" and {a.name for a in node.names} <= PUBLIC), \
                    f"{path.name}: from {node.module} import ..."
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("forensics"):
                        assert alias.name in PUBLIC_IMPORTS, f"{path.name}: import {alias.name}"
        for name in re.findall(r"\bforensics\.(\w+)", source):
            assert name in PUBLIC, f"{path.name}: forensics.{name} is not public API"


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_notebook_runs_against_the_bundled_data(path: Path, tmp_path: Path) -> None:
    papermill = pytest.importorskip("papermill")
    out = tmp_path / path.name
    papermill.execute_notebook(str(path), str(out), kernel_name="python3", cwd=str(NOTEBOOKS),
                               progress_bar=False, log_output=False)
    executed = nbformat.read(out, as_version=4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    images = sum("image/png" in o.get("data", {}) for c in executed.cells
                 if c.cell_type == "code" for o in c.get("outputs", []))
    assert images >= 1, "the notebook draws its plots"
    # `forensics report --notebook NAME` exports it: a bare pandas table (raw HTML with its own
    # <style>) is refused there, so every bundled notebook shows its tables through styled()
    from forensics.present.report import export_html

    assert export_html(executed, title=path.stem, info={"capture": path.stem}).endswith("</html>\n")


def _stdout(path: Path, tmp_path: Path, capture: Path) -> str:
    papermill = pytest.importorskip("papermill")
    out = tmp_path / path.name
    papermill.execute_notebook(str(path), str(out), kernel_name="python3", cwd=str(NOTEBOOKS),
                               parameters={"capture": str(capture)}, progress_bar=False,
                               log_output=False)
    executed = nbformat.read(out, as_version=4)
    return "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.get("name") == "stdout")


def test_quickstart_follows_the_capture_it_runs_on(tmp_path: Path) -> None:
    text = _stdout(NOTEBOOKS / "00_quickstart.ipynb", tmp_path,
                   ROOT / "data" / "misattribution.capture")
    assert "drawing batch_change: upstream suspect, patched suspect" in text
    assert "upstream: no unresolved out-of-bounds finding" in text
    assert "finds batch_change suspect" in text  # the conclusion of this capture


def test_quickstart_runs_on_a_model_runner_v2_capture(tmp_path: Path) -> None:
    text = _stdout(NOTEBOOKS / "00_quickstart.ipynb", tmp_path,
                   ROOT / "data" / "v2-negative-draft.capture")
    assert "combine_tokens" in text and "runner v2" in text, text[-3000:]


def test_triage_pictures_the_violating_site_of_the_capture(tmp_path: Path) -> None:
    """Incident A's violation is in batch_change: the triage notebook (the report) pictures
    that site, not always the embedding, and opens with this capture's conclusion."""
    text = _stdout(NOTEBOOKS / "03_triage.ipynb", tmp_path,
                   ROOT / "data" / "incident-a-stale-prev-rows-confirmed.capture")
    pictured = [line for line in text.splitlines() if line.startswith("pictured ")]
    assert pictured == ["pictured batch_change: upstream violation, patched ok",
                        "pictured prepare_input_ids: upstream violation, patched ok"], pictured
    assert text.startswith("upstream leaves batch_change")
