"""Round 20's fix20b (issue 38, "Hostile input, round 3"): false sentences found this round and
left open (T119a.. of docs/threat-model.md).

- T119a: a variant that cannot see a Model Runner V2 ``post_update`` finding (its count of an id
  vocab_size lands in the next slot's row of ``output_bin_counts``, inside the buffer) was said
  to miss "a read inside an allocation": the kernel adds to the count, a read-modify-write.
- T119b: a log imported whose crash line follows a probe line naming no step (its step only the
  line's order) gave the crash that ordinal step: ``known`` and ``summary`` said "the first
  cuda_assert at step 0", a step the log never said.
- T119c: a ``probe_stop`` whose ``records`` count more than its ``written`` and ``dropped`` (a
  SIGTERM's close run while the main thread was between counting a record and queueing it):
  that record was never written, and every reader, reading ``dropped`` alone, said nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_round2 import run_cli

import forensics
from forensics.outcome import Outcome
from forensics.present.conclusion import conclude, next_steps
from forensics.records import Record
from forensics.sites import SITES, get_site
from forensics.sites.base import READ, READ_MODIFY_WRITE, WRITE

DATA = Path(__file__).resolve().parents[2] / "data"


# ------------------------------ T119a: what the access does, as the site declares it


def counted_past_the_row() -> Record:
    """``v2-vocab-sample``'s ``post_update`` record of step 11 whose request 'req-5' samples
    the id vocab_size second: its count lands in the next slot's row of ``output_bin_counts``
    (inside the buffer: nothing raises)."""
    [record] = [r for r in forensics.load(DATA / "v2-vocab-sample.capture").records()
                if r.site == "post_update" and r.step == 11]
    fields = dict(record.fields)
    sampled = np.array(fields["sampled_tokens"]).copy()
    sampled[1] = [108621, 80594, 151936, 52827]
    after = np.array(fields["last_sampled_tokens_after"]).copy()
    after[1] = 52827
    fields.update(sampled_tokens=sampled, last_sampled_tokens_after=after)
    return Record("post_update", 11, 0, fields)


def _blind(record: Record) -> Outcome:
    """Code that raises nothing and shows no accesses (as the V2 kernel in the interpreter)."""
    return Outcome("ok", "", {}, None)


def test_an_unseen_count_is_a_read_modify_write() -> None:
    """The paragraph and the next step name what the kernel does to ``output_bin_counts``."""
    result = forensics.replay([counted_past_the_row()], {"upstream": None, "blind": _blind})
    unseen = result.findings[result.findings["variant"] == "blind"]
    assert list(unseen["tensor"]) == ["output_bin_counts"] and not unseen["judged"].any()
    conclusion = conclude(result)
    text = conclusion.paragraph()
    assert "a read inside an allocation" not in text, text
    assert ("blind cannot see 1 of the 1 upstream out-of-bounds findings (a read-modify-write "
            "inside an allocation raises nothing and blind shows no accesses)") in text, text
    step = next(s for s in next_steps(conclusion) if "blind cannot see" in s)
    assert "(read-modify-writes inside an allocation)" in step, step
    assert json.loads(json.dumps(conclusion.to_json()))["unseen_access"] == {
        "blind": [READ_MODIFY_WRITE]}


#: what each V2 kernel does to each tensor it indexes (its module docstring; vLLM 0.32/0.33)
DECLARED = {
    "post_update": {"num_computed_tokens": READ_MODIFY_WRITE, "total_len": READ_MODIFY_WRITE,
                    "output_bin_counts": READ_MODIFY_WRITE, "last_sampled_tokens": WRITE,
                    "draft_tokens_out": WRITE, "all_token_ids": WRITE,
                    "sampled_tokens": READ},
    "combine_tokens": {"input_ids": WRITE, "prefill_len": READ, "last_sampled_tokens": READ,
                       "draft_tokens": READ, "draft_tokens.column": READ},
}


@pytest.mark.parametrize("site", sorted(DECLARED))
def test_each_kernels_accesses_have_their_true_word(site: str) -> None:
    """Every tensor the V2 kernels index has the word of what the kernel does to it."""
    for tensor, word in DECLARED[site].items():
        assert get_site(site).access_word(tensor) == word, (site, tensor)


def test_only_the_kernels_that_write_declare_writes() -> None:
    """The other sites' code reads at every index it checks (gathers, lookups, embedding)."""
    assert {name for name in SITES if get_site(name).writes} == set(DECLARED)


# ------------------------------ T119b: a crash after a probe line naming no step


#: the SM70 fork's probe line (no step), then a device-side assert and its CUDA error
_PROBE = "SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=0 max=7{step}\n"
_CRASH = ("/x/y/IndexKernel.cu:92: block: [0,0,0], thread: [0,0,0] Assertion `-sizes[i] <= "
          'index && index < sizes[i] && "index out of bounds"` failed.\n'
          "RuntimeError: CUDA error: device-side assert triggered\n")


def _imported(tmp_path: Path, capsys: pytest.CaptureFixture[str], step: str = "") -> Path:
    """The capture ``forensics import`` makes of the log (its probe line's ``step``)."""
    log = tmp_path / "engine.log"
    log.write_text(_PROBE.format(step=step) + _CRASH)
    code, _, err = run_cli(capsys, "import", log, "-o", tmp_path / "log.capture")
    assert code == 0, err
    return tmp_path / "log.capture"


def test_a_crash_after_a_line_naming_no_step_is_at_an_unknown_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The event keeps its step (the lines' order: it places the event among the log's
    records) and says it is not known; ``known``, ``summary`` and ``inspect`` say the step is
    unknown, with the log's line, never "at step 0"."""
    capture = _imported(tmp_path, capsys)
    events = [json.loads(line) for line in
              (capture / "events-w0.jsonl").read_text().splitlines()]
    assert [(e["kind"], e["line"], e["step"], e["step_known"]) for e in events] == [
        ("cuda_assert", 2, 0, False), ("cuda_error", 3, 0, False)]
    for command in (("known",), ("summary", "--format", "text")):
        code, out, err = run_cli(capsys, *command, capture)
        said = " ".join(out.split())
        assert code in (0, 1), err
        assert "at step 0" not in said, said
        assert "the first cuda_assert at an unknown step (line 2 of the log)" in said, said
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 0 and "engine.log:2 step unknown" in out and "step 0" not in out, out


def test_a_crash_after_a_line_naming_its_step_is_at_that_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A probe line that names its step (``step=7``) still places the crash after it."""
    capture = _imported(tmp_path, capsys, " step=7")
    code, out, err = run_cli(capsys, "known", capture)
    assert code in (0, 1), err
    assert "the first cuda_assert at step 7;" in " ".join(out.split()), out
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 0 and "engine.log:2 step 7" in out, out


def test_triage_says_the_first_crash_step_is_unknown() -> None:
    """The triage table's crash column says so too (``cuda_assert x1 (first at an unknown
    step (line 2 of the log))``)."""
    from forensics.fleet.facts import event_text

    events = [{"kind": "cuda_assert", "line": 2, "step": 0, "step_known": False,
               "source": "engine.log"}]
    assert event_text(events, ("cuda_assert",)) == (
        "cuda_assert x1 (first at an unknown step (line 2 of the log))")


# ------------------------------ T119c: records counted, neither written nor dropped


def _stopped(tmp_path: Path, counts: str, start: bool = True) -> Path:
    """The bundled clean capture in a folder of its own, its probe's stop holding ``counts``
    (``start``: its probe's start before it)."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    capture = folder / "stopped.capture"
    shutil.copytree(DATA / "clean.capture", capture)
    (capture / "events-w0.jsonl").write_text(
        '{"kind": "probe_start", "step": 0, "rank": 0}\n' * start +
        '{"kind": "probe_stop", "step": 200, "rank": 0, ' + counts + '}\n')
    return capture


@pytest.mark.parametrize("command", ["replay", "summary"])
def test_a_record_counted_and_never_written_is_said(
        tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """900 records counted, 899 written, none dropped: one was never written; no variant
    judged it, so whether the capture shows a failure is not known."""
    capture = _stopped(tmp_path, '"records": 900, "written": 899, "dropped": 0')
    code, out, err = run_cli(capsys, command, capture)
    said = " ".join(out.split())
    assert code == 0, err
    assert ("1 record(s) were recorded by the probe and never written (1 counted in its "
            "probe_stop's records, yet neither written nor dropped): no variant judged them"
            ) in said, said
    assert "shows no failure to report" not in said, said


def test_dropped_and_unaccounted_records_are_counted_together(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """99 dropped and 1 unaccounted: 100 never written, each reason said; ``inspect`` lists
    the count apart and ``triage`` says the capture is not judged."""
    capture = _stopped(tmp_path, '"records": 900, "written": 800, "dropped": 99')
    code, out, err = run_cli(capsys, "summary", capture)
    assert code == 0, err
    assert ("100 record(s) were recorded by the probe and never written (its ring full, or its "
            "writer stalled or failing; 1 of them counted in its probe_stop's records, yet "
            "neither written nor dropped)") in " ".join(out.split()), out
    code, out, err = run_cli(capsys, "inspect", capture)
    assert code == 0 and "  records unaccounted: 1" in out.splitlines(), out
    code, out, err = run_cli(capsys, "triage", capture.parent)
    said = " ".join(out.split())
    assert code == 0 and "records not judged (records never written)" in said, said
    assert ": clean" not in said, said


def test_counts_that_add_up_or_are_no_counts_add_nothing() -> None:
    """Counts that add up (or exceed: written again) and counts that are no int64 add none."""
    from forensics.store.events import unaccounted_by_probe

    stops = [{"kind": "probe_stop", "records": 10, "written": 9, "dropped": 1},
             {"kind": "probe_stop", "records": 10, "written": 11, "dropped": 0},
             {"kind": "probe_stop", "records": 10, "written": "9", "dropped": 0},
             {"kind": "probe_stop", "records": True, "written": 0, "dropped": 0},
             {"kind": "probe_start", "records": 10, "written": 0, "dropped": 0},
             {"kind": "probe_stop", "records": 12, "written": 9, "dropped": 1}]
    assert unaccounted_by_probe(stops) == 2
