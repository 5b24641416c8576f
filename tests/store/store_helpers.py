"""Record strategies and comparisons shared by the store and importer tests."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from forensics.records import Record
from forensics.sites import get_site
from forensics.validate import CAPPED_FIELDS, MAX_BOUND, SUMMARY_COMMON, field_specs, int_range

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=6)


def tensor(ndim: int) -> st.SearchStrategy[np.ndarray]:
    """Integer arrays of any width, ``ndim`` dimensions of 0..5."""
    return st.sampled_from(INT_DTYPES).flatmap(
        lambda dtype: hnp.arrays(np.dtype(dtype), hnp.array_shapes(min_dims=ndim, max_dims=ndim,
                                                                    min_side=0, max_side=5)))


def value_of(kind: str, ndim: int) -> st.SearchStrategy[Any]:
    """A value of field kind ``kind``."""
    return {
        "tensor": lambda: tensor(ndim),
        "int": lambda: INT64,
        "str_list": lambda: st.lists(TEXT, max_size=4),
        "opt_str_list": lambda: st.lists(st.none() | TEXT, max_size=4),
        "index_map": lambda: st.dictionaries(TEXT, INT64, max_size=4),
        "ragged": lambda: st.lists(st.lists(INT64, max_size=4), max_size=4),
    }[kind]()


def _capped(value: Any) -> Any:
    """``value`` with every integer above :data:`MAX_BOUND` (a capture's cap) brought to it."""
    if isinstance(value, np.ndarray):
        return np.minimum(value, np.array(MAX_BOUND).astype(value.dtype)) \
            if np.iinfo(value.dtype).max > MAX_BOUND else value
    return min(value, MAX_BOUND)


@st.composite
def full_record(draw: st.DrawFn, site: str) -> Record:
    """A schema-valid full record of ``site`` (optional fields present or not)."""
    fields = {}
    for name, spec in field_specs(site).items():
        if spec.required or draw(st.booleans()):
            fields[name] = draw(st.integers(*int_range(spec)) if spec.kind == "int"
                                else value_of(spec.kind, spec.ndim))
            if name.removesuffix("_after") in CAPPED_FIELDS:
                fields[name] = _capped(fields[name])
    return Record(site, draw(st.integers(0, 50)), draw(st.integers(0, 3)), fields)


@st.composite
def summary_record(draw: st.DrawFn, site: str) -> Record:
    """A summary record of ``site``: min, max, the bound, and optional extras."""
    bound = get_site(site).summary_bound
    fields: dict[str, Any] = {name: draw(INT64) for name in SUMMARY_COMMON}
    spec = field_specs(site).get(bound)  # a site may bound its summary by a name of its own
    fields[bound] = draw(INT64 if spec is None else st.integers(*int_range(spec)))
    fields.update({n: _capped(v) for n, v in fields.items() if n in CAPPED_FIELDS})
    if draw(st.booleans()):
        fields["line"] = draw(st.integers(1, 10**6))
    if draw(st.booleans()):
        fields["ids"] = draw(tensor(1))
    if draw(st.booleans()):
        fields["dtype"] = draw(TEXT)
    return Record(site, draw(st.integers(0, 50)), draw(st.integers(0, 3)), fields, summary=True)


def any_record(site: str) -> st.SearchStrategy[Record]:
    """A full or summary record of ``site``."""
    return full_record(site) | summary_record(site)


def assert_value_equal(a: Any, b: Any, where: str) -> None:
    """Equal values; arrays also equal in dtype and shape."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, (where, a.dtype, b.dtype, a.shape,
                                                          b.shape)
        assert np.array_equal(a, b), where
    else:
        assert a == b, (where, a, b)
        assert type(a) is type(b), (where, type(a), type(b))


def assert_records_equal(a: Record, b: Record, where: str = "") -> None:
    """The two records carry the same site, step, rank, summary flag and fields."""
    assert (a.site, a.step, a.rank, a.summary) == (b.site, b.step, b.rank, b.summary), where
    assert sorted(a.fields) == sorted(b.fields), (where, sorted(a.fields), sorted(b.fields))
    for name in a.fields:
        assert_value_equal(a.fields[name], b.fields[name], f"{where} field {name}")


def embedding(step: int, rank: int = 0, size: int = 8, base: int = 0,
              req: str | None = None) -> Record:
    """A small deterministic embedding record."""
    fields: dict[str, Any] = {"input_ids": (np.arange(size, dtype=np.int32) + base + step),
                              "num_embeddings": 1000 + step}
    if req is not None:
        fields["req_ids"] = [req]
    return Record("embedding", step, rank, fields)


def limit_memory(extra_bytes: int = 2 << 30) -> None:
    """Cap this process's address space at its current size plus ``extra_bytes``."""
    with open("/proc/self/status") as status:
        size_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    limit = size_kb * 1024 + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))





def fork(target: Callable[[int], None]) -> tuple[int, int]:
    """Run ``target(write_fd)`` in a forked child (already importing everything, so it starts
    at once); return (pid, read_fd). The child exits 0 after ``target``, 70 on an exception."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            os.close(read_fd)
            target(write_fd)
        except BaseException:
            import traceback

            os.write(write_fd, traceback.format_exc().encode())
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def read_line(fd: int) -> str:
    """Read one line from ``fd`` (unbuffered, byte by byte)."""
    out = b""
    while not out.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        out += chunk
    return out.decode()


def read_all(fd: int) -> str:
    """Read ``fd`` to its end and close it."""
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def write_forever(capture: Path, process: str, count: int, batch: int, size: int,
                  out_fd: int) -> None:
    """Append ``count`` embedding records (rank i % 2, request ``PROCESS-i``), flushing every
    ``batch`` and writing the number flushed to ``out_fd`` after each flush returns."""
    from forensics.store.writer import CaptureWriter

    base = int(process[1:]) * 1_000_000
    writer = CaptureWriter(capture, {"notes": f"written by {process}"}, process=process)
    os.write(out_fd, b"ready\n")
    for i in range(count):
        writer.append(embedding(i, rank=i % 2, size=size, base=base, req=f"{process}-{i}"))
        if (i + 1) % batch == 0:
            writer.flush()
            os.write(out_fd, f"{i + 1}\n".encode())
    writer.close()
    os.write(out_fd, b"done\n")


def valid_records() -> list[Record]:
    """One consistent record of every site (plus a summary record), for fixtures and fuzzing."""
    i32 = np.int32
    return [
        Record("batch_change", 1, 0, {
            "prev_positions": np.array([0, -1, 1], np.int64),
            "valid_sampled_token_count": np.array([1, 2], i32),
            "num_computed_tokens": np.array([5, 6, 7, 8], i32),
            "num_accepted_tokens": np.array([1, 0, 1], i32),
            "prev_num_draft_tokens": np.array([2, 2, 2, 2], i32),
            "cpu_num_computed_tokens": np.array([5, 0, 7], i32),
            "req_ids": ["a", "b", "c"], "prev_req_id_to_index": {"a": 0, "c": 1}}),
        Record("prepare_input_ids", 1, 0, {
            "prev_positions": np.array([0, -1], np.int64),
            "prev_sampled_token_ids": np.array([[5], [6]], i32),
            "input_ids": np.array([1, 2, 3, 4], i32), "cu_num_tokens": np.array([2, 4], i32),
            "num_draft_tokens": np.array([1, 1], i32), "prev_num_spec_tokens": 1,
            "draft_token_ids": np.array([[7], [8]], i32), "vocab_size": 100,
            "req_ids": ["a", "b"]}),
        Record("async_output", 1, 0, {
            "req_ids": ["a", "b"], "prev_req_ids": ["a", None],
            "sampled_token_ids_cpu": np.array([[3, -1], [4, 5]], i32),
            "output_token_ids": [[1, 2, -1], [3]], "vocab_size": 100}),
        Record("embedding", 2, 0, {
            "input_ids": np.array([1, 2, 3], i32), "num_embeddings": 100, "tp_size": 1,
            "req_ids": ["a"], "cu_num_tokens": np.array([3], i32)}),
        Record("embedding", 3, 1, {"min": 0, "max": 100, "num_embeddings": 100, "line": 7},
               summary=True),
        Record("post_update", 1, 0, {  # Model Runner V2
            "idx_mapping": np.array([1, 0], np.int64), "num_computed_tokens": np.array([4, 6], i32),
            "last_sampled_tokens": np.array([3, 4], np.int64),
            "sampled_tokens": np.array([[5, -1], [6, 7]], np.int64),
            "num_sampled": np.array([1, 2], i32), "num_rejected": np.array([1, 0], i32),
            "total_len": np.array([5, 7], i32), "all_token_ids_width": 64, "bin_counts_rows": 2,
            "bin_counts_width": 100, "vocab_size": 100, "query_start_loc": np.array([0, 2, 4], i32),
            "req_ids": ["a", "b"]}),
        Record("combine_tokens", 2, 0, {  # Model Runner V2
            "input_ids": np.array([0, 0, 0], i32), "idx_mapping": np.array([1, 0], np.int64),
            "last_sampled_tokens": np.array([7, 5], np.int64),
            "query_start_loc": np.array([0, 2, 3], i32), "seq_lens": np.array([8, 6], i32),
            "prefill_len": np.array([4, 5], i32), "draft_tokens": np.array([[9], [8]], np.int64),
            "cu_num_logits": np.array([0, 2, 3], i32), "num_new_sampled_tokens": 1,
            "vocab_size": 100, "req_ids": ["a", "b"]}),
        Record("rejection_drafts", 2, 0, {  # Model Runner V2
            "input_ids": np.array([5, 9, 8], i32), "positions": np.array([7, 8, 6], np.int64),
            "logits_indices": np.array([0, 1, 2], np.int64),
            "expanded_idx_mapping": np.array([1, 1, 0], np.int64),
            "expanded_local_pos": np.array([0, 1, 0], i32), "prefill_len": np.array([4, 5], i32),
            "vocab_size": 100, "req_ids": ["a", "b"]}),
    ]


def run_fuzz_cases(cases: list[Any], operation: Callable[[Any], Any],
                   memory: int = 4 << 30, timeout: int = 240) -> None:
    """Run ``operation(case)`` for every case in a forked child under RLIMIT_AS (current size
    plus ``memory``: 4 GiB leaves room for the thread pools and allocator arenas that a child of
    a process that imported torch sets up) and an alarm; only ForensicsError subclasses may
    escape a case. A crash, a hang or any other exception (MemoryError included) fails, naming
    the last case."""
    import signal

    from forensics.errors import ForensicsError

    def target(fd: int) -> None:
        signal.alarm(timeout)
        limit_memory(memory)
        for number, case in enumerate(cases):
            os.write(fd, f"case {number}: {case}\n".encode())
            try:
                operation(case)
            except ForensicsError:
                pass
        os.write(fd, b"all cases done\n")

    pid, fd = fork(target)
    output = read_all(fd)
    _, status = os.waitpid(pid, 0)
    assert status == 0 and output.endswith("all cases done\n"), (
        f"fuzz child ended with status {status}; last lines:\n" + "\n".join(
            output.splitlines()[-25:]))


def mutate(data: bytes, rng: Any, hot: list[int] | None = None) -> bytes:
    """One random mutation of ``data``: flipped bytes, an extreme integer written over a
    header field, a cut, an insertion, or a zeroed range; ``hot`` offsets are favoured."""
    buf = bytearray(data)
    if not buf:
        return bytes(rng.randbytes(rng.randint(1, 64)))
    def pos() -> int:
        if hot and rng.random() < 0.5:
            return min(len(buf) - 1, rng.choice(hot) + rng.randint(0, 300))
        return rng.randrange(len(buf))
    kind = rng.randrange(6)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            buf[pos()] ^= 1 << rng.randrange(8)
    elif kind == 1:
        at = pos()
        width = rng.choice([4, 8])
        value = rng.choice([0, 1, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1, 2**40])
        buf[at:at + width] = value.to_bytes(8, "little")[:width]
    elif kind == 2:
        del buf[rng.randrange(len(buf)):]
    elif kind == 3:
        at = pos()
        buf[at:at] = rng.randbytes(rng.randint(1, 32))
    elif kind == 4:
        at = pos()
        buf[at:at + rng.randint(1, 64)] = bytes(rng.randint(1, 64))
    else:
        at = pos()
        buf[at:at + 1] = bytes([rng.randrange(256)])
        chunk = bytes(buf[at:at + rng.randint(8, 200)])
        buf[rng.randrange(len(buf)):0] = chunk
    return bytes(buf)
