"""The probe's column-wise write path (forensics.probe.columns) against the per-record one."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from probe_fakes import (
    FakeEvent,
    add_bad_batch_change,
    batch_args,
    fake_device_copier,
    make_settings,
    plain_batch_change,
    record_batch_changes,
    segment_bytes,
)

import forensics
from forensics.probe import columns, hooks
from forensics.probe.copy import Copier, PendingRecord
from forensics.probe.session import ProbeSession
from forensics.probe.writing import BatchWriter
from forensics.records import Record
from forensics.screening import ScreenUnsure
from forensics.sites import SITES
from forensics.store.writer import CaptureWriter
from forensics.validate import validate_record, value_signature


def record_calls(tmp_path: Path, path: Path, calls: list[list[int]], copier: Copier | None = None,
                 ring: int = 256) -> ProbeSession:
    """A session writing to ``path`` (process ``t``) with one batch_change call per item of
    ``calls`` (its prev_positions) queued and not yet flushed."""
    session = ProbeSession(make_settings(tmp_path, capture=path, ring=ring, flush_every=ring),
                           writer_factory=lambda s: CaptureWriter(path, process="t"),
                           copier=copier)
    record_batch_changes(session, calls)
    return session


CALLS = [[0], [1, -1, 0], [-1, -1], [3, 2, 1, 0], [0, 1]]
ALIKE = [[0, 1], [1, -1], [-1, -1], [2, 0]]  # every record of the same sizes


@pytest.mark.parametrize("calls", [CALLS, ALIKE], ids=["sizes-differ", "sizes-alike"])
def test_column_wise_batches_are_byte_identical_to_per_record_ones(
        tmp_path: Path, calls: list[list[int]]) -> None:
    session = record_calls(tmp_path, tmp_path / "cols.capture", calls)
    records = [pending.to_record() for pending in session._ring]
    blocks, others = columns.runs(list(session._ring))
    assert len(blocks) == 1 and blocks[0].rows == len(calls) and others == []
    session.close()
    assert session.counts["written"] == len(calls) and session.counts["dropped"] == 0
    with CaptureWriter(tmp_path / "rows.capture", process="t") as writer:
        for record in records:
            writer.append(record, validated=True)
    ours, theirs = segment_bytes(tmp_path / "cols.capture"), segment_bytes(
        tmp_path / "rows.capture")
    assert ours and ours == theirs
    loaded = list(forensics.load(tmp_path / "cols.capture"))
    assert [r["prev_positions"].tolist() for r in loaded] == calls
    assert [r["num_accepted_tokens_after"].tolist() for r in loaded] == [
        [2 if p >= 0 else 1 for p in prev] for prev in calls]
    assert loaded[0]["prev_positions"].dtype == np.int64
    assert loaded[0]["num_computed_tokens"].dtype == np.int32


def test_a_record_failing_the_columnar_screen_is_dropped_with_an_event(tmp_path: Path) -> None:
    """A joined record whose num_accepted_tokens has 3 rows for 2 prev_positions: the
    site's columnar rule flags it, validate_record names the field; the rest is written."""
    path = tmp_path / "bad.capture"
    session = record_calls(tmp_path, path, [[0, -1]] * 3)
    add_bad_batch_change(session)
    session.close()
    capture = forensics.load(path)
    assert [r.step for r in capture.records()] == [0, 1, 2]
    assert session.counts["written"] == 3 and session.counts["dropped"] == 1
    (error,) = [e for e in capture.events if e["kind"] == "probe_error"]
    assert "appending a batch_change record (step 2)" in error["where"]
    assert "num_accepted_tokens" in error["error"]


def test_a_call_that_raised_and_a_two_dimensional_tensor_still_reach_the_capture(
        tmp_path: Path) -> None:
    """Records without outputs form their own block; a 2-D tensor sends its site's records
    through the per-record path, in call order."""
    path = tmp_path / "mixed.capture"
    session = record_calls(tmp_path, path, [[0], [1]])
    wrapped = hooks.wrap_batch_change(plain_batch_change)
    hooks.activate(session)
    try:
        with pytest.raises(IndexError):
            wrapped(*batch_args([5], valid_rows=2))  # flushes at once, without outputs
    finally:
        hooks.activate(None)
    assert session.counts["written"] == 3
    odd = session.new_record("batch_change")
    tensors = [t.clone() for t in batch_args([0, 1])]
    tensors[2] = tensors[2].reshape(2, 1)  # prev_positions [2, 1]: not the schema's rank
    odd.joined.append((hooks._BATCH_CHANGE_INPUTS, session.copier.join(
        (tensors[2], tensors[3], tensors[0], tensors[4], tensors[1], tensors[5]))))
    session.add(odd)
    with pytest.raises(columns.NotColumnar):
        columns.Block("batch_change", 0, [odd])
    session.close()
    capture = forensics.load(path)
    loaded = {r["prev_positions"].tolist()[0]: r for r in capture.records()}
    assert sorted(loaded) == [0, 1, 5] and loaded[5].step == 1
    assert "num_computed_tokens_after" not in loaded[5]
    assert loaded[1]["num_accepted_tokens_after"].tolist() == [2]
    assert session.counts["dropped"] == 1  # the 2-D record fails validate_record


def test_device_copies_are_written_column_wise_once_their_event_completed(
        tmp_path: Path) -> None:
    FakeEvent.done, FakeEvent.recorded = False, 0
    path = tmp_path / "dev.capture"
    session = record_calls(tmp_path, path, CALLS, copier=fake_device_copier())
    assert FakeEvent.recorded == len(CALLS)  # one event per call
    assert session.flush() == 0  # copies "in flight": nothing written, nothing waited for
    FakeEvent.done = True
    assert session.flush() == len(CALLS)
    session.close()
    loaded = list(forensics.load(path))
    assert [r["prev_positions"].tolist() for r in loaded] == CALLS


def test_join_keeps_dtypes_shapes_and_values() -> None:
    tensors = (torch.arange(5, dtype=torch.int64), torch.arange(6)[::2].to(torch.int64),
               torch.tensor([[1, 2], [3, 4]], dtype=torch.int32),
               torch.tensor([7, 8], dtype=torch.uint8), torch.zeros(0, dtype=torch.int16))
    joined = Copier().join(tensors)
    assert joined.data is not None and joined.plan is not None
    assert joined.plan.carrier == torch.uint8
    for tensor, array in zip(tensors, joined.arrays(), strict=True):
        assert array.dtype == tensor.numpy().dtype and array.shape == tuple(tensor.shape)
        np.testing.assert_array_equal(array, tensor.numpy())
    tensors[0].add_(10)  # a copy, not a view
    assert joined.arrays()[0].tolist() == [0, 1, 2, 3, 4]
    floats = Copier().join((torch.ones(2), torch.arange(2)))  # not integers: one by one
    assert floats.data is None and [a.tolist() for a in floats.arrays()] == [[1.0, 1.0], [0, 1]]


_I32, _I64 = torch.int32, torch.int64
#: tensors that ``torch.cat`` joins as they are (several dimensions, strided, a legacy empty
#: 1-D beside 2-D) and tensors it refuses (no dimension, dimensions that differ)
JOIN_CASES = {
    "2-D, the int64 one viewed": (torch.arange(6, dtype=_I64).reshape(3, 2),
                                  torch.arange(8, dtype=_I32).reshape(2, 4)),
    "2-D transposed": (torch.arange(6, dtype=_I32).reshape(2, 3).t(),
                       torch.arange(4, dtype=_I32).reshape(2, 2)),
    "empty 1-D beside 2-D": (torch.zeros(0, dtype=_I32), torch.ones(2, 3, dtype=_I32)),
    "0-D": (torch.tensor(5, dtype=_I64), torch.tensor([1, 2], dtype=_I64)),
    "1-D beside transposed 2-D": (torch.arange(6, dtype=_I32).reshape(2, 3).t(),
                                  torch.arange(3, dtype=_I32)),
}


@pytest.mark.parametrize("tensors", list(JOIN_CASES.values()), ids=list(JOIN_CASES))
def test_join_gives_each_tensor_back_whatever_its_dimensions(
        tensors: tuple[torch.Tensor, ...]) -> None:
    joined = Copier().join(tensors)
    assert joined.data is not None  # joined, not copied one by one
    for tensor, array in zip(tensors, joined.arrays(), strict=True):
        assert array.dtype == tensor.numpy().dtype and array.shape == tuple(tensor.shape)
        np.testing.assert_array_equal(array, tensor.numpy())


def test_joined_flat_tells_one_dimensional_tensors_and_sends_the_others_per_record(
        tmp_path: Path) -> None:
    """``Joined.flat`` (what the writer trusts instead of checking each shape's rank): true for
    one-dimensional tensors, joined as they are or flattened (a strided int64 cannot be
    viewed as int32 pairs); false whenever some tensor has another rank."""
    strided = torch.arange(12, dtype=_I64)[::3]
    assert Copier().join((torch.arange(3, dtype=_I32), torch.zeros(0, dtype=_I32))).flat
    assert Copier().join((strided, torch.arange(2, dtype=_I32))).flat
    for name, tensors in JOIN_CASES.items():
        assert not Copier().join(tensors).flat, name
    session = record_calls(tmp_path, tmp_path / "s.capture", [[0, 1]])
    args = list(batch_args([0, 1]))
    args[2] = torch.tensor([0, 9, 1, 9], dtype=_I64)[::2]  # prev_positions, strided
    odd = session.new_record("batch_change")
    odd.joined.append((hooks._BATCH_CHANGE_INPUTS, session.copier.join(
        (args[2], args[3], args[0], args[4], args[1], args[5]))))
    odd.joined.append((hooks._BATCH_CHANGE_OUTPUTS, session.copier.join((args[0], args[1]))))
    session.add(odd)
    blocks, others = columns.runs(list(session._ring))
    assert [b.rows for b in blocks] == [2] and others == []
    assert blocks[0].fields["prev_positions"][0].tolist() == [0, 1, 0, 1]
    session.close()


def context_runner(req_ids: list[str], prev: dict[str, object]) -> SimpleNamespace:
    """What the batch_change wrapper reads of a GPUModelRunner: the request ids and the
    previous batch's rows."""
    return SimpleNamespace(input_batch=SimpleNamespace(req_ids=req_ids,
                                                       prev_req_id_to_index=prev))


def record_with_context(tmp_path: Path, path: Path, runners: list[SimpleNamespace]
                        ) -> ProbeSession:
    session = ProbeSession(make_settings(tmp_path, capture=path, ring=64, flush_every=64),
                           writer_factory=lambda s: CaptureWriter(path, process="t"))
    wrapped = hooks.wrap_batch_change(plain_batch_change)
    hooks.activate(session)
    try:
        for runner in runners:
            session.begin_step(runner)
            wrapped(*batch_args([1, -1]))
    finally:
        hooks.activate(None)
    return session


def test_request_ids_take_the_trusted_path_and_write_what_the_checked_one_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.store import writer as store_writer

    trusted: list[bool] = []
    real_append = store_writer.CaptureWriter.append

    def append(self, record, *, validated=False):
        trusted.append(validated)
        return real_append(self, record, validated=validated)

    monkeypatch.setattr(store_writer.CaptureWriter, "append", append)
    runners = [context_runner(["a", "b"], {"x": 0, "a": 1}),
               context_runner(["b", "c"], {"a": 0, "b": 1})]
    session = record_with_context(tmp_path, tmp_path / "ctx.capture", runners)
    records = [pending.to_record() for pending in session._ring]
    session.close()
    assert trusted == [True, True] and session.counts["written"] == 2
    with CaptureWriter(tmp_path / "checked.capture", process="t") as writer:
        for record in records:
            real_append(writer, record)  # the writer's full checks
    ours = segment_bytes(tmp_path / "ctx.capture")
    assert ours and ours == segment_bytes(tmp_path / "checked.capture")
    loaded = list(forensics.load(tmp_path / "ctx.capture"))
    assert loaded[1]["req_ids"] == ["b", "c"]
    assert loaded[1]["prev_req_id_to_index"] == {"a": 0, "b": 1}


def test_values_the_trusted_path_cannot_vouch_for_get_the_checked_append(
        tmp_path: Path) -> None:
    """A numpy integer in the previous batch is normalised by the checked path; a request id
    with a lone surrogate cannot be stored: that record is dropped with an event."""
    runners = [context_runner(["a", "b"], {"a": np.int64(0)}),
               context_runner(["a", "b\ud800"], {"a": 0}),
               context_runner(["a", "b"], {"a": 1})]
    path = tmp_path / "odd.capture"
    session = record_with_context(tmp_path, path, runners)
    session.close()
    capture = forensics.load(path)
    loaded = list(capture.records())
    assert [r.step for r in loaded] == [0, 2]
    assert loaded[0]["prev_req_id_to_index"] == {"a": 0}
    assert session.counts["dropped"] == 1
    (error,) = [e for e in capture.events if e["kind"] == "probe_error"]
    assert "step 1" in error["where"] and "req_ids" in error["error"]


class ListWriter:
    """Keeps what the session appends: (record, validated)."""

    def __init__(self) -> None:
        self.appended: list[tuple[Record, bool]] = []

    def append(self, record: Record, *, validated: bool = False) -> None:
        self.appended.append((record, validated))


def truncated(record: Record) -> list[Record]:
    """``record`` and, per tensor field, a copy with that tensor one value short (most break a
    cross-field rule, some do not)."""
    out = [record]
    for name, value in record.fields.items():
        if isinstance(value, np.ndarray) and value.ndim == 1 and value.size:
            out.append(Record(record.site, record.step, record.rank,
                              {**record.fields, name: value[:-1].copy()}))
    return out


def test_screened_appends_take_exactly_the_records_validate_record_passes(
        tmp_path: Path) -> None:
    simulated = forensics.simulate("soak", steps=12, batch=5, spec_tokens=2)
    v2 = forensics.simulate("v2-vocab-sample", steps=12)  # Model Runner V2's sites
    assert isinstance(simulated, list) and isinstance(v2, list)
    simulated += v2
    records = [variant for record in simulated for variant in truncated(record)]
    expected = []
    for record in records:
        try:
            validate_record(record, "test", typed=True)
            expected.append(True)
        except Exception:
            expected.append(False)
    assert any(expected) and not all(expected)  # both kinds are exercised
    passed = columns.unflagged([(r, value_signature(r)) for r in records])
    assert passed and all(expected[i] for i in passed)  # the screen vouches only for good ones
    plain = columns.unflagged([(r, value_signature(r)) for r in simulated])
    assert plain == set(range(len(simulated)))  # every site's screen passes good records
    assert {r.site for r in simulated} == set(SITES)
    session = ProbeSession(make_settings(tmp_path), writer_factory=lambda s: ListWriter())
    writer = ListWriter()
    pendings = [PendingRecord(r.site, r.step, r.rank, dict(r.fields)) for r in records]
    written = BatchWriter(writer, session.error, session._count)._append(pendings)
    assert written == sum(expected) == len(writer.appended)
    assert session.counts["dropped"] == len(records) - sum(expected)
    kept = iter(writer.appended)
    for record, ok in zip(records, expected, strict=True):
        if ok:  # in order, the same values, on the trusted path
            appended, validated = next(kept)
            assert validated and appended.site == record.site and appended.step == record.step
            assert appended.fields.keys() == record.fields.keys()


def test_record_columns_read_what_the_records_hold() -> None:
    records = [Record("async_output", 0, 0, {"req_ids": ["a", "b"], "output_tail": [[1], [2, 3]],
                                             "output_len": np.array([4, 5]), "vocab_size": 9}),
               Record("async_output", 1, 0, {"req_ids": ["c"], "output_tail": [[]],
                                             "output_len": np.array([1], np.uint8),
                                             "vocab_size": 7})]
    cols = columns.RecordColumns(records)
    assert cols.present("req_ids").tolist() == [True, True]
    assert cols.present("nope").tolist() == [False, False]
    assert cols.length("req_ids").tolist() == [2, 1] and cols.length("nope").tolist() == [0, 0]
    assert cols.ndim("output_len").tolist() == [1, 1]
    assert cols.ints("vocab_size").tolist() == [9, 7]
    values, counts = cols.flat("output_len")
    assert values.tolist() == [4, 5, 1] and counts.tolist() == [2, 1]
    inner, outer = cols.inner_lengths("output_tail")
    assert inner.tolist() == [1, 2, 0] and outer.tolist() == [2, 1]
    assert cols.values("req_ids") == [["a", "b"], ["c"]]
    huge = columns.RecordColumns([Record("async_output", 0, 0, {"vocab_size": 2**64})])
    with pytest.raises(ScreenUnsure):
        huge.ints("vocab_size")
