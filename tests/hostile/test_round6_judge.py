"""Hostile input, round 6: what we conclude (``forensics/judge/``, ``forensics/versions.py``,
``forensics/present/conclusion.py``, ``forensics/known/``) against a capture author who wants a
false sentence printed: a crafted version string, crafted steps, ranks, sites and request ids,
forged facts.

Every test builds its records and manifest in memory (no torch, no engine, no vLLM import) and
runs the judge as the replay does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from forensics.judge.clamp import clamps
from forensics.judge.continuity import CLAMPED
from forensics.judge.streams import continuity_of, v1_sites
from forensics.records import Record
from forensics.versions import release_of

SINK, PREPARE, CHANGE = v1_sites()

#: strings that are no version vLLM publishes: each must leave "whether it clamps" unknown
NOT_VERSIONS = ["v0.32", "999", "", "0.32.0\n0.31.0", " 0.32.0", "0.32.0 ", "0.33.0\n",
                "\uff10.\uff13\uff12.\uff10", "\u0660.\u0663\u0662.\u0660", "0.32.0-garbage",
                "0.33.0\x00", "00.32.0", "0.32.0 # 0.31.0"]
#: pre-releases and dev builds of a minor whose final release was read: may predate the clamp
NOT_FINAL = ["0.32.0rc1", "0.32.0.dev1234", "0.33.0.dev1234", "0.33.0rc2", "0.32.0a1",
             "0.33.1.dev5+g1234.d20260101"]


def _step(step: int, fed: list[int], prev_last: int, count: int, drafts: list[int],
          written: list[int] | None = None) -> list[Record]:
    """One V1 step of request ``req-a``: 3 scheduled ids (the last two drafts)."""
    prepare: dict[str, Any] = {
        "prev_sampled_token_ids": np.array([[prev_last]]), "cu_num_tokens": np.array([3]),
        "num_draft_tokens": np.array([2]), "prev_num_spec_tokens": 2,
        "draft_token_ids": np.array([drafts]), "req_ids": ["req-a"]}
    if written is not None:
        prepare["input_ids_device_after"] = np.array(written)
    positions = np.array([5, 6, 7]) + 2 * (step - 1)
    return [Record(CHANGE, step, 0, {"valid_sampled_token_count": np.array([count]),
                                     "prev_req_ids": ["req-a"]}),
            Record(PREPARE, step, 0, prepare),
            Record(SINK, step, 0, {"input_ids": np.array(fed), "num_embeddings": 100,
                                   "positions": positions})]


def _clamped_capture(version: Any, versions: dict[str, Any] | None = None) -> Any:
    """Step 2's staging wrote -1 where the request had 77 and the embedding read 0: whether
    that is "clamped to token 0" depends on whether the capture's vLLM clamps (``versions``:
    the manifest's whole ``versions`` object instead of ``{"vllm": version}``)."""
    records = (_step(1, [10, 11, 12], prev_last=10, count=1, drafts=[11, 12])
               + _step(2, [0, 30, 31], prev_last=77, count=2, drafts=[30, 31],
                       written=[-1, 30, 31]))
    manifest = {"versions": {"vllm": version} if versions is None else versions,
                "model": {"num_speculative_tokens": 2}}
    return continuity_of(lambda site: [r for r in records if r.site == site],
                         {r.site for r in records}, manifest)


def test_a_release_the_source_was_read_for_still_says_clamped() -> None:
    """The base of the attacks below: vLLM 0.32.0 clamps, so the -1 is named as clamped."""
    result = _clamped_capture("0.32.0")
    assert result.clamps is True
    assert [f["kind"] for f in result.findings] == [CLAMPED]
    assert "was clamped to token 0" in result.sentence()


@pytest.mark.parametrize("version", NOT_VERSIONS + NOT_FINAL)
def test_a_version_we_cannot_read_never_decides_the_clamp(version: str) -> None:
    """``"0.32.0\\n0.31.0"``, ``"0.32.0 "``, ``"0.32.0-garbage"`` were read as 0.32 (the text
    before the second dot), pre-releases and dev builds as their final release (a dev build of
    0.33 as the installed 0.33.0): the conclusion said the model read token 0 "clamped" for a
    vLLM whose clamp nobody read. Now whether it clamps is unknown, and no finding says so."""
    result = _clamped_capture(version)
    assert result.clamps is None
    assert result.findings == []
    assert "clamped" not in result.sentence()
    known, why = clamps(version, "v1", True)
    assert known is None and why.startswith("unknown whether")


@pytest.mark.parametrize("version", NOT_VERSIONS)
def test_a_string_that_is_no_version_parses_to_nothing(version: str) -> None:
    assert release_of(version) is None


@pytest.mark.parametrize(("version", "minor", "final"), [
    ("0.32.0", "0.32", True), ("0.32.1", "0.32", True), ("0.32.0+cpu", "0.32", True),
    ("0.33.0.post1", "0.33", True), ("0.32", "0.32", True), ("0.32.0rc1", "0.32", False),
    ("0.33.0.dev1234", "0.33", False)])
def test_a_version_as_releases_spell_it_is_read(version: str, minor: str, final: bool) -> None:
    release = release_of(version)
    assert release is not None and (release.minor, release.final) == (minor, final)


@pytest.mark.parametrize("versions", [{}, {"vllm": None}, {"vllm": 0.33}, {"vllm": 33},
                                      {"vllm": ["0.33.0"]}, {"vllm": {"0.33.0": 1}}])
def test_a_capture_that_names_no_vllm_is_not_judged_by_the_installed_one(
        versions: dict[str, Any]) -> None:
    """A manifest without ``versions.vllm`` (or a number, a list there) was judged by the vLLM
    installed where the replay runs, as if the capture named it: "clamped to token 0" for a
    capture from any vLLM at all. Only in-memory records (no manifest) use the installed one."""
    result = _clamped_capture(None, versions)
    assert result.clamps is None and result.findings == []
    assert "clamped" not in result.sentence()


def test_a_process_that_started_the_probe_again_and_died_is_called_died() -> None:
    """One process ran two probe sessions (two engines one after the other): the first stopped,
    the second was killed at step 9. Its start and stop were matched as sets, so the process
    counted as stopped: no crash, no "stopped without the probe's stop" sentence."""
    from forensics.known.evidence import crashed, unstopped
    from forensics.present.capture_facts import stopped_after

    events = [{"kind": "probe_start", "process": "h-1", "step": 0},
              {"kind": "probe_stop", "process": "h-1", "step": 5},
              {"kind": "probe_start", "process": "h-1", "step": 6},
              {"kind": "probe_start", "process": "h-2", "step": 0},
              {"kind": "probe_stop", "process": "h-2", "step": 9}]
    assert unstopped(events) == ["h-1"] and crashed(events)
    assert stopped_after({"events": events, "steps": [0, 9]}) == 9
    assert unstopped(events[:2] + events[3:]) == []  # each session stopped: no death


def _known_evidence(manifest: dict[str, Any], config: dict[str, Any]) -> Any:
    """The known-issue evidence of a capture whose one crash-dump event has ``config``."""
    from types import SimpleNamespace

    import pandas as pd

    from forensics.known.evidence import evidence_of

    events = [{"kind": "crash_dump", "step": 3, "rank": 0, "config": config}]
    capture = SimpleNamespace(summary=lambda: {"manifest": manifest, "events": events})
    return evidence_of(SimpleNamespace(  # type: ignore[arg-type]
        findings=pd.DataFrame(), variants=["upstream"], capture=capture, continuity=None))


def test_a_crash_dump_event_states_only_what_a_dump_config_line_holds() -> None:
    """Any key of a ``crash_dump`` event's ``config`` became a fact: an event (free data in the
    events file) claiming ``runner: v1`` and ``async_scheduling: false`` contradicted the
    entries of a V2 capture with async scheduling: "does not match: runner is v1"."""
    evidence = _known_evidence({"model": {}}, {"runner": "v1", "async_scheduling": False,
                                               "speculative": "mtp", "vllm": "0.33.0"})
    assert "runner" not in evidence.facts and "async_scheduling" not in evidence.facts
    assert evidence.facts["speculative"] == "mtp"


def test_a_fact_from_a_crash_dump_says_so_where_it_decides() -> None:
    """A fact the manifest does not state, taken from a crash dump's config line, decided a
    match (contradicted an entry) with no word of where it came from."""
    from forensics.known import load_catalogue
    from forensics.known.matching import match_entry

    entry = next(e for e in load_catalogue().entries if e.id == "all-placeholder-drafts-race")
    dumped = match_entry(entry, _known_evidence({"model": {}}, {"speculative": "eagle"}))
    assert dumped.contradicted == ["speculative is eagle, not mtp (from a crash dump's config "
                                   "line)"]
    stated = match_entry(entry, _known_evidence({"model": {"speculative": "eagle"}},
                                                {"speculative": "mtp"}))
    assert stated.contradicted == ["speculative is eagle, not mtp"]  # the manifest's wins


def _two_engines_at_one_rank() -> list[Record]:
    """Engine A's two steps of ``req-a`` (step 2 fed exactly what the request had), then a
    second engine's embedding record claiming the same step and rank (its own request's ids)."""
    records = (_step(1, [10, 11, 12], prev_last=10, count=1, drafts=[11, 12],
                     written=[10, 11, 12])
               + _step(2, [77, 30, 31], prev_last=77, count=2, drafts=[30, 31],
                       written=[77, 30, 31]))
    other = Record(SINK, 2, 0, {"input_ids": np.array([5, 6, 7]), "num_embeddings": 100,
                                "positions": np.array([0, 1, 2])})
    return [*records, other]


def test_a_step_two_engines_claim_is_not_judged_against_the_other_engine() -> None:
    """The records were paired by (step, rank), the last of a key winning: engine B's ids were
    judged against engine A's request, "input_ids[0] = 5 ... was fed token 5 where the request
    had token 77", a substitution no engine made. A step where a site holds two records is
    not judged now."""
    records = _two_engines_at_one_rank()
    manifest = {"versions": {"vllm": "0.33.0"}, "model": {"num_speculative_tokens": 2}}
    result = continuity_of(lambda site: [r for r in records if r.site == site],
                           {r.site for r in records}, manifest)
    assert result.findings == [] and "substituted" not in result.sentence()
    alone = records[:-1]  # the base: engine A alone is judged, step 2's three ids with it
    assert continuity_of(lambda site: [r for r in alone if r.site == site],
                         {r.site for r in alone}, manifest).judged == result.judged + 3


def test_the_race_check_compares_no_step_a_site_holds_twice() -> None:
    """The race check paired engine A's staging with engine B's embedding record at the same
    (step, rank): "3 element(s) disagree ... the embedding received input_ids[0] = 5", the
    unwritten-input evidence of a race that never happened. That step is not compared now,
    and the sentence says why."""
    from types import SimpleNamespace

    from forensics.judge.race import race_check

    records = _two_engines_at_one_rank()
    result = SimpleNamespace(records=records, index=None, variants=["upstream"], capture=None,
                             baseline_outputs={})
    check = race_check(result)  # type: ignore[arg-type]
    assert len(check.findings) == 0 and check.compared == 1  # step 1 still compared
    assert check.ambiguous == [(2, 0, SINK)]
    assert "1 step(s) were not compared: a site holds more than one record there" in \
        check.summary()


@pytest.fixture(scope="module")
def clean_runs() -> dict[str, list[Record]]:
    """Clean simulated V1 and V2 runs (no wrong token anywhere)."""
    from forensics.simulator.runs import simulate

    return {"v1": simulate("clean", steps=8, seed=1), "v2": simulate("v2-clean", steps=8, seed=1)}


@pytest.mark.parametrize(("runner", "sites", "step"), [
    ("v1", ("prepare_input_ids",), 3), ("v2", ("combine_tokens",), 3),
    ("v2", ("post_update",), 2), ("v2", ("combine_tokens", "post_update"), 3)])
def test_one_request_at_two_rows_is_judged_as_neither(clean_runs: dict[str, list[Record]],
                                                      runner: str, sites: tuple[str, ...],
                                                      step: int) -> None:
    """A step whose rows name one request twice (``req_ids = ["req-0", "req-0", ...]``): the
    second row's tokens, drafts and sampled ids were taken as the first's, and a clean run
    read "fed token 9693 where the request had token 24129 ... the output of this request is
    corrupt from this token on" at every later step. Neither row is judged now."""
    import copy

    records = copy.deepcopy(clean_runs[runner])
    for record in records:
        if record.site in sites and record.step == step:
            names = list(record["req_ids"])
            assert len(names) > 1
            record.fields["req_ids"] = [names[0], names[0], *names[2:]]
    manifest = {"runner": "v2"} if runner == "v2" else {
        "versions": {"vllm": "0.33.0"}, "model": {"num_speculative_tokens": 4}}
    clean = continuity_of(lambda site: [r for r in clean_runs[runner] if r.site == site],
                          {r.site for r in records}, manifest)
    result = continuity_of(lambda site: [r for r in records if r.site == site],
                           {r.site for r in records}, manifest)
    assert clean.verdict == "ok" and result.findings == [] and result.verdict == "ok"
    assert 0 < result.judged < clean.judged


def _oob(variant: str) -> dict[str, Any]:
    """An out-of-bounds finding of ``variant`` (a -1 read by the embedding at step 3)."""
    return {"variant": variant, "site": "embedding", "step": 3, "rank": 0, "row": 1,
            "element": 5, "tensor": "input_ids", "kind": "out_of_bounds", "value": -1,
            "lower": 0, "upper": 32000, "origin": None, "resolved": False}


@pytest.mark.parametrize(("variants", "verdict"), [
    (["patched"], "unexplained"), (["vllm+fix.diff"], "unexplained"),
    (["upstream"], "explained"), (["vllm"], "explained"), ([], "unexplained")])
def test_a_patchs_own_reads_explain_no_crash(variants: list[str], verdict: str) -> None:
    """An engine crash where the engine's code (upstream, unpatched vLLM) finds every value in
    range, and only the patched model reads out of range (a finding it adds, code the engine
    never ran): the crash verdict said "explained" and the entry for crashes with every value
    in range did not match."""
    import pandas as pd

    from forensics.known.answer import crash_verdict
    from forensics.known.evidence import Evidence
    from forensics.known.matching import evaluate

    events = [{"kind": "engine_exception", "step": 3, "rank": 0, "message": "illegal memory"}]
    evidence = Evidence(findings=pd.DataFrame([_oob(v) for v in variants]),
                        baseline="upstream", events=events)
    assert crash_verdict(evidence) == verdict
    held = evaluate({"crash_without_findings": True}, evidence).holds
    assert held is (verdict == "unexplained")


def test_a_silent_wrong_token_is_never_paired_across_two_engines_at_one_rank() -> None:
    """Engine A's staging wrote -1 and its embedding read -1 (a crash); engine B's embedding
    record claims the same step and rank and read 0 there. The last record of a key won: "the
    model was fed token 0 there instead: a wrong token, silently, not a crash" of an engine
    that crashed. A step a site holds twice is not paired now."""
    from forensics.judge.wrong_tokens import silent_inputs

    staged = Record(PREPARE, 3, 0, {"input_ids_device_after": np.array([4, -1, 5]),
                                    "vocab_size": 10})
    crashed = Record(SINK, 3, 0, {"input_ids": np.array([4, -1, 5]), "num_embeddings": 16})
    other = Record(SINK, 3, 0, {"input_ids": np.array([4, 0, 5]), "num_embeddings": 16})
    assert silent_inputs([staged, crashed, other]) == []
    assert silent_inputs([staged, other])  # the base: one engine's clamp is found


def test_a_previous_row_two_requests_claim_names_neither_as_its_holder() -> None:
    """``prev_req_id_to_index = {"a": 0, "b": 1, "c": 1}`` gives row 1 to b and c: the suspect
    sentence named whichever came last ("held by request c"). It names neither now, and says
    the capture gives that row to two requests."""
    from incident_records import by_site, clean_step

    import forensics
    from forensics.judge.suspects import describe_suspect, first_suspects

    change = by_site(clean_step(2, ["a", "b"]), "batch_change", 2)
    change.fields["prev_positions"] = np.array([1, 0], np.int32)
    change.fields.pop("prev_req_ids", None)
    change.fields["prev_req_id_to_index"] = {"a": 0, "b": 1, "c": 1}
    first = first_suspects(forensics.replay([change], ["upstream"]))["upstream"]
    assert first is not None and first["read_row"] == 1 and first["read_req_id"] is None
    assert "held by one of 2 requests the capture gives that row to ('b', 'c')" in \
        describe_suspect(first)


def test_the_first_crash_event_is_the_earliest_not_the_first_file_read() -> None:
    """Events are read file by file (``events-host-1000.jsonl`` before ``events-host-200``):
    "2 crash event(s) ... the first engine_exception at step 50" named a later crash first
    when another process's file held one at step 3; and a process's ``probe_start`` counted
    as a crash event ("the first probe_start at step 0") even where its probe stopped."""
    from types import SimpleNamespace

    import pandas as pd

    from forensics.known.answer import what_was_seen
    from forensics.known.evidence import Evidence
    from forensics.present.capture_facts import summary_facts

    events = [{"kind": "engine_exception", "step": 50, "rank": 0, "process": "host-1000"},
              {"kind": "probe_start", "step": 0, "rank": 0, "process": "host-200"},
              {"kind": "cuda_assert", "step": 3, "rank": 1, "process": "host-200"},
              {"kind": "probe_stop", "step": 3, "rank": 1, "process": "host-200"}]
    evidence = Evidence(findings=pd.DataFrame(), baseline="upstream", events=events)
    outcomes = pd.DataFrame(columns=["variant", "status", "step", "rank", "site", "message"])
    seen = what_was_seen(evidence, SimpleNamespace(outcomes=outcomes))  # type: ignore[arg-type]
    assert seen == ("2 crash event(s) in the capture, the first cuda_assert at step 3; the "
                    "upstream replay raises nothing")
    died = what_was_seen(Evidence(findings=pd.DataFrame(), baseline="upstream",
                                  events=events[1:2]),
                         SimpleNamespace(outcomes=outcomes))  # type: ignore[arg-type]
    assert died.startswith("no crash event in the capture; 1 process(es) died without the "
                           "probe's stop (host-200)")
    facts = summary_facts({"manifest": {}, "events": events, "ranks": [0, 1], "steps": [0, 50]})
    assert facts["events"][0].startswith("cuda_assert at step 3")


@pytest.mark.parametrize("runner", ["v2\u200b", "v2 ", "\u0441v2", "v\uff12", "v2\nv1"])
def test_a_fact_spelled_as_no_name_neither_matches_nor_contradicts(runner: Any) -> None:
    """A manifest ``runner`` of ``"v2\\u200b"`` (a zero-width space) contradicted the V2
    entries: "does not match: runner is v2, not v2" (the invisible character printed as
    nothing). A value spelled as no name is "recorded as ..., not as a name": unknown."""
    from forensics.known import load_catalogue
    from forensics.known.matching import match_entry

    entry = next(e for e in load_catalogue().entries if e.id == "v2-zeros-embedded")
    match = match_entry(entry, _known_evidence({"runner": runner}, {}))
    assert match.contradicted == []
    assert match.unknown == [f"runner recorded as {str(runner).lower()!r}, not as a name"]
