"""``forensics known``: the catalogue, and a capture's matches; the demo names them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.cli import main
from forensics.known import load_catalogue
from forensics.present.demo import DemoRow, format_table, known_line

ROOT = Path(__file__).resolve().parents[2]


def test_known_lists_the_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["known"]) == 0
    text = capsys.readouterr().out
    for entry in load_catalogue().entries:
        assert f"{entry.id}: {entry.title}" in text
    assert "  threads: #40756 (issue, open), #42603 (pr, closed)" in text
    assert main(["known", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["id"] for d in data] == [e.id for e in load_catalogue().entries]
    vocab = next(d for d in data if d["id"] == "vocab-size-sentinel-counted")
    assert vocab["fix"] == "PR 1CatAI/1Cat-vLLM#625 (first release: none upstream)"


def test_known_capture_explains_every_entry(capsys: pytest.CaptureFixture[str]) -> None:
    capture = ROOT / "data" / "placeholder-leak.capture"
    assert main(["known", str(capture)]) == 0
    lines = capsys.readouterr().out.splitlines()
    marks = [line.split()[0] for line in lines[1:] if line.startswith(("MATCH", "no "))]
    assert marks == ["MATCH"] + ["no"] * 9
    text = " ".join(" ".join(lines).split())
    # issue 42 point 3: the verdict names what it saw, not only "no crash"
    assert ("placeholder-leak.capture: crash verdict no crash (no crash event in the capture; "
            "the upstream replay raises nothing)") in text
    assert ("MATCH placeholder-reaches-input-ids: matches: upstream finds prepare_input_ids step "
            "39: out.input_ids_device[30] = -1 (placeholder)") in text


def test_a_missing_capture_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["known", str(tmp_path / "none.capture")]) == 2
    assert "none.capture" in capsys.readouterr().err


def test_the_demo_table_names_known_issues() -> None:
    import forensics

    result = forensics.replay(ROOT / "data" / "incident-b-vocab-sentinel.capture")
    line = known_line(result)
    assert line == ("crash verdict explained (2 crash event(s) in the capture, the first "
                    "cuda_assert at step 14; the upstream replay raises IndexError at step 14 "
                    "(embedding, rank 0)); known issues: vocab-size-sentinel-counted "
                    "(1CatAI/1Cat-vLLM#625 (pr, open))")
    row = DemoRow("incident-b", "embedding", "violation", "ok", "-", line)
    assert format_table([row]).endswith(f"known issues (forensics known CAPTURE):\n"
                                        f"incident-b: {line}")
