"""The columnar checks of decoded batches (``validate.screen_batch`` and each site's
``check_batch``) reject what the per-record ``validate_record`` rejects, with its message."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import full_record, valid_records

from forensics.errors import CaptureFormatError
from forensics.records import Record
from forensics.sites import SITES
from forensics.store.batch import _Decoded
from forensics.store.reader import load
from forensics.store.writer import CaptureWriter
from forensics.validate import screen_batch, validate_record

VALID = {r.site: r for r in valid_records() if not r.summary}
i32 = np.int32


def _set(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda f: f.update(fields)


def _drop(*names: str) -> Callable[[dict[str, Any]], None]:
    return lambda f: [f.pop(name) for name in names]


#: (site, what is wrong, edit of a valid record's fields, a word of the expected message)
BAD = [
    ("batch_change", "short per-row tensor", _set(num_accepted_tokens=np.array([1, 0], i32)),
     "num_accepted_tokens"),
    ("batch_change", "long per-row tensor",
     _set(cpu_num_computed_tokens=np.array([1, 2, 3, 4], i32)), "cpu_num_computed_tokens"),
    ("batch_change", "repeated request", _set(req_ids=["a", "a", "c"]), "repeat"),
    ("batch_change", "too few request ids", _set(req_ids=["a", "b"]), "req_ids"),
    ("batch_change", "missing field", _drop("num_computed_tokens"), "missing field"),
    ("batch_change", "2-d positions", _set(prev_positions=np.array([[0, -1, 1]], np.int64)),
     "prev_positions"),
    ("prepare_input_ids", "negative drafts", _set(num_draft_tokens=np.array([-1, 1], i32)),
     "num_draft_tokens"),
    ("prepare_input_ids", "no room for drafts", _set(cu_num_tokens=np.array([1, 4], i32)),
     "cu_num_tokens"),
    ("prepare_input_ids", "short input ids", _set(input_ids=np.array([1, 2, 3], i32)),
     "input_ids"),
    ("prepare_input_ids", "short device ids", _set(input_ids_device=np.array([1, 2, 3], i32)),
     "input_ids_device"),
    ("prepare_input_ids", "negative spec tokens", _set(prev_num_spec_tokens=-1),
     "prev_num_spec_tokens"),
    ("prepare_input_ids", "empty vocabulary", _set(vocab_size=0), "vocab_size"),
    ("prepare_input_ids", "cu longer than drafts", _set(cu_num_tokens=np.array([2, 4, 5], i32)),
     "cu_num_tokens"),
    ("prepare_input_ids", "repeated request", _set(req_ids=["a", "a"]), "repeat"),
    ("async_output", "repeated request", _set(req_ids=["a", "a"]), "repeat"),
    ("async_output", "no previous batch", _drop("prev_req_ids"), "prev_req_id_to_index"),
    ("async_output", "full lists and tails",
     _set(output_tail=[[2, -1], [3]], output_len=np.array([3, 1], i32)), "output_token_ids"),
    ("async_output", "tails without lengths", lambda f: f.update(
        output_tail=f.pop("output_token_ids")), "output_len"),
    ("async_output", "tail longer than its list", lambda f: f.update(
        output_tail=[[1], [2, 3, 4]], output_len=np.array([1, 2], i32),
        output_token_ids=None) or f.pop("output_token_ids"), "output_tail"),
    ("async_output", "empty tail of a list", lambda f: f.update(
        output_tail=[[], [2]], output_len=np.array([1, 1], i32),
        output_token_ids=None) or f.pop("output_token_ids"), "output_tail"),
    ("async_output", "lengths of another row count", lambda f: f.update(
        output_tail=[[1], [2]], output_len=np.array([1, 1, 1], i32),
        output_token_ids=None) or f.pop("output_token_ids"), "output_len"),
    ("async_output", "empty vocabulary", _set(vocab_size=0), "vocab_size"),
    ("embedding", "negative bound", _set(num_embeddings=-1), "num_embeddings"),
    ("embedding", "no tensor parallelism", _set(tp_size=0), "tp_size"),
    ("embedding", "falling token counts",
     _set(cu_num_tokens=np.array([2, 1], i32), req_ids=["a", "b"]), "cu_num_tokens"),
    ("embedding", "more tokens than ids", _set(cu_num_tokens=np.array([4], i32)),
     "cu_num_tokens"),
    ("embedding", "request ids of another row count", _set(req_ids=["a", "b"]), "req_ids"),
    ("rejection_drafts", "short per-logit tensor",
     _set(expanded_local_pos=np.array([0, 1], i32)), "expanded_local_pos"),
    ("rejection_drafts", "positions of another token count",
     _set(positions=np.array([1, 2], np.int64)), "positions"),
    ("rejection_drafts", "a request id per logits row", _set(req_ids=["a", "b", "c"]),
     "req_ids"),
    ("rejection_drafts", "repeated request", _set(req_ids=["a", "a"]), "repeat"),
    ("rejection_drafts", "negative vocabulary", _set(vocab_size=-1), "vocab_size"),
]


def _record(site: str, step: int, edit: Callable[[dict[str, Any]], Any] | None = None) -> Record:
    record = copy.deepcopy(VALID[site])
    record.step = step
    if edit is not None:
        edit(record.fields)
    return record


def _write(path: Path, records: list[Record]) -> Path:
    """A capture of ``records`` written on the trusted path (no check on the way in)."""
    with CaptureWriter(path, {"notes": "screen"}, process="s") as writer:
        for record in records:
            writer.append(copy.deepcopy(record), validated=True)
    return path


@pytest.mark.parametrize(("site", "what", "edit", "word"), BAD, ids=[b[1] for b in BAD])
def test_a_bad_record_in_a_batch_fails_as_it_does_row_by_row(
        tmp_path: Path, site: str, what: str, edit: Callable[[dict[str, Any]], Any],
        word: str) -> None:
    bad = _record(site, 3, edit)
    with pytest.raises(CaptureFormatError, match=word):  # the per-record path, in memory
        validate_record(copy.deepcopy(bad), "in memory")
    records = [_record(site, 1), _record(site, 2), bad, _record(site, 4)]
    path = _write(tmp_path / "bad.capture", records)
    with pytest.raises(CaptureFormatError) as bulk:
        list(load(path))  # the batch decoded in one go: columnar checks
    with pytest.raises(CaptureFormatError) as single:
        load(path).records()[2]  # the same record decoded alone: validate_record
    assert str(bulk.value) == str(single.value)
    message = str(bulk.value)
    for part in ("bad.capture", "batch 0, row 2", f"site {site!r}", word):
        assert part in message, (part, message)


@pytest.mark.parametrize("site", SITES)
def test_good_batches_decode_as_row_by_row(tmp_path: Path, site: str) -> None:
    path = _write(tmp_path / "good.capture", [_record(site, s) for s in range(5)])
    bulk, records = list(load(path)), load(path).records()
    assert len(bulk) == 5
    for i, record in enumerate(bulk):
        single = records[i]
        assert sorted(record.fields) == sorted(single.fields)
        for name, value in record.fields.items():
            assert np.array_equal(np.asarray(value, dtype=object),
                                  np.asarray(single.fields[name], dtype=object)), name


def _screen_misses(path: Path) -> list[str]:
    """Rows that ``validate_record`` rejects but the screen of their batch lets through."""
    missed = []
    for view in load(path).batches():
        if not view._bulk_ok():
            continue
        decoded = {name: view._bulk(name, kind, 0, len(view))
                   for name, (kind, _dtype) in view.columns.items()}
        flagged = screen_batch(view.site, _Decoded(view, 0, len(view), decoded))
        for row in range(len(view)):
            try:
                view.record(row)
            except CaptureFormatError as exc:
                if not flagged[row]:
                    missed.append(str(exc))
    return missed


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(site=st.sampled_from(SITES), data=st.data())
def test_the_screen_flags_every_record_validate_record_rejects(tmp_path_factory: Any,
                                                               site: str,
                                                               data: st.DataObject) -> None:
    """Random schema-valid records mostly break their site's rules; mixed with valid ones and
    the known bad ones, no rejected record may pass the screen unflagged."""
    records = data.draw(st.lists(full_record(site), min_size=1, max_size=6,
                                 unique_by=lambda r: (r.step, r.rank)))
    records += [_record(site, 60 + i, edit) for i, (s, _, edit, _) in enumerate(BAD)
                if s == site and data.draw(st.booleans())]
    records.append(_record(site, 99))
    path = _write(tmp_path_factory.mktemp("screen") / "r.capture", records)
    assert _screen_misses(path) == []
