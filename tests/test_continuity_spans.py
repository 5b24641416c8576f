"""A row's span is judged as its tokens are one by one: the list-wise path of
:meth:`~forensics.judge.continuity.Judging.take` against each token made a
:class:`~forensics.judge.continuity.Fed` and judged alone, over random rows."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.judge.continuity import Judging, Recorded, Span, Stream

#: ids drawn around the edges a span meets: the placeholder, 0, the bound, past int64
IDS = st.sampled_from([-1, 0, 7, 99, 100, 2**64 - 1])
BOUND = 100


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    """A stream at step 5 with a few rows' spans, drafts and accepted tokens."""
    stream = Stream("v1", clamps=draw(st.sampled_from([True, False, None])))
    names = ["a", "b", None]
    for rank, name in [(0, "a"), (0, "b")]:
        for position in range(8):
            for made in draw(st.lists(st.integers(0, 7), max_size=2)):
                stream.accept(rank, name, position, Recorded(
                    draw(IDS), "prepare_input_ids", made + 1, "prev_sampled_token_ids",
                    "[0, 0]", made))
        if draw(st.booleans()):
            stream.proposed[(rank, 5, name)] = (draw(st.lists(IDS, max_size=5)),
                                                "prepare_input_ids", 5, "draft_token_ids", 0, 4)
    start = 0
    for row in range(draw(st.integers(1, 3))):
        reads = draw(st.lists(IDS, max_size=7))
        written = draw(st.lists(IDS, max_size=len(reads) + 1))
        positional = draw(st.booleans())
        stream.spans.append(Span(
            5, 0, draw(st.sampled_from(names)), row, start, reads,
            draw(st.sampled_from([BOUND, None])), ("embedding", "input_ids"),
            draft_from=draw(st.integers(-3, 8)), padding=draw(st.booleans()),
            positions=draw(st.lists(st.integers(0, 9), max_size=len(reads))) if positional
            else None, first=draw(st.sampled_from([None, 0, 3])), written=written,
            written_at=("prepare_input_ids", "out.input_ids_device")))
        start += len(reads)
    return stream


@settings(max_examples=120, deadline=None)
@given(streams())
def test_a_span_is_judged_as_its_tokens_one_by_one(stream: Stream) -> None:
    by_token = copy.deepcopy(stream)
    by_token.fed = [span.fed(k) for span in by_token.spans for k in range(len(span.reads))]
    by_token.spans = []
    by_span, one_by_one = Judging(), Judging()
    by_span.take(stream)
    one_by_one.take(by_token)
    assert by_span.result(stream).to_json() == one_by_one.result(by_token).to_json()
    assert by_span.judged == one_by_one.judged
    assert by_span.found.counts == one_by_one.found.counts


def test_an_id_past_the_bound_equal_to_its_draft_is_not_judged() -> None:
    """Ids at the bound are a bounds finding: a draft of 100 proposed as 100, with 100
    embedding rows, is not counted judged (the list-wise path once counted it)."""
    stream = Stream("v1", clamps=True)
    stream.proposed[(0, 5, "a")] = ([100, 7], "prepare_input_ids", 5, "draft_token_ids", 0, 4)
    stream.spans.append(Span(5, 0, "a", 0, 0, [100, 7], BOUND, ("embedding", "input_ids"),
                             draft_from=0, positions=[3, 4]))
    judging = Judging()
    judging.take(stream)
    assert (judging.judged, judging.found.counts) == (1, {})
