"""Round 15, attack B: what the known issues and a shared capture say.

- A known-issue entry that needs "a crash and no value out of range in the engine's own code"
  matched a capture replayed through the fix alone (``known --variant patched``), whose
  engine code was never replayed, and said so as its evidence (T79a).
- A V1 capture whose manifest names no runner matched Model Runner V2's known issues when its
  token continuity lacked a field (a shrunk capture always does): its records, V1's own
  sites, say which runner ran (T79b).
- ``redact`` refused every V2 capture whose first finding is an id that indexes a row of
  ``output_bin_counts`` (the buffer is no record field, and its name was taken for a summary
  record's dropped ``tensor``) (T79c).
- ``negative-draft-id-verified`` matched every async-scheduling crash dump: the scheduler's
  drafts are all -1 placeholders there (T79d).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import forensics
from forensics.cli import main
from forensics.known import answer
from forensics.known.matching import Match

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
#: a V1 capture with a crash event and values out of range in the engine's code (upstream)
SENTINEL = DATA / "incident-b-vocab-sentinel.capture"
#: an engine exception naming a GDN kernel: the words `gdn-accepted-count-race` looks for
GDN_CRASH = {"kind": "engine_exception", "rank": 0, "step": 14,
             "error": "RuntimeError: CUDA error: an illegal memory access was encountered in "
                      "fused_recurrent_gated_delta_rule"}


def _gdn_capture(tmp_path: Path) -> Path:
    """The vocab-sentinel incident (upstream finds 248320 out of range) with a GDN crash."""
    capture = tmp_path / "gdn.capture"
    shutil.copytree(SENTINEL, capture)
    (capture / "expected.json").unlink()
    (capture / "events-w0.jsonl").write_text(json.dumps(GDN_CRASH) + "\n")
    return capture


def _match(capture: Path, entry: str, variants: list[str]) -> Match:
    """How catalogue entry ``entry`` fares against ``capture`` replayed through ``variants``."""
    known = answer(forensics.replay(capture, variants=variants))
    return next(m for m in known.checked if m.entry.id == entry)


def test_a_crash_without_findings_is_not_judged_from_the_fix_alone(tmp_path: Path) -> None:
    capture = _gdn_capture(tmp_path)
    with_engine = _match(capture, "gdn-accepted-count-race", ["upstream", "patched"])
    assert not with_engine.matched  # upstream finds 248320 out of range: no "crash without"
    alone = _match(capture, "gdn-accepted-count-race", ["patched"])
    assert not alone.matched, alone.explain()  # it said "matches: a crash event and no value
    # out of range in the engine's own code" of code that was never replayed
    assert "no value out of range in the engine's own code" not in alone.explain()
    assert any("engine's code" in why and "replayed" in why for why in alone.missing)


def test_known_through_the_fix_alone_names_no_known_issue(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = _gdn_capture(tmp_path)
    assert main(["known", str(capture), "--variant", "patched", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["crash_verdict"] == "not judged" and data["matches"] == []


@pytest.fixture(scope="module")
def shrunk_v1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shrunk V1 capture (misattributed rows and the tokens they fed): the simulator's V1
    manifest names no runner, and the shrunk records lack `batch_change.prev_req_ids` of the
    steps dropped, so its token continuity is judged in part."""
    folder = tmp_path_factory.mktemp("shrunk")
    source = folder / "m.capture"
    forensics.simulate("misattribution", steps=60, seed=3, batch=4, vocab=1000, out=source)
    from forensics.share.shrinking import shrink

    shrink(source, folder / "s.capture")
    return folder / "s.capture"


def test_a_v1_capture_matches_no_v2_known_issue(shrunk_v1: Path) -> None:
    capture = forensics.load(shrunk_v1)
    assert "runner" not in json.dumps(capture.manifest)  # the manifest names none
    assert {"prepare_input_ids", "batch_change"} <= set(capture.sites)  # V1's own sites
    result = forensics.replay(capture)
    assert result.continuity.needs  # judged in part: the runner was left unknown
    known = answer(result)
    matched = [m.entry.id for m in known.matches]
    # it said "Known issue v2-pd-first-draft-bos ...: Model Runner V2 with P/D
    # disaggregation writes token 0 (BOS)" and "v2-zeros-embedded" of a V1 capture
    assert not [name for name in matched if name.startswith("v2-")], matched
    assert "stale-prev-positions-row" in matched
    for entry in ("v2-pd-first-draft-bos", "v2-zeros-embedded"):
        check = next(m for m in known.checked if m.entry.id == entry)
        assert "runner is v1, not v2" in check.contradicted


def test_the_runner_of_a_capture_is_none_where_its_sites_say_none() -> None:
    from forensics.sites.runners import runner_of_sites

    assert runner_of_sites(["embedding", "prepare_input_ids"]) == "v1"
    assert runner_of_sites(["embedding", "post_update", "combine_tokens"]) == "v2"
    assert runner_of_sites(["embedding"]) is None  # the sink is both runners'
    assert runner_of_sites(["batch_change", "post_update"]) is None  # both: unknown


def test_redact_keeps_a_v2_finding_into_output_bin_counts(tmp_path: Path) -> None:
    source = tmp_path / "v.capture"
    forensics.simulate("v2-vocab-sample", steps=60, seed=3, batch=4, vocab=1000, out=source)
    first = forensics.replay(source).first_finding("upstream")
    assert first is not None and first["tensor"] == "output_bin_counts"  # no record field
    from forensics.share.redaction import redact

    # refused: "its replay differs from the original's: ... tensor 'sampled_tokens' ->
    # 'output_bin_counts'" (the expected finding rewritten as a summary record's)
    done = redact(source, tmp_path / "r.capture")
    kept = done.evidence.first["upstream"]
    assert kept is not None and kept["tensor"] == "output_bin_counts"
    again = forensics.replay(done.path).first_finding("upstream")
    assert again is not None and again["tensor"] == "output_bin_counts"


def test_redact_still_names_a_summary_records_dropped_tensor_by_its_default(
        tmp_path: Path) -> None:
    """A summary record's `tensor` that names no known field is dropped by redaction: its
    finding reads as the site's default tensor in the shared capture, as before."""
    import numpy as np

    from forensics.records import Record
    from forensics.share.redaction import redact
    from forensics.store.writer import write_capture

    records = [Record("embedding", 3, 0, {"min": 2, "max": 140, "num_embeddings": 100,
                                          "tensor": "private_buffer"}, summary=True),
               Record("embedding", 4, 0, {"input_ids": np.array([1, 5, 7]),
                                          "num_embeddings": 100})]
    source = write_capture(tmp_path / "s.capture", records,
                           {"model": {"vocab_size": 100, "num_embeddings": 100}})
    first = forensics.replay(source).first_finding("upstream")
    assert first is not None and first["tensor"] == "private_buffer"
    done = redact(source, tmp_path / "r.capture")
    shared = forensics.replay(done.path).first_finding("upstream")
    assert shared is not None and shared["tensor"] == "input_ids"


LOGS = ROOT / "tests" / "data"


def _dump_known(log: str, tmp_path: Path) -> dict[str, object]:
    """`forensics known --json` of a capture imported from the crash-dump log ``log``."""
    from forensics.importers import import_sources

    capture = tmp_path / f"{log}.capture"
    import_sources([LOGS / log], capture)
    known = answer(forensics.replay(capture))
    return {m.entry.id: m for m in known.checked}  # type: ignore[return-value]


def test_the_async_schedulers_placeholder_drafts_are_no_negative_draft_id(
        tmp_path: Path) -> None:
    """vLLM's AsyncScheduler schedules every draft of a decode request as -1 (its
    placeholders, ``[-1] * num_spec_tokens``): a dump of an async-scheduling run lists them so
    whatever happened. The entry for a -1 draft id reaching the rejection sampler matched
    every such dump ("the crash dump schedules 8 of 8 spec-decode tokens as -1")."""
    every = _dump_known("vllm_dump_all_placeholder.log", tmp_path)
    negative = every["negative-draft-id-verified"]
    assert not negative.matched, negative.explain()  # type: ignore[attr-defined]
    assert every["all-placeholder-drafts-race"].matched  # type: ignore[attr-defined]
    some = _dump_known("vllm_dump_some_placeholder.log", tmp_path)  # -1 beside drafted ids
    assert some["negative-draft-id-verified"].matched  # type: ignore[attr-defined]
