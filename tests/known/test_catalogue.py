"""Every catalogue entry matches a capture or log of the tests, and does not match another."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

import forensics
from forensics.importers import import_sources
from forensics.known import answer, load_catalogue

ROOT = Path(__file__).resolve().parents[2]
DATA, LOGS = ROOT / "data", ROOT / "tests" / "data"

#: entry id -> (a capture or log it matches, one it does not match)
CASES = {
    "placeholder-reaches-input-ids": ("placeholder-leak.capture", "clean.capture"),
    "all-placeholder-drafts-race": ("vllm_dump_all_placeholder.log",
                                    "vllm_dump_some_placeholder.log"),
    "negative-draft-id-verified": ("vllm_dump_some_placeholder.log",
                                   "vllm_dump_no_placeholder.log"),
    "stale-prev-positions-row": ("incident-a-stale-prev-rows-confirmed.capture",
                                 "incident-a-stale-prev-rows-refuted.capture"),
    "output-placeholders-underflow": ("vllm_dump_output_placeholders.log",
                                      "vllm_dump_all_placeholder.log"),
    "gdn-accepted-count-race": ("vllm_gdn_illegal_access.log", "vllm_dump_all_placeholder.log"),
    "logits-processors-see-placeholders": ("vllm_logits_processor_error.log",
                                           "vllm_gdn_illegal_access.log"),
    "vocab-size-sentinel-counted": ("incident-b-vocab-sentinel.capture",
                                    "placeholder-leak.capture"),
    "v2-pd-first-draft-bos": ("v2-zeroed-combine.capture", "v2-wrong-last-token.capture"),
    "v2-zeros-embedded": ("v2-wrong-last-token.capture", "v2-zeroed-combine.capture"),
}


@cache
def _known(name: str, tmp: str):  # noqa: ANN202
    if name.endswith(".log"):
        source = Path(tmp) / f"{name}.capture"
        import_sources([LOGS / name], source, force=True)
    else:
        source = DATA / name
    return answer(forensics.replay(source))


def known_of(name: str, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """The KnownAnswer of a bundled capture or of a test log imported into a capture."""
    return _known(name, str(tmp_path_factory.getbasetemp()))


def test_every_entry_has_cases() -> None:
    assert sorted(e.id for e in load_catalogue().entries) == sorted(CASES)


@pytest.mark.parametrize("entry", sorted(CASES))
def test_entry_matches_its_case(entry: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    known = known_of(CASES[entry][0], tmp_path_factory)
    match = next(m for m in known.checked if m.entry.id == entry)
    assert match.matched, match.explain()
    assert match.evidence and not match.missing and not match.contradicted


@pytest.mark.parametrize("entry", sorted(CASES))
def test_entry_does_not_match_its_counter_case(entry: str,
                                               tmp_path_factory: pytest.TempPathFactory) -> None:
    known = known_of(CASES[entry][1], tmp_path_factory)
    match = next(m for m in known.checked if m.entry.id == entry)
    assert not match.matched
    assert match.explain().startswith("does not match: ")


def test_log_alone_with_all_spec_tokens_minus_one_matches_40756(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    known = known_of("vllm_dump_all_placeholder.log", tmp_path_factory)
    race = next(m for m in known.matches if m.entry.id == "all-placeholder-drafts-race")
    assert [r.number for r in race.entry.refs][0] == 40756
    assert race.evidence[0] == ("the crash dump schedules 8 of 8 spec-decode tokens as -1 over "
                                "2 request(s)")
    assert known.crash_verdict == "unexplained"
    assert known.lead().startswith("Not explained: ")


def test_incident_b_names_the_fork_fix(tmp_path_factory: pytest.TempPathFactory) -> None:
    known = known_of("incident-b-vocab-sentinel.capture", tmp_path_factory)
    assert [m.entry.id for m in known.matches] == ["vocab-size-sentinel-counted"]
    sentence = known.known_sentence()
    assert "1CatAI/1Cat-vLLM#625 (pr, open)" in sentence
    assert "async_output step 13: out.output_tail[1][2] = 248320 (vocab_size)" in sentence
    assert "fix: PR 1CatAI/1Cat-vLLM#625" in sentence


def test_sm70_log_alone_matches_the_vocab_sentinel(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Incident B's own log lines (summary records, no origin) match from the log alone."""
    known = known_of("sm70_engine.log", tmp_path_factory)
    assert "vocab-size-sentinel-counted" in [m.entry.id for m in known.matches]


def test_unverified_thread_is_marked_unknown() -> None:
    entry = next(e for e in load_catalogue().entries if e.id == "placeholder-reaches-input-ids")
    assert entry.refs[0].number == 44734
    assert entry.refs[0].state == "unknown" and not entry.refs[0].verified
    assert entry.refs[0].label() == "#44734 (issue, unknown) [not verified]"


def test_every_reference_carries_a_checked_state() -> None:
    for entry in load_catalogue().entries:
        for ref in entry.refs:
            assert ref.verified or ref.state == "unknown", (entry.id, ref)


def test_every_entry_says_when_its_threads_were_checked_or_that_they_were_not() -> None:
    """``checked = YYYY-MM-DD`` per entry (issue 40); an entry not re-read says "unknown"."""
    import re

    for entry in load_catalogue().entries:
        assert entry.checked == "unknown" or re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry.checked)
    checked = {e.id for e in load_catalogue().entries if e.checked != "unknown"}
    assert {"placeholder-reaches-input-ids", "all-placeholder-drafts-race",
            "gdn-accepted-count-race", "v2-pd-first-draft-bos", "v2-zeros-embedded"} <= checked


def test_a_clamped_placeholder_is_the_silent_shape_of_the_leak(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """On vLLM 0.33.0 (the capture's) the leak is read as token 0: the entry matches the
    clamped_placeholder finding, and the catalogue no longer calls it a crash."""
    known = known_of("placeholder-leak.capture", tmp_path_factory)
    match = next(m for m in known.checked if m.entry.id == "placeholder-reaches-input-ids")
    assert match.matched
    assert "clamped" not in match.entry.title or "token 0" in match.entry.title
    assert "reaches the embedding" not in match.entry.title
