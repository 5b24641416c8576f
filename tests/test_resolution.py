"""Resolution means the fix made it go away (issue 42, point 1): a variant resolves a baseline
finding only when its own replay no longer produces it and raises nothing in its place at that
record; a real-code ``IndexError`` is named after the access it came from (tensor, element,
row, request), or said to be raised at that record when no access explains it."""

from __future__ import annotations

from pathlib import Path

import pytest

import forensics
from forensics.outcome import Outcome
from forensics.present.conclusion import conclude, describe_finding
from forensics.records import Record
from forensics.variants import resolve_variant

DATA = Path(__file__).resolve().parents[1] / "data"
CONFIRMED = DATA / "incident-a-stale-prev-rows-confirmed.capture"
UPSTREAM = resolve_variant("upstream")


def like_real_code(record: Record) -> Outcome:
    """Code that behaves as unpatched vLLM and shows no accesses: it raises the model's own
    ``IndexError`` (torch's message) and otherwise returns the outputs alone."""
    outcome = UPSTREAM.run(record)
    if outcome.status == "index_error":
        raise IndexError(outcome.message.removeprefix("IndexError: "))
    return Outcome(outcome.status, outcome.message, outcome.outputs, None)


@pytest.fixture(scope="module")
def confirmed() -> forensics.ReplayResult:
    return forensics.replay(CONFIRMED, {"upstream": None, "code": like_real_code})


def test_code_raising_the_same_error_resolves_nothing_and_adds_nothing(confirmed) -> None:
    conclusion = conclude(confirmed)
    patch = conclusion.patch("code")
    assert patch is not None
    assert (patch.resolved, patch.total, patch.added, patch.failing) == (0, 12, 0, 12)
    text = conclusion.paragraph()
    assert "code leaves batch_change, prepare_input_ids in violation and resolves 0 of 12" in text
    assert "adding" not in text and "resolves 12" not in text
    assert "code: violation at batch_change,prepare_input_ids; resolves 0 of 12, adds 0, " \
           "still failing 12" in conclusion.line("code")


def test_a_real_code_index_error_names_the_access_it_came_from(confirmed) -> None:
    mine = confirmed.findings[confirmed.findings["variant"] == "code"]
    assert len(mine) == 4
    first = mine.iloc[0]
    assert (first["site"], first["step"], first["row"], first["element"], first["tensor"],
            first["req_id"], first["index_tensor"], first["index_at"], first["value"],
            first["upper"], first["value_class"]) == (
        "batch_change", 20, 1, 1, "valid_sampled_token_count", "req-1", "prev_positions", 1,
        4, 4, "stale_row")
    assert list(mine["tensor"]) == ["valid_sampled_token_count", "prev_sampled_token_ids"] * 2
    conclusion = conclude(confirmed)
    assert describe_finding(conclusion.first["code"]) == (
        "batch_change at step 20, rank 0, row 1 (request 'req-1'): `prev_positions[1] = 4` "
        "indexes `valid_sampled_token_count` (4 elements): a stale previous row")
    # the same first violation as upstream's: said once
    assert conclusion.paragraph().count("First violation") == 1


def test_an_index_error_no_access_explains_is_the_same_failure() -> None:
    records = [r for r in forensics.load(CONFIRMED).records()
               if r.site == "batch_change" and r.step == 20 and r.rank == 0]

    def odd(record: Record) -> Outcome:
        raise IndexError("index 77 is out of bounds for dimension 0 with size 5")

    result = forensics.replay(records, {"upstream": None, "odd": odd})
    mine = result.findings[result.findings["variant"] == "odd"]
    assert len(mine) == 1 and mine.iloc[0]["tensor"] is None
    conclusion = conclude(result)
    patch = conclusion.patch("odd")
    assert patch is not None
    assert (patch.resolved, patch.total, patch.added, patch.failing) == (0, 3, 0, 3)
    text = conclusion.paragraph()
    assert ("First violation (odd): batch_change at step 20, rank 0: variant odd raised "
            "IndexError at this record (index 77, size 5); no access of the site explains it"
            ) in text
    assert "outside its range" not in text


def test_a_fix_that_makes_the_error_go_away_resolves_it() -> None:
    result = forensics.replay(CONFIRMED, ["upstream", "patched"])
    patch = conclude(result).patch("patched")
    assert patch is not None and (patch.resolved, patch.total, patch.added, patch.failing) == (
        12, 12, 0, 0)


@pytest.mark.timeout(900)
def test_unpatched_vllm_does_not_resolve_the_crash_it_reproduces() -> None:
    pytest.importorskip("vllm")
    result = forensics.replay(CONFIRMED, ["vllm"])
    mine = result.findings
    assert list(mine["tensor"]) == ["valid_sampled_token_count", "prev_sampled_token_ids"] * 2
    assert list(mine["row"]) == [1] * 4 and list(mine["req_id"]) == ["req-1"] * 4
    text = conclude(result).paragraph()
    assert ("First violation (vllm): batch_change at step 20, rank 0, row 1 (request 'req-1'): "
            "`prev_positions[1] = 4` indexes `valid_sampled_token_count`") in text
    result = forensics.replay(CONFIRMED, ["upstream", "vllm"])
    patch = conclude(result).patch("vllm")
    assert patch is not None
    assert (patch.resolved, patch.total, patch.added, patch.failing) == (0, 12, 0, 12)


def test_a_capture_of_another_vllm_says_the_models_copy_another_version(tmp_path: Path) -> None:
    """Issue 42 point 8: a capture of vLLM 0.31.0 replayed through the 0.33.0 models says so."""
    import shutil

    from forensics.present.capture_facts import version_sentence

    copy = tmp_path / "old.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", copy)
    manifest = copy / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"vllm": "0.33.0"', '"vllm": "0.31.0"'))
    text = conclude(forensics.replay(copy)).paragraph()
    assert ("The capture comes from vLLM 0.31.0, while upstream, patched replay the code of "
            "vLLM 0.33.0") in text
    same = conclude(forensics.replay(DATA / "incident-b-vocab-sentinel.capture"))
    assert "The capture comes from vLLM" not in same.paragraph()
    # the vllm variant runs the installed vLLM's code: another version is said of it (T110e)
    installed = version_sentence({"vllm": "0.31.0"}, ["vllm"])
    assert installed.startswith("The capture comes from vLLM 0.31.0, while vllm replays the "
                                "code of the installed vLLM ")
