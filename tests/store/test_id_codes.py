"""Request-id codes, the uniqueness screen and the string-list validation, each held to its
plain per-record form.

``id_codes.str_codes`` codes a run of rows of a batch's id lists; a follower column
(``prev_req_ids``) takes the codes of the base's previous row where it repeats it byte for
byte. Whatever the rows, the codes must be those of a dictionary over the Python strings:
equal strings, equal codes, across the columns, a null item -1, null rows dropped.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.sites._common import repeats
from forensics.store import arrow_numpy as an
from forensics.store import id_codes
from forensics.store.id_codes import StrLists

Rows = list[list[str | None] | None]
#: short ids, ids of one and of several words of 8 bytes, an empty one, a non-ASCII one
IDS = ["a", "req-7", "req-12345", "req-123456789012345", "", "é-1",
       "chatcmpl-0123456789abcdef0123456789abcdef-0", "chatcmpl-0123456789abcdef0123456789abcdef-1"]


def lists_array(rows: Rows) -> pa.Array:
    """A ``list<string>`` array of ``rows`` (None: a null row or item)."""
    return pa.array(rows, type=pa.list_(pa.string()))


def per_record(columns: dict[str, Rows], start: int, stop: int
               ) -> dict[str, tuple[list[int], list[int]]]:
    """The plain form: every string numbered by first appearance (None -1), column after
    column, null rows holding no item."""
    seen: dict[str, int] = {}
    out = {}
    for name, rows in columns.items():
        kept = [row or [] for row in rows[start:stop]]
        codes = [-1 if s is None else seen.setdefault(s, len(seen)) for row in kept for s in row]
        out[name] = codes, [len(row) for row in kept]
    return out


def canonical(codes: list[int]) -> list[int]:
    """Codes renumbered by first appearance (-1 kept)."""
    seen: dict[int, int] = {}
    return [-1 if c < 0 else seen.setdefault(c, len(seen)) for c in codes]


def assert_coded_alike(columns: dict[str, Rows], start: int, stop: int,
                       arrays: dict[str, pa.Array] | None = None) -> None:
    arrays = arrays or {name: lists_array(rows) for name, rows in columns.items()}
    got = id_codes.str_codes({name: StrLists.of(a) for name, a in arrays.items()}, start, stop)
    want = per_record(columns, start, stop)
    assert list(got) == list(want)
    every_got = [c for name in got for c in got[name][0].tolist()]
    every_want = [c for name in want for c in want[name][0]]
    assert canonical(every_got) == canonical(every_want)  # equal strings, equal codes
    for name in want:
        assert got[name][1].tolist() == want[name][1], name
        assert got[name][0].dtype == np.int64


def following(req: list[list[str]], prev_first: list[str] | None = None) -> Rows:
    """``prev_req_ids`` rows that repeat the previous row of ``req``."""
    return [prev_first or [], *req[:-1]]


REQ: list[list[str]] = [["req-1", "req-2"], ["req-1", "req-2"], ["req-2", "req-12345"],
                        ["req-12345", "req-2", "a"], [], ["chatcmpl-x", "req-2"]]


@pytest.mark.parametrize("start,stop", [(0, 6), (1, 6), (2, 5), (5, 6), (3, 3)])
def test_repeated_rows_take_the_codes_of_the_rows_they_repeat(start: int, stop: int) -> None:
    assert_coded_alike({"req_ids": REQ, "prev_req_ids": following(REQ, ["zz"])}, start, stop)


def test_items_that_move_between_rows_are_not_repeats() -> None:
    req = [["a"], ["b", "c"], ["d"], ["e"]]
    assert_coded_alike({"req_ids": req, "prev_req_ids": [[], ["a", "b"], ["c"], ["d"]]}, 0, 4)


def test_a_row_holding_the_items_of_the_next_base_rows_is_not_a_repeat() -> None:
    """Row 1 repeats row 0's ``a`` and then the ``b`` of row 2, past the run coded."""
    columns: dict[str, Rows] = {"req_ids": [["a"], [], ["b"]],
                                "prev_req_ids": [[], ["a", "b"], []]}
    assert_coded_alike(columns, 0, 2)


def test_long_ids_that_differ_in_their_last_byte_are_not_repeats() -> None:
    req = [[IDS[6], "a"], [IDS[6], "a"], ["b"]]
    assert_coded_alike({"req_ids": req, "prev_req_ids": [[], [IDS[7], "a"], [IDS[6], "a"]]},
                       0, 3)


@pytest.mark.parametrize("changed", [
    ["req-2", "req-12346"],         # one byte differs (REQ[2] is ["req-2", "req-12345"])
    ["req-2r", "eq-12345"],         # the same bytes cut into other items
    ["req-2", "req-1234"],          # one length differs
    ["req-2"],                      # one item fewer
    ["req-2", "req-12345", "a"],    # one item more
    ["req-2", None],                # a null item
    None,                           # a null row
])
def test_rows_that_do_not_repeat_are_encoded(changed: list[str | None] | None) -> None:
    prev: Rows = list(following(REQ))
    prev[3] = changed  # in place of REQ[2]
    for start in (0, 2, 3, 4):
        assert_coded_alike({"req_ids": REQ, "prev_req_ids": prev}, start, 6)


def test_a_null_item_in_the_base_is_not_an_empty_string() -> None:
    """A base row with a null item (``prev_req_ids`` may hold them) and a follower row of
    the same bytes with an empty string: not a repeat."""
    assert_coded_alike({"req_ids": [["a", None], ["b"]], "prev_req_ids": [[], ["a", ""]]}, 0, 2)
    assert_coded_alike({"req_ids": [["a", ""], ["b"]], "prev_req_ids": [[], ["a", None]]}, 0, 2)


def test_a_null_row_whose_offsets_span_items_holds_none() -> None:
    """Arrow lets a null row's offsets span items: they are no row's items."""
    items = lists_array([["a", "b", "c"]]).values
    offsets = pa.py_buffer(np.array([0, 1, 2, 3], dtype=np.int32))
    nulls = an.bitmap(np.array([True, False, True]))
    req = pa.Array.from_buffers(pa.list_(pa.string()), 3, [nulls, offsets], children=[items])
    prev = lists_array([[], ["a"], ["b"]])
    assert_coded_alike({"req_ids": [["a"], None, ["c"]], "prev_req_ids": [[], ["a"], ["b"]]},
                       0, 3, {"req_ids": req, "prev_req_ids": prev})


def test_columns_without_their_base_are_coded_alone() -> None:
    assert_coded_alike({"prev_req_ids": following(REQ)}, 1, 6)
    assert_coded_alike({"req_ids": REQ}, 2, 6)
    assert_coded_alike({}, 0, 0)


def test_many_differing_rows_stop_the_search_and_stay_exact() -> None:
    """Past the comparison budget the rows left are encoded, not assumed repeated."""
    req = [[f"r{i}", f"r{i + 1}"] for i in range(400)]
    prev = [[f"r{i}", f"r{i + 1}" if i % 3 else "x"] for i in range(-1, 399)]
    assert_coded_alike({"req_ids": req, "prev_req_ids": prev}, 0, 400)
    assert_coded_alike({"req_ids": req, "prev_req_ids": prev}, 7, 300)


row_strategy = st.lists(st.sampled_from(IDS), max_size=5)


@st.composite
def id_columns(draw: st.DrawFn) -> tuple[dict[str, Rows], int, int]:
    """``req_ids`` rows and ``prev_req_ids`` rows that mostly repeat the previous req row,
    some changed (an item, a null item, a null row), with a run of rows to code."""
    req: Rows = draw(st.lists(row_strategy | st.none(), min_size=1, max_size=12))
    prev: Rows = [draw(row_strategy)]
    for row in req[:-1]:
        change = draw(st.sampled_from(["same", "same", "same", "other", "null", "none_item"]))
        if change == "same":
            prev.append(row)
        elif change == "other":
            prev.append(draw(row_strategy))
        elif change == "null":
            prev.append(None)
        else:
            prev.append([*(row or []), None])
    start = draw(st.integers(0, len(req)))
    return {"req_ids": req, "prev_req_ids": prev}, start, draw(st.integers(start, len(req)))


@settings(max_examples=300, deadline=None)
@given(id_columns())
def test_codes_match_the_per_record_form(case: tuple[dict[str, Rows], int, int]) -> None:
    columns, start, stop = case
    assert_coded_alike(columns, start, stop)


def per_record_repeats(codes: list[int], counts: list[int]) -> list[bool]:
    out, at = [], 0
    for n in counts:
        mine = codes[at:at + n]
        out.append(len(set(mine)) != len(mine))
        at += n
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(-1, 12), max_size=9), max_size=12), st.booleans())
def test_repeats_match_the_per_record_form(rows: list[list[int]], long: bool) -> None:
    if long:  # one long run: the sorted (record, code) keys instead of the padded matrix
        rows = [*rows, list(range(5000)), [1, 1]]
    codes = np.array([c for row in rows for c in row], dtype=np.int64)
    counts = np.array([len(row) for row in rows], dtype=np.int64)
    assert repeats(codes, counts).tolist() == per_record_repeats(codes.tolist(),
                                                                 counts.tolist())


def test_repeats_of_runs_of_one_length() -> None:
    codes = np.array([3, 1, 2, 2, 5, 6, -1, -1], dtype=np.int64)
    assert repeats(codes, np.array([2, 2, 2, 2])).tolist() == [False, True, False, True]


def _built(list_offsets: list[int], str_offsets: list[int], data: bytes) -> pa.Array:
    items = pa.Array.from_buffers(pa.string(), len(str_offsets) - 1, [
        None, pa.py_buffer(np.array(str_offsets, np.int32)), pa.py_buffer(data)])
    return pa.Array.from_buffers(pa.list_(pa.string()), len(list_offsets) - 1, [
        None, pa.py_buffer(np.array(list_offsets, np.int32))], children=[items])


@pytest.mark.parametrize("array,valid,shown", [
    (_built([0, 2, 3], [0, 1, 3, 4], b"abcd"), True, True),
    (_built([0, 3, 2], [0, 1, 3, 4], b"abcd"), False, False),   # list offsets fall
    (_built([0, 2, 3], [0, 3, 1, 4], b"abcd"), False, False),   # string offsets fall
    (_built([0, 1, 2], [0, 2, 3], "é".encode() + b"a"), True, False),  # UTF-8: Arrow's
    (_built([0, 1, 2], [0, 1, 3], "é".encode() + b"a"), False, False),  # cut inside é
    (pa.array([[1]], type=pa.list_(pa.int64())), True, False),  # not strings
])
def test_ascii_string_lists_shows_only_what_full_validation_accepts(
        array: pa.Array, valid: bool, shown: bool) -> None:
    array.validate()
    try:
        array.validate(full=True)
        accepted = True
    except pa.ArrowInvalid:
        accepted = False
    assert accepted == valid
    assert an.ascii_string_lists(array) == shown
