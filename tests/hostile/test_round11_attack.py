"""Round 11's attacks: a hostile capture author and a hostile local user against the commands
fewer rounds looked at (the log importer's crash lines, ``kernels``' report, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

API = "(APIServer pid=7) "
CORE = "(EngineCore_DP0 pid=9) "

#: lines of loggers other than the request logger that quote what a client sent: none is a
#: crash, a CUDA assert or a crash dump
QUOTING_LINES = (
    f"{API}INFO 12-02 10:46:44 [serving_chat.py:200] Chat template applied to 'CUDA error: "
    "device-side assert triggered'",
    f"{API}WARNING 12-02 10:46:44 [protocol.py:90] The following fields were present in the "
    "request but ignored: {'RuntimeError: CUDA error: an illegal memory access was encountered'}",
    f"{API}ERROR 12-02 10:46:44 [serving_chat.py:210] Error in preprocessing prompt inputs: "
    "prompt 'torch.AcceleratorError: CUDA error: an illegal memory access was encountered' is "
    "too long",
    f"{API}ERROR 12-02 10:46:45 [serving_chat.py:211] Invalid tool call: a.cu:1: f: block: "
    "[0,0,0], thread: [0,0,0] Assertion `x < y` failed.",
    f"{API}INFO 12-02 10:46:45 [tool_parsers.py:12] parsed: Indexing.cu:1515: k: block: "
    "[0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
    f"{API}DEBUG 12-02 10:46:46 [harmony.py:80] message: vllm.v1.engine.exceptions."
    "EngineDeadError: EngineCore encountered an issue.",
    f"{API}ERROR 12-02 10:46:46 [serving_completion.py:9] Error with model user text "
    "EngineDeadError and device-side assert triggered",
    f"{API}WARNING 12-02 10:46:47 [protocol.py:90] ignored: 'Dumping input data for V1 LLM "
    "engine (v0.33.0) with config: model='m''",
    "[rank0]:[I1206 08:00:00.0 logger.cpp:9] user said: CUDA error: an illegal memory access",
    f"{API}ERROR 12-02 10:46:47 [serving_chat.py:210] Error in prompt: 'Dumping scheduler "
    "output for model execution: SchedulerOutput(num_scheduled_tokens={r: 3}, "
    "scheduled_spec_decode_tokens={r: [-1, -1]})'",
)

#: a crash's own lines, each one event of the kind named (after a line that is none)
CRASH_LINES = (
    ("illegal_memory_access", f"{CORE}ERROR 12-02 10:47:00 [core.py:9] CUDA error: an illegal "
                              "memory access was encountered"),
    ("cuda_error", "[rank0]: RuntimeError: CUDA error: device-side assert triggered"),
    ("illegal_memory_access", "  what():  CUDA error: an illegal memory access was encountered"),
    ("illegal_memory_access", "Cuda failure 'an illegal memory access was encountered'"),
    ("cuda_error", "triton.runtime.errors.Error: Triton Error [CUDA]: device-side assert "
                   "triggered"),
    ("illegal_memory_access", "[rank0]:[E1206 08:00:00.000000000 ProcessGroupNCCL.cpp:1895] [PG "
                              "ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread "
                              "terminated with exception: CUDA error: an illegal memory access "
                              "was encountered"),
    ("illegal_memory_access", "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group "
                              "watchdog thread terminated with exception: CUDA error: an illegal "
                              "memory access was encountered"),
    ("cuda_assert", "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: "
                    "[0,0,0], thread: [0,0,0] Assertion `-sizes[i] <= index && index < sizes[i] "
                    "&& \"index out of bounds\"` failed."),
    ("cuda_assert", "python3: /src/a.c:12: main: Assertion `n > 0' failed."),
    ("cuda_assert", "Assertion `a < n` failed"),
    ("engine_dead", f"{API}ERROR 12-02 10:47:01 [async_llm.py:5] vllm.v1.engine.exceptions."
                    "EngineDeadError: EngineCore encountered an issue."),
    ("engine_dead", "EngineDeadError"),
)


def test_a_line_quoting_crash_words_is_no_crash_by_its_words_alone(tmp_path: Path) -> None:
    """A line counts as a crash by its logger and its form (at ERROR or CRITICAL, or with no
    level; the crash's words where its line starts, after an exception's name), never because
    a prompt another logger quotes holds crash words: each quoting line made a crash event (an
    "unexplained" crash verdict) or a crash dump before."""
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    lines = [text for quoting in QUOTING_LINES for text in (quoting, "x")]
    for _kind, crash in CRASH_LINES:
        lines += [crash, "x"]
    log.write_text("\n".join(lines) + "\n")
    imported = read_source(log)
    assert imported.records == []
    first = 2 * len(QUOTING_LINES) + 1
    crashes = [(kind, first + 2 * k) for k, (kind, _) in enumerate(CRASH_LINES)]
    # an EngineDeadError line after a crash is that crash's report, no event of its own (T120a)
    assert [(e["kind"], e["line"]) for e in imported.events] == [
        crash for crash in crashes if crash[0] != "engine_dead"]
    reports = imported.events[-1]["engine_dead"]
    assert [reports["line"], *(r["line"] for r in reports["more"])] == [
        line for kind, line in crashes if kind == "engine_dead"]
    for kind, crash in CRASH_LINES:  # alone, each is a crash event
        log.write_text(f"x\n{crash}\n")
        assert [(e["kind"], e["line"]) for e in read_source(log).events] == [(kind, 2)]
    dump = tmp_path / "dump.log"
    dump.write_text("\n".join(QUOTING_LINES) + "\n")
    assert read_source(dump).events == []


def test_a_traceback_logged_as_a_warning_is_no_crash(tmp_path: Path) -> None:
    """A traceback vLLM's logger writes at WARNING (``exc_info=True`` on a warning: a request
    that failed, a retry), quoting a prompt's crash words or not, made an ``engine_exception``
    (or ``cuda_error``) crash event; one at ERROR still is one."""
    from forensics.importers import read_source

    def chain(level: str) -> list[str]:
        tag = f"{API}{level} 12-02 10:46:44 [serving_chat.py:300] "
        return [f"{tag}Error in tool parsing, retrying", f"{tag}Traceback (most recent call last):",
                f'{tag}  File "/srv/vllm/x.py", line 3, in parse', f"{tag}    raise ValueError(t)",
                f"{tag}RuntimeError: CUDA error: device-side assert triggered"]

    log = tmp_path / "engine.log"
    log.write_text("\n".join(chain("WARNING") + chain("INFO") + ["x"] + chain("ERROR")) + "\n")
    events = read_source(log).events
    assert [(e["kind"], e["first_line"]) for e in events] == [("cuda_error", 13)], events


def test_a_probe_line_a_logger_quotes_is_no_record(tmp_path: Path) -> None:
    """The fork's probe lines (``SM70-TEMB: ...``, ``... OUT-PATH ...``) were read anywhere in
    a line, so a prompt another logger quoted made a record (an id out of range: a violation
    that "explains" a crash); a probe line is the probe's own print, read as before."""
    from forensics.importers import read_source

    temb = "SM70-TEMB: rows=10 input=(4,) dtype=torch.int64 min=0 max=99999"
    out = ("OUT-PATH out-of-range sampled ids [99999] (vocab_size=10 num_sampled_ids=1 "
           "num_placeholders=0 first_placeholder=0 old_no_spec_end=0)")
    quoting = [f"{API}INFO 12-02 10:46:44 [serving_chat.py:200] {temb}",
               f"{API}WARNING 12-02 10:46:44 [protocol.py:90] ignored: {out}",
               f"{API}ERROR 12-02 10:46:44 [serving_chat.py:210] Error in prompt: '{temb}'",
               f"Error in prompt: 'x' {temb}"]
    own = [temb, f"{CORE}{temb}", f"{CORE}SM70-OUTPROBE: {out}", out]
    log = tmp_path / "engine.log"
    log.write_text("\n".join(quoting + own) + "\n")
    records = read_source(log).records
    assert [(r.site, r.fields["line"]) for r in records] == [
        ("embedding", 5), ("embedding", 6), ("async_output", 7), ("async_output", 8)], records


@pytest.mark.parametrize("quoting", QUOTING_LINES)
def test_each_quoting_line_alone_is_no_crash(tmp_path: Path, quoting: str) -> None:
    from forensics.importers import read_source

    log = tmp_path / "engine.log"
    log.write_text(quoting + "\n")
    assert read_source(log).events == [], quoting


# ------------------------------------------------------------------ kernels: one line per program

def _oob_report(programs: list[tuple[int, int, int]], capture: str) -> object:
    """A report of one launch whose every listed program loads ``x_ptr`` outside its storage
    (elements 64 + 4 * x onwards, 4 lanes each) and stores ``y_ptr`` outside it in program 0."""
    from forensics.kernels.format import Launch
    from forensics.kernels.sanitizer import KernelReport, LaunchResult, _findings

    launch = Launch("vllm.k", "_k", "", 3, 1, 7, capture, (128,), ["x_ptr", "y_ptr"], {}, {}, {})
    accesses = [{"argument": "x_ptr", "op": "load", "masked": False, "program_id": list(pid),
                 "elements": [64 + 4 * pid[0] + k for k in range(4)], "count": 4}
                for pid in programs]
    accesses.insert(1, {"argument": "y_ptr", "op": "store", "masked": True,
                        "program_id": [0, 0, 0], "elements": [-1], "count": 1})
    answer = {"status": "replayed", "accesses": accesses, "overflows": [], "differs": []}
    return KernelReport(capture, [LaunchResult(launch, "replayed", "",
                                               _findings(launch, answer))], [])


def _kernels_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                  capsys: pytest.CaptureFixture[str], programs: list[tuple[int, int, int]]
                  ) -> list[str]:
    from forensics.cli import main
    from forensics.kernels import sanitizer

    capture = tmp_path / "k.capture"
    capture.mkdir(exist_ok=True)
    report = _oob_report(programs, str(capture))
    monkeypatch.setattr(sanitizer, "sanitize", lambda *args, **kwargs: report)
    assert main(["kernels", str(capture)]) == 1
    return [line for line in capsys.readouterr().out.splitlines()
            if line.startswith("kernel_out_of_bounds")]


def test_an_access_out_of_bounds_in_every_program_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A launch whose 128 programs each load outside one argument printed 128 lines; the
    programs' findings of one argument, operation and mask are one line naming the first
    program's elements exactly, how many programs and which (``--json`` keeps each)."""
    every = [(x, 0, 0) for x in range(128)]
    lines = _kernels_text(tmp_path, monkeypatch, capsys, every)
    assert len(lines) == 2, lines
    load, store = lines
    assert "unmasked load of x_ptr element(s) [64, 65, 66, 67]" in load, load
    assert "by the 128 programs (0, 0, 0) to (127, 0, 0)" in load, load
    assert "512 lane(s)" in load, load
    assert "masked store of y_ptr element(s) [-1]" in store and "by program (0, 0, 0)" in store


def test_programs_folded_apart_say_they_are_not_every_one_between(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    lines = _kernels_text(tmp_path, monkeypatch, capsys, [(2, 0, 0), (5, 0, 0), (9, 0, 0)])
    load = lines[0]
    assert len(lines) == 2 and "element(s) [72, 73, 74, 75]" in load, lines
    assert "by 3 programs from (2, 0, 0) to (9, 0, 0), not every one between" in load, load
    assert "12 lane(s)" in load, load


# ------------------------------------------------------------------ names escaped as values (T49)

#: two names that read alike once a message is made inert, unless each is escaped as a value
ALIKE = ("a\x1bb", "a\\x1bb")


def _index_without_header(tmp_path: Path, name: str) -> list[str]:
    """A segment index without its magic: the store's message named the capture raw (T49a)."""
    import shutil

    from tests.conftest import DATA

    capture = tmp_path / f"{name}.capture"
    shutil.copytree(DATA / "stale-prev-row.capture", capture)
    (capture / "embedding.r0.w0.0000.arrows.idx").write_bytes(b"not an index at all")
    return ["inspect", str(capture)]


def _probe_step_not_an_integer(tmp_path: Path, name: str) -> list[str]:
    """A log's probe line naming a step that is no integer: its one line names the log (T49b;
    round 21: a crash dump naming a request twice, this case before, is read, its batch
    unknown, T123h)."""
    log = tmp_path / f"{name}.log"
    log.write_text("(EngineCore_DP0 pid=4242) SM70-TEMB: rows=1000 input=(4,) "
                   "dtype=torch.int32 min=0 max=7 step=1e3\n")
    return ["import", str(log), "-o", str(tmp_path / "o.capture")]


def _npz_time_member(tmp_path: Path, name: str) -> list[str]:
    """The ``.npz`` importer's line for a datetime64 member named the file raw (T49b)."""
    import numpy as np

    source = tmp_path / f"{name}.npz"
    np.savez(source, site=np.array("embedding"), step=np.array(np.datetime64(5, "D")))
    return ["import", str(source), "-o", str(tmp_path / "o.capture")]


@pytest.mark.parametrize(("make", "said"), [(_index_without_header, "has no"),
                                            (_probe_step_not_an_integer, "not an integer"),
                                            (_npz_time_member, "datetime64")])
def test_a_file_named_in_an_error_is_escaped_as_a_value(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, said: str) -> None:
    """Each message named its file raw, so two files named alike once the line is made
    inert (ESC, the text ``\\x1b``) read alike; each is escaped as a value."""
    from forensics.cli import main

    lines = []
    for name in ALIKE:
        assert main(make(tmp_path, name)) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "\x1b" not in err and said in err, err
        lines.append(err)
    assert lines[0] != lines[1], lines


# ------------------------------------------------------------------ .pt: a meta tensor

@pytest.mark.parametrize(("layout", "said"), [("meta", "meta device holds no values"),
                                              ("sparse", "layout torch.sparse_coo")])
def test_a_pt_tensor_without_dense_values_is_one_true_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: str, said: str) -> None:
    """A ``.pt`` tensor on the meta device (a shape, no values) was refused as "a tensor of
    dtype torch.int64 cannot be read; expected an integer tensor": a wrong sentence about an
    integer tensor; a sparse one's refusal came after a second line, torch's warning that it
    checks a sparse tensor's invariants."""
    import torch

    from forensics.cli import main

    ids = torch.empty(3, dtype=torch.int64, device="meta") if layout == "meta" else \
        torch.tensor([1, 2, 3]).to_sparse()
    source = tmp_path / f"{layout}.pt"
    torch.save({"site": "embedding", "step": 1, "num_embeddings": 10, "input_ids": ids}, source)
    assert main(["import", str(source), "-o", str(tmp_path / "o.capture")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'input_ids'" in err and said in err, err
    assert "expected an integer tensor" not in err, err
    assert not (tmp_path / "o.capture").exists()


# ------------------------------------------------------------------ outputs named as values

#: an output name a script makes of a capture's folder name (``-o "figs/$name.png"``)
HOSTILE = "c\x1b]0;owned\x07\nwrote x"


@pytest.mark.parametrize("command", ["import", "plot", "redact", "shrink"])
def test_the_output_a_command_names_is_inert_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    """``plot``, ``report``, ``import``, ``redact`` and ``shrink`` printed the path they wrote
    raw: an output named after a hostile capture (a title-setting OSC sequence, a line break
    forging a line) reached the terminal as is."""
    from forensics.cli import main
    from tests.conftest import DATA

    capture = str(DATA / "stale-prev-row.capture")
    log = tmp_path / "engine.log"
    log.write_text("EngineDeadError\n")
    argv = {"import": ["import", str(log), "-o", str(tmp_path / f"{HOSTILE}.capture")],
            "plot": ["plot", capture, "-o", str(tmp_path / f"{HOSTILE}.png")],
            "redact": ["redact", capture, "-o", str(tmp_path / f"{HOSTILE}.capture")],
            "shrink": ["shrink", capture, "-o", str(tmp_path / f"{HOSTILE}.capture")]}[command]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out, out
    assert len(out.strip().splitlines()) == 1 and "\\x0awrote x" in out, out


def test_the_refusal_of_changed_evidence_is_one_inert_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``shrink`` and ``redact``'s exit-1 refusal printed its message raw, the only error of the
    CLI not made one inert line (``errors.one_line``): a first finding's tensor name is a
    summary record's own text."""
    from forensics.commands._share import refused
    from forensics.share.evidence import EvidenceChangedError

    exc = EvidenceChangedError("refusing to write 'o.capture': expected out_of_bounds in "
                               "embedding (\x1b]0;owned\x07\nforged=5), got none")
    assert refused("shrink", exc) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\x07" not in err, err
    assert err.startswith("forensics shrink: refusing to write 'o.capture'"), err
