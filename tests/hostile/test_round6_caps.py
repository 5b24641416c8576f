"""Hostile input, round 6, on ``forensics import`` and its caps (T33i): a ``.safetensors``
header is held to what one record needs (its length checked from its first 8 bytes, its lists
and objects counted before it is parsed); a ``.pt`` view is materialised only within the bytes
its storage holds; every refusal is one line naming the file and field, exit 2, nothing
written."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from test_round4_importers import refused

from forensics.cli import main
from forensics.importers import safetensors_

META = {"site": "embedding", "step": "1", "num_embeddings": "10"}
IDS = {"dtype": "I64", "shape": [4], "data_offsets": [0, 32]}
BODY = struct.pack("<4q", 1, 2, 3, 4)


def _safetensors(path: Path, raw: bytes, body: bytes = BODY) -> Path:
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)
    return path


def _header(**extra: object) -> bytes:
    return json.dumps({"__metadata__": META, "input_ids": IDS, **extra}).encode()


# ------------------------------------------------------------------ .safetensors header

def test_a_safetensors_header_past_what_one_record_needs_is_refused_by_its_length(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A header one byte past the cap (valid JSON: a record padded with spaces) was parsed
    whole (up to 100 MiB); it is refused from its 8-byte length, naming the field. The same
    record within the cap imports."""
    raw = _header()
    fine = _safetensors(tmp_path / "fine.safetensors", raw + b" " * 1000)
    assert main(["import", str(fine), "-o", str(tmp_path / "fine.capture")]) == 0
    capsys.readouterr()
    padded = raw + b" " * (safetensors_.MAX_HEADER + 1 - len(raw))
    source = _safetensors(tmp_path / "long.safetensors", padded)
    refused(source, tmp_path, capsys, "header length", str(len(padded)))


@pytest.mark.timeout(60)
def test_a_100_mib_safetensors_header_costs_no_memory(tmp_path: Path) -> None:
    """A header claiming 100 MiB (a sparse file: it reads as NUL bytes) was read and decoded
    whole, 300 MiB more at peak (a 100 MiB header of empty lists: 2.6 GiB and 27 s); now only
    its 8-byte length is read (measured by ``ru_maxrss`` in a child process)."""
    source = tmp_path / "huge.safetensors"
    size = 100 << 20
    with open(source, "wb") as out:
        out.write(struct.pack("<Q", size) + b'{"x":')
        out.truncate(8 + size)
    script = ("import resource, sys\nfrom forensics.importers import read_source\n"
              "from forensics.errors import CaptureFormatError\n"
              "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
              "try:\n    read_source(sys.argv[1])\nexcept CaptureFormatError as exc:\n"
              "    print(exc)\n"
              "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n")
    done = subprocess.run([sys.executable, "-c", script, str(source)], capture_output=True,
                          text=True, timeout=60, check=True)
    message, grown = done.stdout.strip().splitlines()
    assert "header length" in message, done.stdout
    assert int(grown) < 32 * 1024, f"peak memory grew {int(grown) // 1024} MiB"


def test_a_safetensors_header_of_a_million_lists_is_refused_before_it_is_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Within the length cap, 16 MiB of ``[]`` is five million Python lists (300 MiB); the
    lists and objects are counted before parsing, in the header and in each ``__metadata__``
    text (where ``\\u005b`` escapes hide them from the header's count)."""
    lists = b"[]," * (safetensors_.MAX_CONTAINERS + 1)
    source = _safetensors(tmp_path / "lists.safetensors",
                          _header()[:-1] + b', "x": [' + lists + b"[]]}")
    refused(source, tmp_path, capsys, "header", "JSON lists and objects")
    hidden = "\\u005b\\u005d," * (safetensors_.MAX_CONTAINERS + 1)
    raw = (json.dumps({"__metadata__": {**META, "req_ids": "@"}, "input_ids": IDS})
           .replace('"@"', '"\\u005b' + hidden + '\\u005b\\u005d\\u005d"').encode())
    source = _safetensors(tmp_path / "escaped.safetensors", raw)
    refused(source, tmp_path, capsys, "'req_ids'", "JSON lists and objects")


def test_a_safetensors_header_naming_more_tensors_than_a_record_holds_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each of a header's entries was turned into an array before the record was checked
    (thousands of empty tensors in a small header); a record holds at most 64."""
    empty = {"dtype": "I64", "shape": [0], "data_offsets": [0, 0]}
    raw = _header(**{f"t{k}": empty for k in range(safetensors_.MAX_TENSORS + 1)})
    source = _safetensors(tmp_path / "many.safetensors", raw)
    refused(source, tmp_path, capsys, "tensors", str(safetensors_.MAX_TENSORS))


def test_the_header_length_is_read_without_reading_the_file(tmp_path: Path) -> None:
    """``read_prefix`` reads only the bytes asked for (a FIFO or link out is refused as by
    every guarded read)."""
    from forensics.errors import UnsafeInputError
    from forensics.store.guarded import read_prefix

    source = _safetensors(tmp_path / "a.safetensors", _header())
    assert read_prefix(source, "safetensors file", 8) == source.read_bytes()[:8]
    assert read_prefix(source, "safetensors file", 1 << 30) == source.read_bytes()
    fifo = tmp_path / "fifo.safetensors"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeInputError):
        read_prefix(fifo, "safetensors file", 8)


# ------------------------------------------------------------------ .pt views

def _pt(path: Path, **fields: object) -> Path:
    import torch

    torch.save({"site": "embedding", "step": 1, "num_embeddings": 10, **fields}, path)
    return path


def test_an_expanded_pt_tensor_is_refused_by_the_bytes_its_storage_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One stored int64 expanded (stride 0) to a million elements was copied out to 8 MiB (up
    to 512 MiB from 8 stored bytes); it is refused naming the field, its shape and the bytes
    stored. An overlapping view (strides (1, 1)) is refused the same way; a short broadcast and
    a plain tensor import."""
    import torch

    one = torch.zeros(1, dtype=torch.int64)
    source = _pt(tmp_path / "expanded.pt", input_ids=one.expand(1 << 20))
    refused(source, tmp_path, capsys, "'input_ids'", "[1048576]", "the 8 its storage holds")
    base = torch.arange(1 << 13, dtype=torch.int64)
    source = _pt(tmp_path / "overlap.pt", input_ids=base.as_strided((1 << 12, 1 << 12), (1, 1)))
    refused(source, tmp_path, capsys, "'input_ids'", "[4096, 4096]")
    fine = _pt(tmp_path / "fine.pt", input_ids=one.expand(4))
    assert main(["import", str(fine), "-o", str(tmp_path / "fine.capture")]) == 0


def test_a_pt_tensor_past_the_allocation_budget_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What a ``.pt`` tensor materialises is held to ``FORENSICS_MAX_ALLOC`` (the one budget of
    an allocation sized by a record), in one line naming the field."""
    import torch

    monkeypatch.setenv("FORENSICS_MAX_ALLOC", "1K")
    source = _pt(tmp_path / "big.pt", input_ids=torch.zeros(1024, dtype=torch.int64))
    refused(source, tmp_path, capsys, "'input_ids'", "allocation budget", "FORENSICS_MAX_ALLOC")


# ------------------------------------------------------------------ logs: line ends

def test_a_log_of_cr_only_line_ends_is_read_line_by_line(tmp_path: Path) -> None:
    """A log whose lines end in a lone carriage return was one line, cut at 64 KiB: its
    second and later crashes were never counted (two asserts read as one event, the rest
    lost). A lone CR ends a line as LF does; CR LF is one end, so line numbers stay."""
    from forensics.importers import read_source

    lines = ["Assertion `a < n` failed", "x", "Assertion `b < n` failed", "y" * 70_000,
             "EngineDeadError"]
    for end, expected in (("\r", [1, 3, 5]), ("\r\n", [1, 3, 5]), ("\n", [1, 3, 5])):
        source = tmp_path / f"engine-{len(end)}-{ord(end[0])}.log"
        source.write_bytes(end.join(lines).encode() + end.encode())
        events = read_source(source).events
        # line 5's EngineDeadError is the report of line 3's crash, no event (T120a)
        assert [e["line"] for e in events] + [events[-1]["engine_dead"]["line"]] == expected, (
            end, events)
        assert [e.get("detail") for e in events[:2]] == ["a < n", "b < n"]


def test_a_cr_lf_split_between_two_reads_is_one_line_end(tmp_path: Path) -> None:
    """The CR of a CR LF that ends one piece read and the LF that begins the next are one
    line end (never a blank line that shifts every later line number)."""
    from forensics.store.guarded import CHUNK, iter_lines

    source = tmp_path / "split.log"
    source.write_bytes(b"x" * (CHUNK - 1) + b"\r\nsecond\rthird\r")
    found = [(n, line[:6], done) for n, line, done, _cut in
             iter_lines(source, "log", max_line=64, cr_ends=True)]
    assert found == [(1, b"xxxxxx", True), (2, b"second", True), (3, b"third", True)]
    source.write_bytes(b"a\rb")
    assert list(iter_lines(source, "log", cr_ends=True)) == [(1, b"a", True, False),
                                                              (2, b"b", False, False)]
    assert list(iter_lines(source, "log")) == [(1, b"a\rb", False, False)]


def _pt_with_pickle(path: Path, body: bytes) -> Path:
    """A torch zip archive whose ``data.pkl`` is ``body``."""
    import torch

    saved = io.BytesIO()
    torch.save({"a": 1}, saved)
    with zipfile.ZipFile(saved) as archive, zipfile.ZipFile(path, "w") as out:
        for info in archive.infolist():
            raw = body if info.filename.endswith("data.pkl") else archive.read(info)
            out.writestr(info.filename, raw)
    return path


def test_a_pickle_making_more_values_than_a_source_holds_is_refused_before_it_is_loaded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """16 MiB of 1-byte ``EMPTY_LIST`` opcodes made 16 million lists in torch's unpickler (1.1
    GiB, a minute) before any value was counted; the pickle's opcodes are counted first, and
    past the values one source may hold (here lowered to 1,000) torch never loads it."""
    import torch

    from forensics.importers import pickle_scan, pt

    monkeypatch.setattr(pickle_scan, "MAX_VALUES", 1000)  # the opcode scan's own module

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("torch.load ran")

    monkeypatch.setattr(torch, "load", never)
    source = _pt_with_pickle(tmp_path / "lists.pt", b"\x80\x02](" + b"]" * 1001 + b"e.")
    refused(source, tmp_path, capsys, "pickle", "more than 1000 values")
    shared = b"\x80\x02](]q\x00" + b"h\x00" * 500 + b"e."  # one list, 500 references
    assert pt._count_made(shared, 0, tmp_path / "shared.pt") == 504  # 2 lists, mark, memo, refs
    source = _pt_with_pickle(tmp_path / "marks.pt", b"\x80\x02" + b"(" * 1001 + b"].")
    refused(source, tmp_path, capsys, "pickle", "more than 1000 values")
    assert pt._count_made(b"\xff not a pickle", 7, tmp_path / "x.pt") == 7  # left to the loader


DUMP = "(EngineCore_DP0 pid=1) ERROR 12-02 10:46:44 [dump_input.py:72] Dumping "


def test_a_crash_dump_number_of_thousands_of_digits_is_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A config's ``tensor_parallel_size`` or a dump's ``total_num_scheduled_tokens`` of 5,000
    digits was converted with ``int()`` (Python refuses past 4,300 digits: an internal error),
    and a draft id of 20 digits past int64 went into the event; each such number of the config
    and the total is left out as a value that does not parse, and the rest of the dump is kept
    (a draft id past int64 is refused since T67f: test_round14_attack)."""
    huge = "9" * 5000
    source = tmp_path / "engine.log"
    source.write_text(
        f"{DUMP}input data for V1 LLM engine (v0.33.0) with config: model='m', "
        f"tensor_parallel_size={huge}\n"
        f"{DUMP}scheduler output for model execution: SchedulerOutput(scheduled_spec_decode_"
        f"tokens={{r1: [7, -1, 5]}}, num_scheduled_tokens={{r1: 3}}, "
        f"total_num_scheduled_tokens={huge})\n")
    out = tmp_path / "out.capture"
    assert main(["import", str(source), "-o", str(out)]) == 0, capsys.readouterr().err
    from forensics.store.reader import load

    (dump,) = [e for e in load(out).events if e["kind"] == "crash_dump"]
    assert dump["config"] == {"vllm": "0.33.0", "model": "m"}
    assert dump["total_num_scheduled_tokens"] is None
    assert dump["scheduled_spec_decode_tokens"] == {"r1": [7, -1, 5]}
    assert dump["num_scheduled_tokens"] == {"r1": 3}


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal (the progress bar draws only on one)."""

    def isatty(self) -> bool:
        return True


def test_the_import_progress_bar_shows_a_source_name_as_inert_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A source's file name (a log planted in a shared folder, imported by a glob) was drawn
    raw on the terminal by the progress bar: an OSC or CSI sequence in it reached the user's
    terminal. It is drawn escaped."""
    from forensics.importers import import_sources

    source = tmp_path / "a\x1b]0;owned\x07\x1b[2J.log"
    source.write_text("EngineDeadError\n")
    screen = _Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    import_sources([source], tmp_path / "out.capture")
    drawn = screen.getvalue()
    assert "owned" in drawn and "\x1b" not in drawn and "\x07" not in drawn, repr(drawn)


def test_combining_many_sources_is_linear_in_their_count(tmp_path: Path) -> None:
    """Whether another source names a step was asked of every other source, for each source:
    quadratic in the sources (a glob of thousands of logs). 4x the sources, under 6x the
    instructions."""
    from tests.instructions import assert_scales_linearly

    assert_scales_linearly(__file__, "sources", 2000, tmp_path)


def make_work(case: str, count: int, scratch: Path) -> Callable[[], object]:
    """Combining ``count`` empty sources (run by :mod:`tests.instructions`)."""
    from forensics.importers import Imported, combined

    sources = [Imported() for _ in range(count)]
    return lambda: combined(sources)


# ------------------------------------------------------------------ the guarded reader

def test_a_capture_file_swapped_for_a_link_after_its_check_is_not_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of a capture was checked (no link, inside the capture) and then opened by its
    path, following whatever was there by then: another user of a shared folder who swaps it
    for a link to a file of yours in that moment had it read as the capture's. A file that was
    no link when checked is opened without following one."""
    from forensics.errors import UnsafeInputError
    from forensics.store import guarded, paths

    root = tmp_path / "x.capture"
    root.mkdir()
    target = root / "manifest.json"
    target.write_text("{}")
    private = tmp_path / "private.json"
    private.write_text('{"secret": 1}')
    checked = paths.check_within

    def swap_after_check(where: Path, path: Path) -> None:
        checked(where, path)
        target.unlink()
        target.symlink_to(private)

    monkeypatch.setattr(guarded, "check_within", swap_after_check)
    with pytest.raises(UnsafeInputError, match="became a link"):
        guarded.read_bytes(target, "manifest", root)
    target.unlink()
    inside = root / "real.json"
    inside.write_text("{}")
    target.symlink_to(inside)  # a link inside the capture is still read
    monkeypatch.setattr(guarded, "check_within", checked)
    assert guarded.read_bytes(target, "manifest", root) == b"{}"


def test_log_lines_placed_past_int64_by_another_source_name_the_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A dump at step 2**63 - 1 beside a log whose probe lines name no step placed those lines
    at 2**63: the refusal named the capture's temporary build folder and "record 1", not the
    log. It names the log, before anything is built."""
    import numpy as np
    from test_round4_importers import BASE, _npz

    dump = _npz(tmp_path / "last.npz", [(f"{k}.npy", v) for k, v in
                                        {**BASE, "step": np.array(2**63 - 1)}.items()])
    log = tmp_path / "probe.log"
    log.write_text("SM70-TEMB: rows=1 input=(4,) dtype=torch.int64 min=0 max=3\n")
    out = tmp_path / "out.capture"
    assert main(["import", str(dump), str(log), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'probe.log'" in err and "int64" in err, err
    assert "tmp" not in err and not list(tmp_path.glob("*.capture*")) and not out.exists()


def test_a_log_whose_size_says_less_than_it_holds_is_read_only_to_its_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``/proc`` file says size 0 and holds what it likes (``/proc/self/pagemap``: hundreds
    of GiB); a log named so, or linked there from a shared folder, was read line by line to
    its end, past the log's cap. Reading stops at the cap (here lowered to 100 bytes) with one
    line naming the file; a file within it reads whole."""
    from forensics.errors import CaptureFormatError
    from forensics.store import guarded

    monkeypatch.setitem(guarded.LIMITS, "log", 100)
    maps = Path("/proc/self/maps")
    assert os.stat(maps).st_size == 0
    with pytest.raises(CaptureFormatError, match="grew past 100 bytes"):
        list(guarded.iter_lines(maps, "log"))
    small = tmp_path / "small.log"
    small.write_bytes(b"a\n" * 50)
    assert len(list(guarded.iter_lines(small, "log", cr_ends=True))) == 50


def test_one_file_given_as_two_sources_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A dump and a link to it planted beside it (a folder imported by a glob), or one dump
    named twice, imported its records twice; one line names both, nothing is written."""
    from test_round4_importers import _members, _npz

    dump = _npz(tmp_path / "a.npz", _members())
    (tmp_path / "b.npz").symlink_to(dump)
    out = tmp_path / "out.capture"
    for second in (tmp_path / "b.npz", dump):
        assert main(["import", str(dump), str(second), "-o", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "same file" in err and second.name in err, err
        assert not out.exists()
    other = _npz(tmp_path / "c.npz", _members())
    assert main(["import", str(dump), str(other), "-o", str(out)]) == 0
