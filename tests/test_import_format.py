"""``forensics schema`` and docs/import-format.md: the import format per site, generated from the
site schema; the page is up to date and its worked .pt example imports and replays."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import forensics
from forensics.cli import main
from forensics.importers.format import as_markdown, formats
from forensics.sites import SITES, get_site

PAGE = Path(__file__).resolve().parents[1] / "docs" / "import-format.md"


def test_the_docs_page_is_generated_from_the_schema() -> None:
    assert PAGE.read_text() == as_markdown(formats()), (
        "docs/import-format.md is stale: forensics schema --markdown > docs/import-format.md")


def test_schema_lists_every_field_of_every_site(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [site["site"] for site in data] == list(SITES)
    for site in data:
        schema = get_site(site["site"])
        names = [f["name"] for f in site["fields"]]
        assert names == [f.name for f in schema.fields] + [f"{o}_after" for o in
                                                            schema.output_fields]
        assert all(f["shape"] and f["dtype"] and f["kind"] for f in site["fields"])
    assert main(["schema", "async_output"]) == 0
    text = capsys.readouterr().out
    assert "sampled_token_ids_cpu" in text and "[p, k]" in text and "int32" in text
    assert "prev_positions" not in text


def test_an_unknown_site_is_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "embeding"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "embeding" in err and "embedding" in err


def test_the_worked_example_imports_and_replays(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    page = PAGE.read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S)
    commands = re.search(r"```sh\n(.*?)```", page, re.S)
    assert code and commands
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(code.group(1), "import-format.md", "exec"), {})  # noqa: S102 (our page)
        for line in commands.group(1).strip().splitlines():
            argv = line.split()
            assert argv[0] == "forensics" and main(argv[1:]) == 0, line
    finally:
        os.chdir(cwd)
    capture = forensics.load(tmp_path / "incident.capture")
    assert capture.manifest["versions"]["vllm"] == "0.31.0"
    first = forensics.replay(capture).first_finding("upstream")
    assert first is not None and first["step"] == 14 and first["value"] == 248320
    assert "violation" in capsys.readouterr().out
