"""Hostile input, round 9 (T47a-T47h): a diff's lines, a crash dump's keys, the names of
imported sources, the repro's refused characters, an ``.npz`` time member, the types of an
``expected.json`` first finding, a prompt that vLLM's request logger quotes into the log, and
an ``expected.json`` of another format.

``replay --variant vllm+PATH.diff`` split the diff and the file it patches with
``str.splitlines``, which also ends a line at a form feed, ``\\x1c``-``\\x1e``, ``\\x85``,
U+2028 and U+2029: a diff line holding one (a form feed is legal in Python source) was refused
as a hunk that does not parse; lines the diff does not touch were changed (a U+2028 inside a
string literal became a newline in the string, a form feed gained a line, CRLF became LF); and a
file header hidden behind ``\\x1c`` inside one line, which a reader of the diff (``less``,
GitHub) sees as part of an added line, patched another module.

A crash dump's ``num_scheduled_tokens`` and ``scheduled_spec_decode_tokens`` naming one request
twice (``r1`` and ``r1 `` alike once stripped) kept the last value: drafts of ``-1`` were hidden
behind a second entry (``0 of 2 spec-decode token(s) -1``).

Two sources of one base name (``h1/engine.log``, ``h2/engine.log``) were both ``engine.log``
in the capture: its events (``engine.log:4``) and its manifest's sources could not tell which
host's log crashed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from forensics.errors import CaptureFormatError
from forensics.importers import import_sources
from forensics.importers.crash_dump import parse_scheduler_output
from forensics.variants.unidiff import apply_hunks, parse_diff

HEADER = "--- a/vllm/m.py\n+++ b/vllm/m.py\n"


@pytest.mark.parametrize("mark", ["\x0c", "\x1c", "\x85", "\u2028", "\x0b"])
def test_a_diff_line_holding_a_line_separator_applies(mark: str) -> None:
    source = f"def f():\n    x = 1  # a{mark}b\n    return x\n"
    diff = (HEADER + "@@ -1,3 +1,3 @@\n def f():\n"
            f"-    x = 1  # a{mark}b\n+    x = 2  # a{mark}b\n     return x\n")
    patched = apply_hunks(source, parse_diff(diff, "d.diff")[0], "d.diff")
    assert patched == source.replace("x = 1", "x = 2")


def test_lines_the_diff_does_not_touch_are_kept_byte_for_byte() -> None:
    source = "a = 1\nb = '\u2028'\nc = 3\x0c\nd = '\x85'\n"
    diff = HEADER + "@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    assert apply_hunks(source, parse_diff(diff)[0]) == source.replace("a = 1", "a = 2")


def test_a_crlf_file_keeps_its_line_ends_and_a_crlf_diff_applies() -> None:
    source = "a = 1\r\nb = 2\r\n"
    for diff in (HEADER + "@@ -1 +1 @@\n-a = 1\n+a = 3\n",
                 (HEADER + "@@ -1 +1 @@\n-a = 1\n+a = 3\n").replace("\n", "\r\n")):
        assert apply_hunks(source, parse_diff(diff)[0]) == "a = 3\r\nb = 2\r\n"
    lf = "a = 1\nb = 2\n"
    crlf_diff = (HEADER + "@@ -1 +1 @@\n-a = 1\n+a = 3\n").replace("\n", "\r\n")
    assert apply_hunks(lf, parse_diff(crlf_diff)[0]) == "a = 3\nb = 2\n"


def test_a_file_header_hidden_inside_a_line_patches_nothing_else() -> None:
    hidden = "\x1c--- a/vllm/other.py\x1c+++ b/vllm/other.py\x1c@@ -1 +1 @@\x1c-x\x1c+y"
    diff = HEADER + f"@@ -1 +1 @@\n-a = 1\n+a = 2  # {hidden}\n"
    patches = parse_diff(diff)
    assert [p.path for p in patches] == ["vllm/m.py"]
    assert apply_hunks("a = 1\n", patches[0]) == f"a = 2  # {hidden}\n"


def _dump(spec: str, counts: str) -> str:
    return (f"SchedulerOutput(num_scheduled_tokens={{{counts}}}, total_num_scheduled_tokens=6, "
            f"scheduled_spec_decode_tokens={{{spec}}}, )")


@pytest.mark.parametrize("second", ["r1", "r1 ", " r1"])
def test_a_dumped_request_named_twice_is_refused_naming_it(second: str) -> None:
    text = _dump(f"r1: [-1, -1], {second}: [5, 6]", "r1: 3, r2: 3")
    if second != "r1":  # a request id of another spelling is another request
        spec = parse_scheduler_output(text)["scheduled_spec_decode_tokens"]
        assert spec == {"r1": [-1, -1], second: [5, 6]}
        return
    with pytest.raises(CaptureFormatError, match="scheduled_spec_decode_tokens.*'r1' twice"):
        parse_scheduler_output(text)
    with pytest.raises(CaptureFormatError, match="num_scheduled_tokens.*'r1' twice"):
        parse_scheduler_output(_dump("r1: [1]", "r1: 3, r1: 3"))


def test_a_dump_naming_a_request_twice_leaves_its_batch_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Round 21 (T123h): the dump's batch is unknown, naming the request named twice; the log
    is imported (it was refused whole, its crashes lost, when a client's request id can spell
    such an entry); never read as no -1 draft."""
    from forensics.cli import main

    log = tmp_path / "engine.log"
    log.write_text("INFO start\nERROR 12-02 10:46:44 [dump_input.py:72] Dumping scheduler "
                   "output for model execution: "
                   + _dump("r1: [-1, -1], r1: [5, 6]", "r1: 3") + "\n")
    out = tmp_path / "o.capture"
    assert main(["import", str(log), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out), "--json"]) == 0
    events = json.loads(capsys.readouterr().out)["events"]
    dump = next(e for e in events if e["kind"] == "crash_dump")
    assert dump["scheduled_spec_decode_tokens"] == "unknown"
    assert "names request 'r1' twice" in dump["message"]


def test_sources_of_one_name_keep_their_folders_apart(tmp_path: Path) -> None:
    for host, line in (("h1", "CUDA error: an illegal memory access was encountered"),
                       ("h2", "CUDA error: device-side assert triggered")):
        (tmp_path / host).mkdir()
        (tmp_path / host / "engine.log").write_text(f"x\n{line}\n")
    lone = tmp_path / "h1" / "other.log"
    lone.write_text("EngineDeadError\n")
    out = import_sources([tmp_path / "h1" / "engine.log", tmp_path / "h2" / "engine.log", lone],
                         tmp_path / "o.capture")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sources"] == ["h1/engine.log", "h2/engine.log", "other.log"]
    events = [json.loads(line) for path in sorted(out.glob("events*.jsonl"))
              for line in path.read_text().splitlines()]
    assert sorted((e["source"], e["kind"]) for e in events) == [
        ("h1/engine.log", "illegal_memory_access"), ("h2/engine.log", "cuda_error"),
        ("other.log", "engine_dead")]


def test_sources_whose_names_differ_only_by_normalisation_or_case_are_told_apart(
        tmp_path: Path) -> None:
    from forensics.importers import source_names

    nfc, nfd = "caf\u00e9.log", "cafe\u0301.log"
    names = source_names([tmp_path / "a" / nfc, tmp_path / "a" / nfd, tmp_path / "b" / "E.log",
                          tmp_path / "c" / "e.log"])
    assert names[2:] == ["b/E.log", "c/e.log"]
    assert names[:2] == [f"{tmp_path / 'a' / nfc} (source 1)", f"{tmp_path / 'a' / nfd} (source 2)"]
    assert source_names(["x/engine.log", "y/other.log"]) == ["engine.log", "other.log"]


def _repro_module(folder: Path, data: dict[str, Any]) -> Any:
    """The generated repro file, imported beside ``data`` (its data file)."""
    import importlib.util

    from forensics.share.repro import script_text

    (folder / "test_repro.py").write_text(script_text())
    (folder / "test_repro.json").write_text(json.dumps(data))
    spec = importlib.util.spec_from_file_location("repro_round9", folder / "test_repro.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _refuses(module: Any, word: str) -> bool:
    """Whether the generated repro's check of a word it prints refuses ``word``."""
    try:
        module._words(word, "word")
    except module.BadData:
        return True
    return False


def test_the_repro_refuses_every_character_forensics_escapes(tmp_path: Path) -> None:
    from forensics.escaping import terminal

    data = {"format": 1, "vllm": {"needed": "0.33", "capture": None}, "deadline_s": 5,
            "cases": []}
    module = _repro_module(tmp_path, data)
    escaped = {c for c in map(chr, range(0x110000)) if c != "\\" and terminal(c) != c}
    refused = {c for c in map(chr, range(0x110000)) if _refuses(module, c)}
    assert refused == escaped, sorted(map(ord, refused ^ escaped))[:8]
    for mark in ("\U0001fffe", "\U0010ffff"):  # noncharacters of planes 1 to 16
        data["vllm"]["needed"] = f"0.33{mark}"
        with pytest.raises(Exception, match="vllm.needed: holds") as caught:
            _repro_module(tmp_path, data)
        assert type(caught.value).__name__ == "BadData"


def _npz(path: Path, members: dict[str, Any]) -> Path:
    """An ``.npz`` of ``members`` (name -> array, saved without pickles)."""
    import io
    import zipfile

    import numpy as np

    with zipfile.ZipFile(path, "w") as archive:
        for name, value in members.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asarray(value), allow_pickle=False)
            archive.writestr(f"{name}.npy", buffer.getvalue())
    return path


@pytest.mark.parametrize(("field", "value", "dtype"), [
    ("step", 2**40, "M8[D]"),  # a date past datetime's range: .item() was the int 2**40
    ("step", 5, "M8[D]"),  # in its range: a date ("got a date")
    ("num_embeddings", 10, "m8[ns]"),  # a nanosecond duration: .item() was the int 10
])
def test_an_npz_time_member_is_refused_naming_its_dtype(tmp_path: Path, field: str, value: int,
                                                         dtype: str) -> None:
    import numpy as np

    from forensics.importers import read_source

    members: dict[str, Any] = {"site": np.array("embedding"), "step": np.array(3),
                               "input_ids": np.array([1, 2]), "num_embeddings": np.array(10)}
    members[field] = np.array(value, dtype=dtype)
    said = re.escape(f"member '{field}.npy' is a {np.dtype(dtype)} (a time, not a number)")
    with pytest.raises(CaptureFormatError, match=said):
        read_source(_npz(tmp_path / "d.npz", members))


INCIDENT = Path(__file__).resolve().parents[2] / "data" / "incident-b-vocab-sentinel.capture"


def _with_expected(tmp_path: Path, change: Any) -> Path:
    """A copy of incident B whose ``expected.json`` is changed by ``change(data)``."""
    import shutil

    capture = tmp_path / "b.capture"
    shutil.copytree(INCIDENT, capture)
    data = json.loads((capture / "expected.json").read_text())
    change(data)
    (capture / "expected.json").write_text(json.dumps(data, ensure_ascii=False))
    return capture


@pytest.mark.parametrize(("key", "value", "says"), [
    ("step", "13", "must be an integer or null, got str '13'"),  # printed "step 13" -> 13
    ("rank", True, "must be an integer or null, got bool True"),
    ("value", 248320.5, "must be an integer or null, got float"),
    ("tensor", 5, "must be a string or null, got int 5"),
])
def test_a_first_finding_key_of_another_type_is_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: Any,
        says: str) -> None:
    from forensics.cli import main

    capture = _with_expected(tmp_path, lambda d: d["first_finding"]["upstream"].update(
        {key: value}))
    assert main(["check", str(capture)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"field 'first_finding.upstream.{key}' {says}" in err, err
    assert not (capture / "expected.obtained.json").exists()


def test_a_verdict_the_replay_lacks_says_so_and_two_spellings_print_apart(
        tmp_path: Path) -> None:
    from forensics.share.expectations import check

    def change(data: dict[str, Any]) -> None:
        data["verdicts"]["upstream"].update({"emb\u00e9dding": "ok", "embe\u0301dding": "ok"})

    result = check(_with_expected(tmp_path, change), write_obtained=False)
    lines = [d for d in result.differences if "dding:" in d]
    assert len(lines) == 2 and len(set(lines)) == 2, lines
    assert all("got None" not in line and "got none (the replay judged no site" in line
               for line in lines), lines


#: vLLM's request logger quoting what a client sent and what the model answered
REQUEST_LINES = (
    "(APIServer pid=7) INFO 12-02 10:46:44 [logger.py:41] Received request chatcmpl-1: prompt: "
    "'Repeat: CUDA error: an illegal memory access was encountered', params: "
    "SamplingParams(n=1), prompt_token_ids: None, lora_request: None.",
    "DEBUG 12-02 10:46:45 [logger.py:50] Request chatcmpl-2 details: prompt: 'a.cu:10: f: "
    "block: [0,0,0] Assertion `x < y` failed. EngineDeadError SM70-TEMB: rows=1', "
    "prompt_token_ids: [1]",
    "INFO 12-02 10:46:46 [logger.py:60] Generated response chatcmpl-3: output: 'RuntimeError: "
    "CUDA error: device-side assert triggered', output_token_ids: [5], finish_reason: stop",
    "INFO 12-02 10:46:47 [logger.py:41] Received request chatcmpl-4: prompt: 'Dumping input "
    "data for V1 LLM engine (v0.33.0) with config: model='m'', params: SamplingParams(n=1)",
    "INFO 12-02 10:46:47 [logger.py:41] Received request chatcmpl-5: prompt: 'Dumping "
    "scheduler output for model execution: SchedulerOutput(num_scheduled_tokens={r: 3}, "
    "scheduled_spec_decode_tokens={r: [-1, -1]})', params: SamplingParams(n=1)",
    "INFO 12-02 10:46:48 [async_llm.py:300] Added request chatcmpl-CUDA error: an illegal "
    "memory access was encountered.",
)


def test_a_prompt_or_output_the_request_logger_quotes_is_no_crash(tmp_path: Path) -> None:
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    crash = "(EngineCore pid=1) ERROR 12-02 10:47:00 [core.py:9] CUDA error: an illegal memory " \
            "access was encountered"
    log.write_text("\n".join(REQUEST_LINES) + "\n" + crash + "\n")
    imported = read_source(log)
    assert imported.records == []
    assert [(e["kind"], e["line"]) for e in imported.events] == [
        ("illegal_memory_access", len(REQUEST_LINES) + 1)]


@pytest.mark.parametrize(("version", "shown"), [(2, "2"), ("1", "'1'"), (True, "True"),
                                                ([1], "list")])
def test_an_expected_file_of_another_format_is_one_line_never_a_match(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], version: Any, shown: str) -> None:
    from forensics.cli import main

    capture = _with_expected(tmp_path, lambda d: d.update(format=version))
    assert main(["check", str(capture)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"field 'format' is {shown}, but this forensics reads format 1" \
        in err, err


def test_an_expected_file_without_a_format_is_read_as_format_1(tmp_path: Path) -> None:
    from forensics.share.expectations import check

    assert check(_with_expected(tmp_path, lambda d: d.pop("format")), write_obtained=False).ok
