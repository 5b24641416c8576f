"""Hostile inputs for the CLI, one builder per case: each makes its files in a working folder
and returns the command line to run on them and what must come of it.

A builder gets ``work`` (its own folder; the command runs there) and ``outside`` (a folder
beside it holding canary files, which no case may change). Every case must end in exit 0 or 2
(1 only where a ``check`` difference is the right answer), with one line on stderr for exit 2,
within the driver's wall clock and address-space limit.
"""

from __future__ import annotations

import json
import os
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from forensics.records import Record
from forensics.store.writer import write_capture

EXPECTED = {"format": 1, "verdicts": {"upstream": {"embedding": "ok"}},
            "first_finding": {"upstream": None}}


@dataclass
class Case:
    """A command line and what must come of it: an exit code in ``codes`` and, on stderr (exit
    2) or stdout (exit 0), a match of ``expect``."""

    argv: list[str]
    codes: tuple[int, ...] = (2,)
    expect: str = ""
    name: str = ""
    #: exit 0 only: the one warning line stderr must hold (else stderr is empty)
    warn: str = ""
    extra: dict[str, object] = field(default_factory=dict)


CASES: dict[str, Callable[[Path, Path], Case]] = {}


def case(builder: Callable[[Path, Path], Case]) -> Callable[[Path, Path], Case]:
    """Register ``builder`` under its name."""
    CASES[builder.__name__] = builder
    return builder


def capture(work: Path, steps: int = 3, name: str = "c") -> Path:
    """A small valid capture of embedding records with a matching expected.json."""
    records = [Record("embedding", s, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                          "num_embeddings": 10}) for s in range(steps)]
    path = write_capture(work / f"{name}.capture", records)
    (path / "expected.json").write_text(json.dumps(EXPECTED))
    return path


def segment(path: Path) -> Path:
    """The capture's one segment."""
    return next(path.glob("*.arrows"))


def sparse(path: Path, size: int, head: bytes = b"") -> Path:
    """A file of ``size`` bytes that takes no disk: ``head`` then zeros."""
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)
    return path


# ---------------------------------------------------------------- 1. code chosen by a capture

@case
def check_runs_a_diff_named_by_expected(work: Path, outside: Path) -> Case:
    path = capture(work)
    (path / "p.diff").write_text(
        "--- a/vllm/v1/spec_decode/utils.py\n+++ b/vllm/v1/spec_decode/utils.py\n"
        "@@ -1,1 +1,2 @@\n import torch\n"
        f"+import os; os.system('touch {outside}/code-ran')\n")
    data = dict(EXPECTED, verdicts={f"vllm+{path}/p.diff": {"embedding": "ok"}})
    (path / "expected.json").write_text(json.dumps(data))
    return Case(["check", path], expect="not built in.*--variant")


@case
def check_variant_with_a_relative_path(work: Path, outside: Path) -> Case:
    path = capture(work)
    data = dict(EXPECTED, verdicts={"vllm+../outside/x.diff": {"embedding": "ok"}})
    (path / "expected.json").write_text(json.dumps(data))
    return Case(["check", path], expect="not built in")


@case
def check_valid_capture(work: Path, outside: Path) -> Case:
    return Case(["check", capture(work)], codes=(0,), expect="matches expected.json")


@case
def check_obtained_is_a_link_out(work: Path, outside: Path) -> Case:
    path = capture(work)
    data = dict(EXPECTED, verdicts={"upstream": {"embedding": "violation"}})
    (path / "expected.json").write_text(json.dumps(data))
    (path / "expected.obtained.json").symlink_to(outside / "canary.txt")
    return Case(["check", path], codes=(1,), expect="expected verdict 'violation'")


# ---------------------------------------------------------------- 2. hangs: FIFOs, long lines

#: case -> the file of the capture that becomes a FIFO (reading one would block for ever)
FIFO_CASES = {"fifo_index": "embedding.r0.w0.0000.arrows.idx", "fifo_events": "events-w0.jsonl",
              "fifo_expected": "expected.json", "fifo_manifest": "manifest.json",
              "fifo_segment": "embedding.r0.w1.0000.arrows"}


def _fifo_case(name: str) -> Callable[[Path, Path], Case]:
    def build(work: Path, outside: Path) -> Case:
        path = capture(work)
        target = path / FIFO_CASES[name]
        if target.exists():
            target.unlink()
        os.mkfifo(target)
        return Case(["check" if target.name == "expected.json" else "inspect", path],
                    expect="not a regular file")

    build.__name__ = name
    return build


for _fifo in FIFO_CASES:
    case(_fifo_case(_fifo))


@case
def link_inside_to_a_fifo(work: Path, outside: Path) -> Case:
    path = capture(work)
    os.mkfifo(path / "pipe")
    (path / "events-w9.jsonl").symlink_to("pipe")
    return Case(["inspect", path], expect="not a regular file")


@case
def expected_links_to_an_endless_device(work: Path, outside: Path) -> Case:
    path = capture(work)
    (path / "expected.json").unlink()
    (path / "expected.json").symlink_to("/dev/zero")
    return Case(["check", path], expect="outside the capture")


@case
def import_a_fifo_log(work: Path, outside: Path) -> Case:
    os.mkfifo(work / "engine.log")
    return Case(["import", "engine.log", "-o", "out.capture"], expect="not a regular file")


@case
def log_of_long_assert_lines(work: Path, outside: Path) -> Case:
    line = "x.cu:1:" * 300 + "Assertion " + " " * 30000 + "`" * 30000 + "\n"
    (work / "a.log").write_text(line * 40 + "Assertion `a` failed\n")
    return Case(["import", "a.log", "-o", "out.capture"], codes=(0,), expect="1 events")


@case
def log_of_one_huge_line(work: Path, outside: Path) -> Case:
    sparse(work / "huge.log", 300 << 20, b"SM70-TEMB: rows=5 input=(1,) dtype=x min=1 max=")
    # read in 1 MiB pieces, the line cut at 64 KiB: no number after max=, so no record
    return Case(["import", "huge.log", "-o", "out.capture"], codes=(0,),
                expect="0 records.*0 events")


@case
def log_with_a_5000_digit_number(work: Path, outside: Path) -> Case:
    (work / "n.log").write_text("SM70-TEMB: rows=" + "9" * 5000 + " input=(1,) dtype=x min=1 "
                                "max=2\n")
    return Case(["import", "n.log", "-o", "out.capture"], expect="outside int64")


@case
def log_with_a_number_past_int64(work: Path, outside: Path) -> Case:
    (work / "n.log").write_text("OUT-PATH out-of-range sampled ids [1] (vocab_size="
                                "99999999999999999999 k=1)\n")
    return Case(["import", "n.log", "-o", "out.capture"], expect="outside int64")


# ---------------------------------------------------------------- 3. memory: bombs and giants

def _npy(shape: tuple[int, ...], dtype: str = "<i8") -> bytes:
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def _bomb(path: Path, members: int, each: int) -> Path:
    """An npz of ``members`` int64 arrays whose central directory claims ``each`` bytes apiece
    (the reader must refuse from the claims, before unpacking anything)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for m in range(members):
            archive.writestr(f"m{m}.npy", _npy((each // 8,)) + bytes(64))
    for m in range(members):
        _claim_size(path, f"m{m}.npy", each)
    return path


@case
def npz_bomb_in_total(work: Path, outside: Path) -> Case:
    _bomb(work / "b.npz", 3, 200 << 20)
    return Case(["import", "b.npz", "-o", "out.capture"], expect="in all")


@case
def npz_real_bomb_member(work: Path, outside: Path) -> Case:
    """A real deflate bomb: 300 MiB of zeros in one member (past the per-member limit)."""
    block = bytes(1 << 20)
    with zipfile.ZipFile(work / "b.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("m.npy", "w", force_zip64=True) as member:
            member.write(_npy(((300 << 20) // 8,)))
            for _ in range(300):
                member.write(block)
    return Case(["import", "b.npz", "-o", "out.capture"], expect="per member")


@case
def npz_member_without_npy_suffix(work: Path, outside: Path) -> Case:
    with zipfile.ZipFile(work / "b.npz", "w") as archive:
        archive.writestr("site.npy", _npy((), "<U9") + "embedding".encode("utf-32-le"))
        archive.writestr("raw", b"x" * 100)
    return Case(["import", "b.npz", "-o", "out.capture"], expect="not a .npy array")


def _torch_save(path: Path, obj: object, **kwargs: object) -> Path:
    import torch

    torch.save(obj, path, **kwargs)  # type: ignore[arg-type]
    return path


def _pt_record(**changes: object) -> dict[str, object]:
    import torch

    record: dict[str, object] = {"site": "embedding", "step": 1,
                                 "input_ids": torch.arange(4), "num_embeddings": 10}
    record.update(changes)
    return record


@case
def pt_expanded_tensor(work: Path, outside: Path) -> Case:
    import torch

    _torch_save(work / "e.pt", _pt_record(input_ids=torch.zeros(1, dtype=torch.int64)
                                           .expand(1 << 31)))
    return Case(["import", "e.pt", "-o", "out.capture"], expect="more than")


@case
def pt_shared_list_blowup(work: Path, outside: Path) -> Case:
    nested: list[object] = [1]
    for _ in range(60):
        nested = [nested, nested]
    _torch_save(work / "n.pt", _pt_record(req_ids=nested))
    # counted from the pickle before it is loaded (T107c), before its shared lists are
    return Case(["import", "n.pt", "-o", "out.capture"],
                expect="lists, dicts and tuples in field 'req_ids', counted before anything")


@case
def pt_storage_inflated(work: Path, outside: Path) -> Case:
    import torch

    path = _torch_save(work / "s.pt", _pt_record(input_ids=torch.zeros(16, dtype=torch.int64)))
    storage = next(n for n in zipfile.ZipFile(path).namelist() if n.endswith("/data/0"))
    _claim_size(path, storage, 1 << 31)  # the central directory claims a 2 GiB storage
    return Case(["import", "s.pt", "-o", "out.capture"], expect="unpacks to")


@case
def pt_storage_numel_lies(work: Path, outside: Path) -> Case:
    """The pickle claims a storage of 10**9 int64 over a 32-byte record: refused, never
    allocated."""
    import collections
    import io
    import pickle

    import torch

    class Storage:
        pass

    class Tensor:
        def __reduce__(self) -> tuple[object, ...]:
            return (torch._utils._rebuild_tensor_v2,
                    (Storage(), 0, (4,), (1,), False, collections.OrderedDict()))

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj: object) -> object:
            return ("storage", torch.LongStorage, "0", "cpu", 10**9) \
                if isinstance(obj, Storage) else None

    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump(_pt_record(input_ids=Tensor()))
    with zipfile.ZipFile(work / "lie.pt", "w") as archive:
        archive.writestr("archive/data.pkl", buffer.getvalue())
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/data/0", bytes(32))
        archive.writestr("archive/version", "3\n")
    return Case(["import", "lie.pt", "-o", "out.capture"], expect="does not match")


def _claim_size(path: Path, member: str, size: int) -> None:
    """Rewrite the uncompressed size of ``member`` in the central directory (zip64 aside)."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        length = struct.unpack_from("<H", data, pos + 28)[0]
        if bytes(data[pos + 46:pos + 46 + length]) == name:
            struct.pack_into("<I", data, pos + 24, min(size, 0xFFFFFFFE))
            break
        pos = data.find(b"PK\x01\x02", pos + 4)
    path.write_bytes(bytes(data))


@case
def pt_legacy_format(work: Path, outside: Path) -> Case:
    _torch_save(work / "l.pt", _pt_record(), _use_new_zipfile_serialization=False)
    return Case(["import", "l.pt", "-o", "out.capture"], expect="legacy")


@case
def sparse_index_of_2gb(work: Path, outside: Path) -> Case:
    path = capture(work)
    index = Path(str(segment(path)) + ".idx")
    sparse(index, 2 << 30, index.read_bytes())
    return Case(["inspect", path], expect="at most 268435456")


@case
def events_one_endless_line(work: Path, outside: Path) -> Case:
    path = capture(work)
    sparse(path / "events-w1.jsonl", 60 << 20, b'{"kind": "')
    return Case(["inspect", path], codes=(0,), expect="truncated tail ignored")


@case
def events_too_large(work: Path, outside: Path) -> Case:
    path = capture(work)
    sparse(path / "events-w1.jsonl", 1 << 30)
    return Case(["inspect", path], expect="at most")


@case
def manifest_too_large(work: Path, outside: Path) -> Case:
    path = capture(work)
    sparse(path / "manifest.json", 1 << 30, b"{")
    return Case(["inspect", path], expect="at most")


# ---------------------------------------------------------------- 4. one line, exit 2

@case
def pt_step_past_int64(work: Path, outside: Path) -> Case:
    _torch_save(work / "s.pt", _pt_record(step=2**70))
    return Case(["import", "s.pt", "-o", "out.capture"], expect="'step' must be")


@case
def pt_step_of_5000_digits(work: Path, outside: Path) -> Case:
    _torch_save(work / "s.pt", _pt_record(step=10**5000))  # torch refuses the LONG4 opcode
    return Case(["import", "s.pt", "-o", "out.capture"], expect="refused, nothing was run")


@case
def pt_vocab_past_int64(work: Path, outside: Path) -> Case:
    _torch_save(work / "v.pt", _pt_record(num_embeddings=2**64))
    return Case(["import", "v.pt", "-o", "out.capture"], expect="v.pt.*outside int64")


def _safetensors(path: Path, header: dict[str, object], body: bytes = b"") -> Path:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)
    return path


@case
def safetensors_metadata_past_int64(work: Path, outside: Path) -> Case:
    _safetensors(work / "m.safetensors", {"__metadata__": {
        "site": "embedding", "step": "1", "num_embeddings": "9" * 25},
        "input_ids": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8))
    return Case(["import", "m.safetensors", "-o", "out.capture"], expect="outside int64")


@case
def safetensors_metadata_of_5000_digits(work: Path, outside: Path) -> Case:
    _safetensors(work / "m.safetensors", {"__metadata__": {
        "site": "embedding", "step": "9" * 5000, "num_embeddings": "10"},
        "input_ids": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8))
    return Case(["import", "m.safetensors", "-o", "out.capture"], expect="step")


@case
def safetensors_zero_and_huge_dims(work: Path, outside: Path) -> Case:
    _safetensors(work / "z.safetensors", {"__metadata__": {
        "site": "embedding", "step": "1", "num_embeddings": "10"},
        "input_ids": {"dtype": "I64", "shape": [0, 2**40, 2**40, 2**40],
                      "data_offsets": [0, 0]}})
    return Case(["import", "z.safetensors", "-o", "out.capture"], expect="spans more than")


@case
def safetensors_overlapping_tensors(work: Path, outside: Path) -> Case:
    _safetensors(work / "o.safetensors", {"__metadata__": {
        "site": "embedding", "step": "1", "num_embeddings": "10"},
        "input_ids": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]},
        "cu_num_tokens": {"dtype": "I64", "shape": [1], "data_offsets": [8, 16]}}, bytes(16))
    return Case(["import", "o.safetensors", "-o", "out.capture"], expect="overlap")


@case
def expected_first_finding_nested(work: Path, outside: Path) -> Case:
    path = capture(work)
    data = dict(EXPECTED, first_finding={"upstream": {"step": [[[1]]]}})
    (path / "expected.json").write_text(json.dumps(data))
    return Case(["check", path], expect="first_finding.upstream")


@case
def index_offset_overflows(work: Path, outside: Path) -> Case:
    path = capture(work)
    index = Path(str(segment(path)) + ".idx")
    data = bytearray(index.read_bytes())
    data[8:16] = (2**63 - 1).to_bytes(8, "little")
    index.write_bytes(bytes(data))
    return Case(["inspect", path], expect="index entry 0")


@case
def simulate_into_proc(work: Path, outside: Path) -> Case:
    return Case(["simulate", "clean", "-o", "/proc/forensics.capture", "--steps", "3"],
                expect="cannot write capture")


@case
def import_under_a_file(work: Path, outside: Path) -> Case:
    (work / "a.log").write_text("SM70-TEMB: rows=5 input=(1,) dtype=x min=1 max=2\n")
    return Case(["import", "a.log", "-o", "a.log/out.capture"], expect="cannot write capture")


@case
def plot_into_proc(work: Path, outside: Path) -> Case:
    return Case(["plot", capture(work), "-o", "/proc/forensics.png", "--kind", "verdicts"],
                expect="/proc/forensics.png")


@case
def plot_onto_a_link_to_a_full_device(work: Path, outside: Path) -> Case:
    """An output is built beside its target and renamed over it: the link is replaced, never
    written through (a full disk is tests/hostile/test_round2.py's file-size limit case)."""
    (work / "full.png").symlink_to("/dev/full")
    return Case(["plot", capture(work), "-o", "full.png", "--kind", "verdicts"], codes=(0,),
                expect="full.png")


@case
def simulate_over_a_link_out(work: Path, outside: Path) -> Case:
    (work / "out.capture").symlink_to(outside)
    return Case(["simulate", "clean", "-o", "out.capture", "--steps", "3", "--force"],
                expect="not a capture directory")


# ---------------------------------------------------------------- 5/6. paths, segments

@case
def manifest_attachment_out(work: Path, outside: Path) -> Case:
    path = capture(work)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["attachments"] = ["../../outside/canary.txt"]
    (path / "manifest.json").write_text(json.dumps(manifest))
    return Case(["inspect", path], expect="outside the capture")


@case
def segment_links_out(work: Path, outside: Path) -> Case:
    path = capture(work)
    (path / "embedding.r0.w7.0000.arrows").symlink_to(outside / "canary.txt")
    return Case(["inspect", path], expect="outside the capture")


@case
def segment_cut_at_its_first_message(work: Path, outside: Path) -> Case:
    path = capture(work)
    seg = segment(path)
    data = bytearray(seg.read_bytes())
    data[4:8] = (2**31 - 1).to_bytes(4, "little")
    seg.write_bytes(bytes(data))
    return Case(["inspect", path], expect=f"{seg.name}.*claims")


@case
def segment_copied(work: Path, outside: Path) -> Case:
    path = capture(work)
    seg = segment(path)
    copy = path / seg.name.replace(".0000.", ".0001.")  # its process's next segment
    copy.write_bytes(seg.read_bytes())
    Path(str(copy) + ".idx").write_bytes(Path(str(seg) + ".idx").read_bytes())
    return Case(["check", path], expect="same batches")


# ---------------------------------------------------------------- one file of a capture, rewritten

#: case -> (file in the capture, its new content, command, exit codes, what must come out)
FILE_CASES: dict[str, tuple[str, bytes, str, tuple[int, ...], str]] = {
    "event_kind_null": ("events-w1.jsonl", b'{"kind": null}\n', "inspect", (2,),
                        "'kind' must be a string"),
    "event_kind_object": ("events-w1.jsonl", b'{"kind": {"a": 1}, "line": 3}\n', "inspect",
                          (2,), "'kind' must be a string"),
    "event_step_huge": ("events-w1.jsonl", b'{"kind": "x", "step": ' + b"9" * 30 + b"}\n",
                        "inspect", (2,), "'step' must be"),
    "event_rank_is_text": ("events-w1.jsonl", b'{"kind": "x", "rank": "0; rm -rf /"}\n',
                           "inspect", (2,), "'rank' must be"),
    "events_of_blank_lines": ("events-w1.jsonl", b"\n" * (20 << 20), "inspect", (0,),
                              "events: 0"),
    "expected_with_wrong_inner_types": ("expected.json", b'{"verdicts": {"upstream": ["ok"]}}',
                                        "check", (2,), "verdicts.upstream"),
    "expected_deeply_nested": ("expected.json", b"[" * 200_000 + b"]" * 200_000, "check", (2,),
                               "nested 200000 deep"),
    "manifest_format_of_5000_digits": ("manifest.json", b'{"format": ' + b"9" * 5000 + b"}",
                                       "inspect", (2,), "manifest"),
    "manifest_deeply_nested": ("manifest.json", b'{"format": 1, "notes": ' + b"[" * 100_000
                               + b"]" * 100_000 + b"}", "inspect", (2,), "nested 100001 deep"),
}


def _file_case(name: str) -> Callable[[Path, Path], Case]:
    relative, content, command, codes, expect = FILE_CASES[name]

    def build(work: Path, outside: Path) -> Case:
        path = capture(work)
        (path / relative).write_bytes(content)
        return Case([command, path], codes=codes, expect=expect)

    build.__name__ = name
    return build


for _name in FILE_CASES:
    case(_file_case(_name))


# ---------------------------------------------------------------- beyond the issue's list

@case
def planted_replacement_journal_with_links_out(work: Path, outside: Path) -> Case:
    """A journal and 'old'/'tmp' siblings that are links to the canary folder: recovery must
    neither delete nor follow them into a write."""
    path = capture(work)
    (work / ".c.capture.replacing").write_text('{"pid": 999999}')
    (work / ".c.capture.old-999999").symlink_to(outside)
    (work / ".c.capture.tmp-999998").symlink_to(outside)
    return Case(["inspect", path], codes=(0,), expect="3 records")


@case
def planted_journal_that_is_a_fifo(work: Path, outside: Path) -> Case:
    path = capture(work)
    os.mkfifo(work / ".c.capture.replacing")
    return Case(["inspect", path], codes=(0,), expect="3 records",
                warn="ignored the replacement journal")


@case
def expected_is_a_directory(work: Path, outside: Path) -> Case:
    path = capture(work)
    (path / "expected.json").unlink()
    (path / "expected.json").mkdir()
    return Case(["check", path], expect="not a regular file")


@case
def import_a_directory_named_npz(work: Path, outside: Path) -> Case:
    (work / "d.npz").mkdir()
    return Case(["import", "d.npz", "-o", "out.capture"], expect="not a regular file")


@case
def safetensors_header_claims_everything(work: Path, outside: Path) -> Case:
    (work / "h.safetensors").write_bytes(struct.pack("<Q", 2**64 - 1) + b"{}")
    return Case(["import", "h.safetensors", "-o", "out.capture"], expect="header claims")


@case
def replay_of_a_capture_with_a_copied_segment(work: Path, outside: Path) -> Case:
    built = segment_copied(work, outside)
    return Case(["replay", built.argv[1]], expect="same batches")


@case
def force_over_a_plain_folder(work: Path, outside: Path) -> Case:
    (work / "out.capture").mkdir()
    (work / "out.capture" / "precious.txt").write_text("keep")
    return Case(["simulate", "clean", "-o", "out.capture", "--steps", "3", "--force"],
                expect="not a capture")
