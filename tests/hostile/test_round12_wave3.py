"""Round 12, wave 3: manifest facts of the wrong type are unknown in triage (T54a), a diff
variant is named by its file name in shared outputs (T54b), a combining mark never draws onto
an escape (T54c)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from forensics.fleet.generate import Fleet, simulate_fleet
from forensics.fleet.output import render, write_html, write_table
from forensics.fleet.triage import Triage, triage

HUGE = 10**40


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return simulate_fleet(tmp_path_factory.mktemp("fleet"), count=3, steps=4, batch=2)


def _clean(fleet: Fleet) -> Path:
    return next(p for p, k in fleet.kinds.items() if k == "clean")


@pytest.fixture(scope="module")
def bad(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> tuple[Triage, Path]:
    """A clean capture beside a copy whose manifest holds facts of the wrong type."""
    root = tmp_path_factory.mktemp("bad")
    good = root / "good.capture"
    shutil.copytree(_clean(fleet), good)
    hostile = root / "hostile.capture"
    shutil.copytree(_clean(fleet), hostile)
    manifest = json.loads((hostile / "manifest.json").read_text())
    manifest["engine_id"] = {"x": [1]}
    manifest["versions"]["vllm"] = HUGE
    manifest["process"]["pid"] = -5
    manifest["runner"] = "r" * 10_000
    (hostile / "manifest.json").write_text(json.dumps(manifest))
    return triage([root], workers=1), root


def _row(result: Triage, name: str) -> dict[str, object]:
    return next(r for r in result.rows if r["name"] == name)


def test_a_fact_of_the_wrong_type_is_unknown_and_named_refused(bad: tuple[Triage, Path]) -> None:
    result, _ = bad
    row = _row(result, "hostile.capture")
    assert (row["engine_id"], row["vllm"], row["pid"], row["runner"]) == \
        ("unknown", "unknown", None, "v1")  # the runner the V1 sites recorded show (T98g)
    assert not row["error"]
    for field in ("engine_id is not a string", "versions.vllm is not a string",
                  "process.pid is not a process id", "runner is not a string"):
        assert f"manifest field {field}" in str(row["refused"])


def test_the_other_capture_is_untouched(bad: tuple[Triage, Path], fleet: Fleet) -> None:
    result, _ = bad
    good = _row(result, "good.capture")
    alone = triage([_clean(fleet)], workers=1).rows[0]
    keep = ("engine_id", "vllm", "pid", "runner", "host", "conclusion", "refused")
    assert {k: good[k] for k in keep} == {k: alone[k] for k in keep}
    assert good["refused"] == "" and good["vllm"] != "unknown"


def test_no_output_shows_the_refused_values(bad: tuple[Triage, Path], tmp_path: Path) -> None:
    result, _ = bad
    texts = [render(result, "text"), render(result, "markdown"), render(result, "json")]
    with open(write_table(result, tmp_path / "t.csv"), newline="") as handle:
        texts.append(json.dumps(list(csv.DictReader(handle))))
    texts.append(json.dumps(pq.read_table(write_table(result, tmp_path / "t.parquet"))
                            .to_pylist()))
    index = write_html(result, tmp_path / "html", report=lambda c, out: None)
    texts.append(index.read_text())
    for text in texts:
        assert str(HUGE) not in text and "'x'" not in text and "r" * 300 not in text
        assert "engine_id is not a string" in text


@pytest.mark.parametrize(("text", "shown"), [
    ("\x1e\u0301", "\\x1e\\u0301"), ("\u0301abc", "\\u0301abc"),
    ("a\x1b\u0301\u20dd.", "a\\x1b\\u0301\\u20dd."), ("\\\x07\u0903", "\\\\\\x07\\u0903")])
def test_a_combining_mark_after_an_escape_is_escaped(text: str, shown: str) -> None:
    from forensics.escaping import terminal

    assert terminal(text) == shown


@pytest.mark.parametrize("text", ["caf\u00e9", "na\u00efve/\u0915\u094d\u0937",
                                  "\u00c5ngstr\u00f6m"])
def test_an_nfc_name_with_its_accents_prints_unchanged(text: str) -> None:
    from forensics.escaping import shell_word, terminal

    assert terminal(text) == text and shell_word(text) == f"'{text}'"


def test_a_shell_word_escapes_the_mark_after_an_escape_and_reads_back(tmp_path: Path) -> None:
    import subprocess

    from forensics.escaping import shell_word

    for text in ("x\x1e\u0301y", "\u0301lead"):
        word = shell_word(text)
        assert "\u0301" not in word and "\\314\\201" in word
        out = subprocess.run(["sh", "-c", f"printf %s {word}"], capture_output=True,
                             check=True).stdout.decode()
        assert out == text


REPO = Path(__file__).resolve().parents[2]


def test_a_report_names_a_diff_variant_by_its_file_name_not_its_folders(tmp_path: Path) -> None:
    from forensics.present.report import write_report

    folder = tmp_path / "home-of-alice-secret"
    folder.mkdir()
    diff = folder / "vocab-guard.diff"
    shutil.copy(REPO / "data" / "patches" / "vocab-guard.diff", diff)
    other = tmp_path / "other" / "vocab-guard.diff"  # same name, another content
    other.parent.mkdir()
    other.write_bytes(diff.read_bytes() + b"\n")
    page = write_report(REPO / "data" / "incident-b-vocab-sentinel.capture",
                        tmp_path / "r.html", variants=["upstream", f"vllm+{diff}"]).read_text()
    assert "home-of-alice-secret" not in page and str(tmp_path) not in page
    from forensics.variants.vllm_diff import shared_name

    assert shared_name(diff) in page and shared_name(diff) != shared_name(other)
    assert shared_name(diff).startswith("vllm+vocab-guard.diff@")
