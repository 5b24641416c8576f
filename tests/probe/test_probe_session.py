"""The ring of records, flushing, the probe's own errors, and guard checks (no vLLM needed)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from probe_fakes import (
    FakeEvent,
    FakeWriter,
    batch_args,
    fake_device_copier,
    make_settings,
    plain_batch_change,
)

from forensics.errors import IndexBoundsError
from forensics.probe import guard, hooks
from forensics.probe.session import ProbeSession, ThreadBackend
from forensics.sites import async_output, batch_change, prepare_input_ids


@pytest.fixture
def active(tmp_path: Path, fake_writer: FakeWriter):
    """A record-mode session on the fake writer, flushing every 4 records."""
    def start(copier=None, **overrides):
        settings = make_settings(tmp_path, ring=overrides.pop("ring", 8),
                                 flush_every=overrides.pop("flush_every", 4), **overrides)
        session = ProbeSession(settings, writer_factory=lambda s: fake_writer, copier=copier)
        hooks.activate(session)
        return session
    yield start
    hooks.activate(None)


def test_wrapper_records_inputs_and_changes(active, fake_writer: FakeWriter) -> None:
    session = active()
    wrapped = hooks.wrap_batch_change(plain_batch_change)
    args = batch_args([1, -1, 0])
    before = [a.clone() for a in args]
    session.begin_step()
    wrapped(*args)
    session.flush()
    (record,) = fake_writer.flushed
    assert record.site == "batch_change" and record.step == 0 and record.rank == 0
    np.testing.assert_array_equal(record["num_computed_tokens"], before[0].numpy())
    np.testing.assert_array_equal(record["num_computed_tokens_after"], args[0].numpy())
    np.testing.assert_array_equal(record["num_accepted_tokens_after"], [2, 1, 2])
    assert record["prev_positions"].dtype == np.int64


def test_flush_every_n_and_ring_overflow(active, fake_writer: FakeWriter) -> None:
    session = active(ring=4, flush_every=4)
    wrapped = hooks.wrap_batch_change(plain_batch_change)
    for _ in range(9):
        session.begin_step()
        wrapped(*batch_args([0]))
    assert session.drain(timeout=30)  # the writer thread flushed at 4 and 8
    assert [r.step for r in fake_writer.flushed] == list(range(8))
    session.close()
    assert [r.step for r in fake_writer.flushed] == list(range(9))
    assert fake_writer.closed and fake_writer.events[-1]["kind"] == "probe_stop"


def test_record_mode_never_synchronises(active, fake_writer: FakeWriter,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_sync(*args, **kwargs):
        raise AssertionError("torch.cuda.synchronize() on the recording path")

    monkeypatch.setattr(torch.cuda, "synchronize", no_sync)
    FakeEvent.done, FakeEvent.recorded = False, 0
    session = active(ring=64, flush_every=2, copier=fake_device_copier())
    wrapped = hooks.wrap_batch_change(plain_batch_change)
    for _ in range(6):
        session.begin_step()
        wrapped(*batch_args([0, 1]))
    assert FakeEvent.recorded == 6 and fake_writer.flushed == []  # copies still "in flight"
    FakeEvent.done = True
    session.begin_step()
    wrapped(*batch_args([0, 1]))
    session.flush()
    assert [r.step for r in fake_writer.flushed] == list(range(7))
    assert fake_writer.flushed[0]["num_accepted_tokens_after"].tolist() == [2, 2]


def test_full_disk_is_an_event_not_an_error(tmp_path: Path, active) -> None:
    writer = FakeWriter(fail_flush=1)
    session = ProbeSession(make_settings(tmp_path, ring=8, flush_every=1),
                           writer_factory=lambda s: writer)
    hooks.activate(session)
    wrapped = hooks.wrap_batch_change(plain_batch_change)
    args = batch_args([0])
    wrapped(*args)  # its flush hits ENOSPC: the call still completes
    assert args[1].tolist() == [2]
    assert session.drain(timeout=30)
    wrapped(*batch_args([0]))
    assert session.drain(timeout=30)
    errors = [e for e in writer.events if e["kind"] == "probe_error"]
    assert len(errors) == 1 and "No space left" in errors[0]["error"]
    assert session.counts["errors"] == 1 and session.counts["dropped"] == 1
    assert len(writer.flushed) == 1


def test_unopenable_capture_never_raises(tmp_path: Path, active) -> None:
    def broken(session):
        raise PermissionError(13, "Permission denied", str(tmp_path))

    session = ProbeSession(make_settings(tmp_path, ring=8, flush_every=1),
                           writer_factory=broken)
    hooks.activate(session)
    args = batch_args([0])
    hooks.wrap_batch_change(plain_batch_change)(*args)
    session.close()
    assert args[1].tolist() == [2] and session.counts["errors"] >= 1


def test_exception_in_wrapped_call_flushes_its_inputs(active, fake_writer: FakeWriter) -> None:
    session = active(ring=8, flush_every=8)
    wrapped = hooks.wrap_batch_change(plain_batch_change)
    wrapped(*batch_args([0]))
    with pytest.raises(IndexError):
        wrapped(*batch_args([5], valid_rows=2))
    assert len(fake_writer.flushed) == 2
    assert "num_computed_tokens_after" not in fake_writer.flushed[1]
    assert session.counts["records"] == 2


def test_guard_raises_before_the_index_error(active, fake_writer: FakeWriter) -> None:
    active(mode="guard")
    wrapped = hooks.wrap_batch_change(plain_batch_change)
    wrapped(*batch_args([0]))
    args = batch_args([0, 3], valid_rows=3)
    before = args[0].clone()
    with pytest.raises(IndexBoundsError) as info:
        wrapped(*args)
    error = info.value
    assert (error.site, error.row, error.value, error.bound) == ("batch_change", 1, 3, 3)
    assert "t-1.capture" in str(error) and "rank 0" in str(error)
    assert torch.equal(args[0], before)  # the kernel never ran
    assert len(fake_writer.flushed) == 2
    assert any(e["kind"] == "guard_violation" for e in fake_writer.events)


def test_guard_checks() -> None:
    lengths = dict.fromkeys(batch_change.GATHERED, 2)
    assert batch_change.guard(np.array([-1, -1]), {**lengths,
                                                   "valid_sampled_token_count": 0}).row == 0
    assert batch_change.guard(np.array([-1, 1]), lengths) is None
    # the hook passes every recorded tensor's length: those not gathered are not checked
    assert batch_change.guard(np.array([-1, 1]), {**lengths, "num_accepted_tokens": 0}) is None
    found = prepare_input_ids.guard(np.array([0, 2]), np.array([2, 4]), np.array([1, 1]),
                                          prev_rows=2, prev_num_spec_tokens=1, draft_numel=2)
    assert (found.row, found.tensor, found.value, found.upper) == (1, "prev_sampled_token_ids",
                                                                   2, 2)
    found = prepare_input_ids.guard(np.array([1, 0]), np.array([2, 4]), np.array([1, 1]),
                                          prev_rows=2, prev_num_spec_tokens=1, draft_numel=1)
    assert (found.row, found.tensor, found.value) == (0, "draft_token_ids", 1)
    assert prepare_input_ids.guard(np.array([0, 1]), np.array([1, 2]), np.array([0, 0]),
                                         prev_rows=2, prev_num_spec_tokens=0,
                                         draft_numel=0) is None
    found = async_output.guard(["a", "b"], {"a": 0, "b": 1}, [[5, -1], [6, -1, -1]],
                                     [[7], [100, 3]], vocab_size=100)
    assert (found.row, found.value, found.upper) == (1, 100, 100)
    found = async_output.guard(["a"], {"a": 2}, [[5, -1]], [[7], [8]], vocab_size=100)
    assert (found.tensor, found.value, found.upper) == ("sampled_token_ids_cpu", 2, 2)
    assert async_output.guard(["a"], {"a": 0}, [[5, -1]], [[7, -1]], 100) is None
    found = guard.check_ids("embedding", "input_ids", np.array([1, 2, -1]), 10, np.array([2, 3]))
    assert (found.row, found.tensor, found.value) == (1, "input_ids[2]", -1)


def test_a_late_writer_thread_keeps_the_flush_every_count(
        active, fake_writer: FakeWriter, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer thread wakes after records 5 and 6 were queued: the next batch is still
    due at record 8 (CI once saw it slip to 10 when the thread reset the count)."""
    gate = threading.Event()
    real_loop = ThreadBackend._writer_loop

    def late_loop(self: ThreadBackend) -> None:
        gate.wait(30)
        real_loop(self)

    monkeypatch.setattr(ThreadBackend, "_writer_loop", late_loop)
    session = active(ring=64, flush_every=4)
    wrapped = hooks.wrap_batch_change(plain_batch_change)

    def steps(n: int) -> None:
        for _ in range(n):
            session.begin_step()
            wrapped(*batch_args([0]))

    steps(6)  # due at 4; the thread waits at the gate
    gate.set()
    assert session.drain(timeout=30)
    assert [r.step for r in fake_writer.flushed] == list(range(4))
    steps(2)
    assert session.drain(timeout=30)
    assert [r.step for r in fake_writer.flushed] == list(range(8))


def test_close_returns_once_the_writer_thread_ended(
        active, fake_writer: FakeWriter, monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon writer thread still running as the interpreter exits can abort the process
    (``terminate called without an active exception``): ``close()`` waits for it, here a
    thread that lingers 0.2 s after its loop."""
    real_loop = ThreadBackend._writer_loop

    def lingering_loop(self: ThreadBackend) -> None:
        real_loop(self)
        time.sleep(0.2)

    monkeypatch.setattr(ThreadBackend, "_writer_loop", lingering_loop)
    session = active(ring=8, flush_every=4)
    wrapped = hooks.wrap_batch_change(plain_batch_change)
    for _ in range(4):
        session.begin_step()
        wrapped(*batch_args([0]))
    assert session.drain(timeout=30)
    assert isinstance(session.backend, ThreadBackend)
    thread = session.backend.thread
    assert thread is not None and thread.is_alive()
    session.close()
    assert not thread.is_alive()
    assert len(fake_writer.flushed) == 4


def test_a_bad_record_in_a_flush_is_dropped_with_an_event(tmp_path: Path) -> None:
    """A record failing its site's cross-field check (with the value signature of the good
    records around it, so the cached schema checks pass) is dropped and kept as an event;
    the other records of the same flush reach the capture. Its values are plain fields, so
    its site's records take the per-record path (test_probe_columns: the column-wise one)."""
    from forensics.store.reader import load
    from forensics.store.writer import CaptureWriter

    path = tmp_path / "bad.capture"
    session = ProbeSession(make_settings(tmp_path, capture=path, ring=64, flush_every=64),
                           writer_factory=lambda s: CaptureWriter(path, process="t"))
    hooks.activate(session)
    wrapped = hooks.wrap_batch_change(plain_batch_change)
    try:
        for step in range(5):
            session.begin_step()
            wrapped(*batch_args([0, -1]))
            if step == 2:
                bad = session.new_record("batch_change")
                bad.fields.update(session._ring[-1].to_record().fields)  # per record
                bad.fields["num_accepted_tokens"] = np.ones(3, np.int32)  # 3 rows, not 2
                session.add(bad)
    finally:
        hooks.activate(None)
        session.close()
    capture = load(path)
    assert [r.step for r in capture.records()] == [0, 1, 2, 3, 4]
    assert session.counts["written"] == 5 and session.counts["dropped"] == 1
    (error,) = [e for e in capture.events if e["kind"] == "probe_error"]
    assert "appending a batch_change record (step 2)" in error["where"]
    assert "num_accepted_tokens" in error["error"]


def test_take_all_copies_like_take() -> None:
    """Host tensors (with or without a grad), as the default Copier and a faked device one."""
    from forensics.probe.copy import Copier, Deferred

    tensors = (torch.arange(4, dtype=torch.int32), torch.ones(2, 3, dtype=torch.int64),
               torch.zeros(3, requires_grad=True), torch.arange(6)[::2])
    copies = Copier().take_all(tensors)
    for tensor, copy in zip(tensors, copies, strict=True):
        assert isinstance(copy, np.ndarray) and copy.dtype == tensor.detach().numpy().dtype
        np.testing.assert_array_equal(copy, tensor.detach().numpy())
    tensors[0].add_(10)  # a copy, not a view
    assert copies[0].tolist() == [0, 1, 2, 3]
    deferred = fake_device_copier().take_all(tensors[:2])
    assert [type(d) for d in deferred] == [Deferred, Deferred]
    np.testing.assert_array_equal(deferred[1].value(), np.ones((2, 3)))


def test_rank_reads_rank_once_until_torch_distributed_is_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.probe import rank as rank_module

    monkeypatch.setenv("RANK", "3")
    session = ProbeSession(make_settings(tmp_path))
    session.begin_step()
    assert session.rank == 3
    monkeypatch.setenv("RANK", "5")  # the provisional rank is read once per session
    session.begin_step()
    assert session.rank == 3
    monkeypatch.setattr(rank_module, "distributed_rank", lambda: 1)
    assert session.rank == 3  # asked once per step
    session.begin_step()
    assert session.rank == 1
    monkeypatch.setattr(rank_module, "distributed_rank", lambda: None)
    session.begin_step()
    assert session.rank == 1  # final once torch.distributed gave it


def test_plain_items_vouch_only_for_what_the_store_keeps_as_is() -> None:
    from forensics.probe.writing import _plain_items

    assert _plain_items("ragged", [[5, -1], [], [2**63 - 1]])
    assert not _plain_items("ragged", [[5, np.int64(-1)]])  # a numpy integer: checked path
    assert not _plain_items("ragged", [[2**63]])  # past int64
    assert not _plain_items("ragged", [(5, -1)])  # a tuple, not a list
    assert _plain_items("index_map", {"a": 0, "b": 3})
    assert not _plain_items("index_map", {"a": 0.0})
    assert not _plain_items("index_map", {1: 0})
    assert _plain_items("opt_str_list", ["a", None])
    assert not _plain_items("str_list", ["a", None])
    assert not _plain_items("str_list", ["\ud800"])  # a lone surrogate
