"""``forensics import`` and ``forensics inspect``: exit codes and output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from importer_helpers import SM70_LOG, valid_records

from forensics.cli import main
from forensics.store.writer import write_capture


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_import_then_inspect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "engine.log").write_text(SM70_LOG)
    out = tmp_path / "inc.capture"
    code, stdout, _ = run(["import", str(tmp_path / "engine.log"), "-o", str(out)], capsys)
    assert code == 0 and "3 records" in stdout
    code, stdout, _ = run(["inspect", str(out)], capsys)
    assert code == 0
    assert "async_output" in stdout and "embedding" in stdout and "cuda_assert" in stdout
    assert len(stdout.splitlines()) < 20
    code, stdout, _ = run(["inspect", str(out), "--json"], capsys)
    summary = json.loads(stdout)
    assert code == 0 and summary["records"] == 3 and summary["steps"] == [0, 40]
    assert summary["sites"] == {"async_output": 1, "embedding": 2}
    assert summary["ranks"] == [0, 1] and summary["truncated"] is False
    # the EngineDeadError line after the illegal memory access is its report, no event (T120a)
    assert summary["segments"] == 3 and len(summary["events"]) == 4
    assert summary["events"][-1]["engine_dead"]["line"] == 10
    assert summary["manifest"]["sources"] == ["engine.log"]


def test_existing_output_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "engine.log").write_text(SM70_LOG)
    out = write_capture(tmp_path / "old.capture", valid_records()[:1])
    code, _, err = run(["import", str(tmp_path / "engine.log"), "-o", str(out)], capsys)
    assert code == 2 and "exists" in err and "--force" in err and len(err.splitlines()) == 1
    code, _, _ = run(["import", str(tmp_path / "engine.log"), "-o", str(out), "--force"], capsys)
    assert code == 0


@pytest.mark.parametrize("content", ["bad_site", "float_step", "missing", "pickle"])
def test_bad_input_is_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           content: str) -> None:
    good = {"site": "embedding", "step": 0, "input_ids": torch.arange(3, dtype=torch.int32),
            "num_embeddings": 10}
    payload = {"bad_site": {**good, "site": "embeding"}, "float_step": {**good, "step": 2.5},
               "missing": {k: v for k, v in good.items() if k != "input_ids"},
               "pickle": {**good, "x": Path("/")}}[content]
    torch.save([good, payload], tmp_path / "dump.pt")
    out = tmp_path / "o.capture"
    code, _, err = run(["import", str(tmp_path / "dump.pt"), "-o", str(out)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "dump.pt" in err
    if content != "pickle":
        assert "record 1" in err and "embedding" in err
    assert not out.exists()


def test_inspect_missing_or_malformed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["inspect", str(tmp_path / "none.capture")], capsys)
    assert code == 2 and "does not exist" in err
    (tmp_path / "junk.capture").mkdir()
    (tmp_path / "junk.capture" / "manifest.json").write_text("{not json")
    code, _, err = run(["inspect", str(tmp_path / "junk.capture")], capsys)
    assert code == 2 and "manifest" in err and len(err.strip().splitlines()) == 1


def test_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("import", "inspect"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "example:" in capsys.readouterr().out
