"""Round 21's attack21a (issue 38): what a hostile capture author found in the readers of a
capture's JSON (manifest, events, expected verdicts) and the commands over them.

- T123a: a manifest, an events line or an ``expected.json`` holding an integer of more than
  4,300 digits (valid JSON) was refused as "not valid JSON: Exceeds the limit (4300 digits) for
  integer string conversion ...; use sys.set_int_max_str_digits() to increase the limit": a
  false sentence, and a fix no user of the command can apply.
- T123b: a vLLM crash dump whose batch holds a request id (a client's ``X-Request-Id``) spelling
  ``scheduled_spec_decode_tokens={}`` was read at that id, the first place the field's name
  appears: ``import`` said "0 of 0 spec-decode token(s) -1" of a batch whose 8 drafts were all
  -1, and ``known`` "the crash dump schedules no spec-decode tokens" (the all-placeholder race
  unmatched). An id spelling ``num_scheduled_tokens={x: 7}, total_num_scheduled_tokens=7``
  made it "1 request(s) scheduled, 4 of 4 spec-decode token(s) -1" of 2 requests, 8 of 8.
- T123c: two engines' crash dumps interleaved in one log (config DP0, config DP1, output DP0,
  output DP1) gave DP0's dump DP1's config (its model, speculative method and tokens) and DP1's
  none; and ``known`` read the last dump's config as every dump's: "speculative is ngram, not
  mtp" of an mtp engine's dump whose drafts were all -1 (the all-placeholder race unmatched).
- T123d: a request id ``a: [], b`` (a client's) in a dumped batch of 2 requests split the
  drafts' dict into a request ``a`` of no drafts and one ``b`` of 4: ``known`` said "the crash
  dump schedules 8 of 8 spec-decode tokens as -1 over 3 request(s)".
- T123e: a log holding two crash dumps (two engines, or a server restarted), one of 8 of 8
  drafts -1 and one of 0 of 8, was judged by ``known`` as one dump of their drafts added up:
  "the crash dump schedules 8 of 16 spec-decode tokens as -1 over 4 request(s)", the
  all-placeholder race unmatched and ``negative-draft-id-verified`` (some drafts -1) matched,
  of no dump that holds either.
- T123f: a request of no drafts (a prefill) whose id is ``a: 0, b`` was read as two requests
  of ``num_scheduled_tokens`` (``a`` of 0 tokens, ``b`` of its count, the total still met):
  "3 request(s) scheduled" of 2, which T123d's check (drafts' requests among the counts') does
  not see (the prefill has no drafts); ids ``a: -1, b`` and ``c: 1, d`` made 2 requests 5 likewise.
- T123g: ``known`` of a capture holding a crash dump whose drafts are unknown (its line cut
  past 64 KiB, or read wrong: T123b) said "does not match: no crash dump with scheduled
  spec-decode tokens", of a capture holding one.
- T123h: a client's request id ``x: 1, chatcmpl-b2`` (the id of another request of the batch
  after a count), or ``x: 99999999999999999999, y``, made a dump read as naming a request twice,
  or a count past int64: ``import`` refused the whole log (exit 2), every crash in it lost, and
  told the user to edit vLLM's own line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_round2 import run_cli
from test_round19_attack19b import import_log

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ROOT / "data" / "clean.capture"
HUGE = "7" * 5000


def _copy(tmp_path: Path, name: str = "c.capture") -> Path:
    """A copy of the bundled clean capture."""
    return Path(shutil.copytree(CLEAN, tmp_path / name))


def _with_huge_manifest(capture: Path) -> str:
    text = (capture / "manifest.json").read_text(encoding="utf-8").rstrip().rstrip("}")
    (capture / "manifest.json").write_text(f'{text}, "n": {HUGE}}}', encoding="utf-8")
    return "manifest"


def _with_huge_event(capture: Path) -> str:
    with open(capture / "events-w0.jsonl", "a", encoding="utf-8") as stream:
        stream.write(f'{{"kind": "note", "step": 3, "n": {HUGE}}}\n')
    return "events file"


def _with_huge_expected(capture: Path) -> str:
    (capture / "expected.json").write_text(f'{{"verdicts": {{}}, "n": {HUGE}}}', encoding="utf-8")
    return "expected verdicts"


# ---------------------------------- T123a: an integer of thousands of digits is valid JSON


@pytest.mark.parametrize("plant", [_with_huge_manifest, _with_huge_event, _with_huge_expected])
def test_an_integer_past_the_digits_read_is_named_not_called_invalid_json(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, plant: object) -> None:
    """A capture file holding an integer of 5,000 digits (valid JSON) is refused in one line
    that names the file and says what it holds and the fix: never "not valid JSON", never a
    Python setting as the fix."""
    capture = _copy(tmp_path)
    what = plant(capture)  # type: ignore[operator]
    code, out, err = run_cli(capsys, "triage", capture, "--format", "json")
    assert code == 0, err
    error = json.loads(out)["rows"][0]["error"]
    assert error.startswith(f"{what} '")
    assert "an integer of 5000 digits, past the 4300 forensics reads" in error
    assert "not valid JSON" not in error and "not JSON" not in error
    assert "set_int_max_str_digits" not in error


def test_inspect_names_the_long_integer_in_one_line(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    """``inspect`` of a capture whose manifest holds a 5,000-digit integer exits 2 with one
    line naming the manifest and the fix."""
    capture = _copy(tmp_path)
    _with_huge_manifest(capture)
    code, _, err = run_cli(capsys, "inspect", capture)
    assert code == 2
    assert err.count("\n") == 1 and "manifest '" in err
    assert "an integer of 5000 digits" in err and "replace the file" in err
    assert "set_int_max_str_digits" not in err


def test_an_integer_of_the_digits_read_still_parses() -> None:
    """An integer of 4,300 digits (the most read) is parsed as before: the fields' own checks
    name it (T31-style "is outside" lines), as they did."""
    from forensics.store.json_in import loads_finite, strict_json

    assert strict_json("[" + "9" * 4300 + "]")[0] == int("9" * 4300)
    assert loads_finite('{"a": -' + "9" * 4300 + "}")["a"] == -int("9" * 4300)


# ------------------------- T123b: a request id spelling a dump's field is not that field


ALL_PLACEHOLDER = ROOT / "tests" / "data" / "vllm_dump_all_placeholder.log"


def _dump_of(capsys: pytest.CaptureFixture[str], tmp_path: Path, request: str
             ) -> dict[str, object]:
    """The crash-dump event of the bundled all-placeholder dump whose request ``chatcmpl-a1``
    is renamed ``request`` (a client's ``X-Request-Id``)."""
    text = ALL_PLACEHOLDER.read_text(encoding="utf-8").replace("chatcmpl-a1", request)
    events = import_log(capsys, tmp_path, text)[2]
    return next(e for e in events if e["kind"] == "crash_dump")


@pytest.mark.parametrize("request_id", [
    "h scheduled_spec_decode_tokens={}",  # was "2 request(s) scheduled, 0 of 0 ... -1"
    "h num_scheduled_tokens={x: 7}, total_num_scheduled_tokens=7"])  # was "1 ..., 4 of 4"
def test_a_request_id_spelling_a_dump_field_leaves_the_batch_unknown(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, request_id: str) -> None:
    """A dump whose request id spells one of the fields its batch is read from says its batch
    is unknown, and why: never a count read at the id (0 of 0 drafts -1 of 8 of 8)."""
    dump = _dump_of(capsys, tmp_path, request_id)
    assert dump["scheduled_spec_decode_tokens"] == "unknown"
    assert dump["num_scheduled_tokens"] == "unknown"
    field = request_id.split()[1].split("=")[0] + "="
    assert f"its line spells {field} more than once: a request id holds that text" in str(
        dump["message"])
    assert "0 of 0" not in str(dump["message"])


def test_known_never_says_a_dump_schedules_no_drafts_of_a_request_ids_text(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``known`` of that dump never says "the crash dump schedules no spec-decode tokens"."""
    _dump_of(capsys, tmp_path, "h scheduled_spec_decode_tokens={}")
    code, out, err = run_cli(capsys, "known", tmp_path / "engine.capture")
    assert code == 0, err
    assert "schedules no spec-decode tokens" not in out


def test_a_dump_without_such_an_id_is_read_as_before(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    """The same dump with a plain id (one holding ``=`` and braces, no field's name) is read:
    8 of 8 drafts -1 over 2 requests."""
    dump = _dump_of(capsys, tmp_path, "h x={} y=[1]")
    assert str(dump["message"]).startswith(
        "vLLM crash dump: 2 request(s) scheduled, 8 of 8 spec-decode token(s) -1")


# ----------------------- T123c: each engine's dump takes its own config line; none is said of all


def _two_engines() -> str:
    """The bundled all-placeholder dump logged by two engines at once, lines interleaved:
    DP0 (mtp, 4 tokens) and DP1 (another model, ngram, 2 tokens)."""
    lines = ALL_PLACEHOLDER.read_text(encoding="utf-8").splitlines(True)
    dp0 = [line.replace("(EngineCore pid=196)", "(EngineCore_DP0 pid=196)") for line in lines[1:]]
    dp1 = [line.replace("(EngineCore pid=196)", "(EngineCore_DP1 pid=197)")
           .replace("/models/Qwen3.8-27B", "/models/Other-8B").replace("method='mtp'",
                                                                        "method='ngram'")
           .replace("num_spec_tokens=4", "num_spec_tokens=2") for line in lines[1:]]
    return "".join([lines[0], dp0[0], dp1[0], dp0[1], dp1[1], *dp0[2:], *dp1[2:]])


def test_each_engines_dump_takes_its_own_config_line(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    """Interleaved dumps of two engines: each dump's config is its own process's line."""
    events = import_log(capsys, tmp_path, _two_engines())[2]
    configs = {e["line"]: e["config"] for e in events if e["kind"] == "crash_dump"}
    assert configs[4]["speculative"] == "mtp" and configs[4]["num_speculative_tokens"] == 4
    assert configs[4]["model"] == "/models/Qwen3.8-27B"
    assert configs[5]["speculative"] == "ngram" and configs[5]["model"] == "/models/Other-8B"


def test_known_says_no_fact_two_dumps_state_differently(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    """``known`` never says of the mtp engine's dump "speculative is ngram, not mtp": a fact
    the dumps state differently is unknown."""
    import_log(capsys, tmp_path, _two_engines())
    code, out, err = run_cli(capsys, "known", tmp_path / "engine.capture")
    assert code == 0, err
    assert "speculative is ngram, not mtp" not in out
    assert "MATCH all-placeholder-drafts-race" in out
    assert "speculative stated differently by the crash dumps' config lines" in " ".join(
        out.split())


def test_dump_facts_keep_a_fact_every_dump_states_alike() -> None:
    """Dumps that agree state their fact; one that differs leaves only that fact out."""
    from forensics.known.evidence import dump_facts

    def dump(method: str) -> dict[str, object]:
        return {"kind": "crash_dump", "config": {"vllm": "0.33.0", "speculative": method}}

    assert dump_facts([dump("mtp"), dump("mtp")]) == {"vllm": "0.33.0", "speculative": "mtp"}
    assert dump_facts([dump("mtp"), dump("ngram")]) == {"vllm": "0.33.0"}


def test_the_config_lines_kept_are_bounded() -> None:
    """Config lines of processes whose output never comes are kept for the latest
    ``MAX_PENDING`` processes only (a log of a million tags holds no million configs)."""
    from forensics.importers.crash_dump import MAX_PENDING, _Dumps

    dumps = _Dumps("x.log", set())
    line = ("({tag} pid=1) ERROR 12-02 10:46:44 [dump_input.py:72] Dumping input data for V1 LLM "
            "engine (v0.33.0) with config: model='m', ")
    for tag in range(MAX_PENDING * 3):
        dumps.line(tag + 1, line.format(tag=f"P{tag}"))
    assert len(dumps.config) == MAX_PENDING
    assert f"(P{MAX_PENDING * 3 - 1} pid=1)" in dumps.config


# --------------- T123d: drafts naming a request the counts do not leave the batch unknown


def test_drafts_of_a_request_the_counts_do_not_name_leave_the_batch_unknown(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A request id that splits the drafts' dict into two entries leaves the batch unknown,
    saying why, and ``known`` never says "over 3 request(s)" of 2."""
    dump = _dump_of(capsys, tmp_path, "a: [], b")
    assert dump["num_scheduled_tokens"] == "unknown"
    assert "are not among those read of its num_scheduled_tokens" in str(dump["message"])
    code, out, err = run_cli(capsys, "known", tmp_path / "engine.capture")
    assert code == 0, err
    assert "3 request(s)" not in " ".join(out.split())


# ------------------------------ T123e: each crash dump's drafts are judged on their own


def _two_dumps() -> str:
    """A dump of all drafts -1 (DP0) and one of none (DP1, other requests) in one log."""
    every = ALL_PLACEHOLDER.read_text(encoding="utf-8").splitlines(True)
    none = (ROOT / "tests" / "data" / "vllm_dump_no_placeholder.log").read_text(
        encoding="utf-8").splitlines(True)
    dp0 = [line.replace("(EngineCore pid=196)", "(EngineCore_DP0 pid=196)") for line in every[1:]]
    dp1 = [line.replace("(EngineCore pid=196)", "(EngineCore_DP1 pid=197)")
           .replace("chatcmpl-a1", "chatcmpl-c3").replace("chatcmpl-b2", "chatcmpl-d4")
           for line in none[1:]]
    return "".join([every[0], *dp0, *dp1])


def test_known_judges_each_crash_dump_on_its_own(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    """The all-placeholder race matches on the dump whose drafts are all -1, naming its line;
    no sentence adds the two dumps' drafts up, and the some-placeholder issue, which neither
    dump shows, does not match."""
    import_log(capsys, tmp_path, _two_dumps())
    code, out, err = run_cli(capsys, "known", tmp_path / "engine.capture")
    assert code == 0, err
    text = " ".join(out.split())
    assert "8 of 16" not in text and "4 request(s)" not in text
    assert ("MATCH all-placeholder-drafts-race: matches: the crash dump of line 3 schedules 8 of "
            "8 spec-decode tokens as -1 over 2 request(s) (1 of the 2 crash dumps so)") in text
    assert "no negative-draft-id-verified: does not match: the crash dump of line 3" in text
    assert "the crash dump of line 11 schedules 0 of 8 spec-decode tokens as -1" in text


def test_one_crash_dump_is_said_as_before(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    """A log of one dump: "the crash dump schedules ...", no line named."""
    import_log(capsys, tmp_path, ALL_PLACEHOLDER.read_text(encoding="utf-8"))
    code, out, err = run_cli(capsys, "known", tmp_path / "engine.capture")
    assert code == 0, err
    assert ("MATCH all-placeholder-drafts-race: matches: the crash dump schedules 8 of 8 "
            "spec-decode tokens as -1 over 2 request(s)") in " ".join(out.split())


# ---------------- T123f: a count below 1 (no request vLLM lists) leaves the batch unknown


SCHEDULED = ("(EngineCore pid=1) ERROR 12-02 10:46:44 [dump_input.py:72] Dumping scheduler output "
             "for model execution: SchedulerOutput(scheduled_new_reqs=[NewRequestData(req_id=ID,"
             "prompt_token_ids_len=5)], scheduled_cached_reqs=CachedRequestData(req_ids=['r2'],"
             "resumed_req_ids=set()), num_scheduled_tokens={ID: 5, r2: 5MORE}, "
             "total_num_scheduled_tokens=TOTAL, scheduled_spec_decode_tokens={r2: [-1, -1, -1, -1]}"
             ", finished_req_ids=[])")


@pytest.mark.parametrize(("request_id", "more", "total"), [("a: 0, b", "", 10),
                                                         ("a: -1, b", ", c: 1, d: 5", 15)])
def test_a_count_below_one_leaves_the_batch_unknown(request_id: str, more: str,
                                                    total: int) -> None:
    """A prefill request (no drafts) whose id splits ``num_scheduled_tokens`` into requests of
    0 or -1 tokens, the total still met, leaves the batch unknown, saying why."""
    from forensics.importers.crash_dump import _Dumps

    dumps = _Dumps("x.log", set())
    dumps.line(1, SCHEDULED.replace("ID", request_id).replace("MORE", more)
               .replace("TOTAL", str(total)))
    dump = dumps.events[0]
    assert dump["num_scheduled_tokens"] == "unknown"
    assert "request(s) scheduled," not in dump["message"]
    assert "a request read of its num_scheduled_tokens schedules" in dump["message"]


def test_a_plain_prefill_request_is_counted() -> None:
    """The same dump with a plain id: 2 requests, 4 of 4 drafts -1."""
    from forensics.importers.crash_dump import _Dumps

    dumps = _Dumps("x.log", set())
    dumps.line(1, SCHEDULED.replace("ID", "r1").replace("MORE", "").replace("TOTAL", "10"))
    assert dumps.events[0]["message"] == (
        "vLLM crash dump: 2 request(s) scheduled, 4 of 4 spec-decode token(s) -1")


# ------------- T123g: a crash dump whose drafts are unknown is no "no crash dump" to known


def test_known_says_a_cut_dumps_drafts_are_unknown(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    """A dump line cut past 64 KiB: ``known`` says its drafts are unknown and why, never that
    the capture holds no crash dump with scheduled drafts."""
    text = ALL_PLACEHOLDER.read_text(encoding="utf-8").replace(
        "finished_req_ids=[]", "finished_req_ids=[" + "'r', " * 20000 + "]")
    import_log(capsys, tmp_path, text)
    code, out, err = run_cli(capsys, "known", tmp_path / "engine.capture")
    assert code == 0, err
    said = " ".join(out.split())
    assert "no crash dump with scheduled spec-decode tokens" not in said
    assert ("all-placeholder-drafts-race: not judged: the crash dump's scheduled spec-decode "
            "tokens are unknown (its line was longer than 65536 bytes") in said  # T127a


def test_a_forged_dumps_reason_is_escaped() -> None:
    """The reason an events file gives for a dump's unknown drafts is a capture's text: it is
    escaped as a value."""
    from forensics.known.matching import _unread_dumps

    said = _unread_dumps([{"kind": "crash_dump", "scheduled_spec_decode_tokens": "unknown",
                           "unread": "\x1b[2J\u202e"}])
    assert said == ("the crash dump's scheduled spec-decode tokens are unknown "
                    "(\\x1b[2J\\u202e)")
    said = _unread_dumps([{"kind": "crash_dump", "unread": "\x1b"}])
    assert "\x1b" not in said and said.endswith("(\\x1b)")


# ---------------- T123h: a request id spelling a bad entry never makes the log unimportable


@pytest.mark.parametrize(("request_id", "why"), [
    ("x: 1, chatcmpl-b2", "names request 'chatcmpl-b2' twice"),
    ("x: 99999999999999999999, y", "for request 'x' holds a count past int64")])
def test_a_request_id_spelling_a_bad_entry_leaves_the_batch_unknown(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, request_id: str, why: str) -> None:
    """The log is imported (its crash kept, with its exception) and the dump's batch is
    unknown, saying why; it was refused whole."""
    dump = _dump_of(capsys, tmp_path, request_id)
    assert dump["scheduled_spec_decode_tokens"] == "unknown"
    message = str(dump["message"])
    assert why in message and "so its batch is not read" in message
    assert "illegal memory access" in str(dump.get("exception"))
