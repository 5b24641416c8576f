"""Round 21 (fix21a): defects round 20 found and left (issue 38, hostile input).

1. ``triage --split-records N`` replays a step range with 8 earlier steps: a sink finding whose
   origin record lay further back got origin null (and ``resolved`` false) where the whole
   replay names it. Each piece now says which origins it looked for and which it holds, and a
   piece that looked for one an earlier piece holds is replayed again with that step
   (:mod:`forensics.fleet.carry`).
2. ``inspect`` of a redacted capture showed its manifest's ``redaction.not_judged`` as a raw
   dict (``redacted unjudged: {'not_known': {}, 'cut': 1}``) and said nothing of what no
   variant judged in words; text and ``--json`` now say it as every output does.
3. The timeline (``plot --kind timeline``, the report's) said nothing of what no variant
   judged, where the verdict matrix' title names it (T117c); both titles are made by one
   helper (:func:`forensics.present.selection.unjudged_title`).
4. Markdown outputs wrote an imported log's ``10:46:44`` as ``10\\:46:44``: the escape of an
   emoji shortcode (``:smile:``) took ``:46:`` for one. GitHub's shortcodes of digits only are
   ``:100:`` and ``:1234:``; only a shortcode is escaped, and the rendered text is the text.
5. ``redact`` dropped the ``cut`` note of a crash's death report read from a line cut short
   (:func:`forensics.importers.tracebacks.report`): the redacted capture said it whole.
6. The probe's trusted append (records of its own copies and plain Python values) did not
   count a string list's or a ragged field's items against the cap readers apply
   (:func:`forensics.validate.most_items`): it wrote a record every reader refused. Such a
   record now takes the checked append, which refuses it: dropped, with an event.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from test_round2 import run_cli
from test_round14_fix14 import plugin_captures  # noqa: F401  (a fixture)
from test_round18_attack18b import _dropped_capture

from forensics.fleet.carry import reruns
from forensics.fleet.origins import MAX_KEYS
from forensics.fleet.piece import LOOKBACK, replay_piece, replayed_range
from forensics.fleet.tasks import plan
from forensics.fleet.triage import decoded, merged, with_origins
from forensics.simulator.runs import simulate
from forensics.store.reader import load
from forensics.store.writer import write_capture

#: the sink step whose records (but its origin's) move, and how far
SINK_STEP, SHIFT = 251, 30
#: the records of a piece: the first piece ends with the origin's record (its 1,001st), the
#: second starts with the sink's (the plan cuts by records, never inside a step: T143a)
SPLIT = 1_001
COLUMNS = ["variant", "site", "step", "rank", "row", "element", "value", "origin", "resolved"]


@pytest.fixture(scope="module")
def far_origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A placeholder-leak capture of 600 steps whose records from the sink finding of step
    ``SINK_STEP`` on (all but its origin's, of ``prepare_input_ids``) stand ``SHIFT`` steps
    later: the origin lies ``SHIFT`` steps before its sink, a piece of ``SPLIT`` records
    starting between them."""
    root = tmp_path_factory.mktemp("origin")
    source = Path(str(simulate("placeholder-leak", steps=600, out=root / "leak.capture")))
    moved = [dataclasses.replace(r, step=r.step + SHIFT)
             if r.step > SINK_STEP or (r.step == SINK_STEP and r.site != "prepare_input_ids")
             else r for r in load(source).records()]
    out = root / "far.capture"
    write_capture(out, moved, json.loads((source / "manifest.json").read_text()))
    return out


def _rows(found: Any) -> list[str]:
    """The findings as sorted text rows of :data:`COLUMNS` (null as None)."""
    table = found[COLUMNS].astype(object)
    return sorted(map(repr, table.where(table.notna(), None).itertuples(index=False)))


def _pieces(capture: Path) -> tuple[list[Any], list[bytes]]:
    """The planned tasks of ``capture`` (pieces of ``SPLIT`` records) and their results, replayed
    here, in this process."""
    tasks = plan([capture], SPLIT)
    return tasks, [replay_piece(t.path, t.start, t.stop, t.window, planned=t.planned)
                   for t in tasks]


def _serial(tasks: Any) -> list[bytes]:
    """What a runner returns for ``tasks``, replayed in this process."""
    return [replay_piece(t.path, t.start, t.stop, t.window, planned=t.planned,
                         origins=t.origins) for t in tasks]


def test_a_split_triage_names_the_origin_the_whole_replay_names(far_origin: Path) -> None:
    """The pieces' findings (a piece replayed again with the steps of the origins an earlier
    piece holds) are the whole replay's, origin and ``resolved`` included; the shifted sink
    finding had origin null in its piece (its origin 30 steps back, the lookback 8)."""
    capture = load(far_origin)
    tasks, results = _pieces(far_origin)
    whole = _rows(replayed_range(capture, None, None)[2])
    first = [r for t in tasks for r in _rows(replayed_range(capture, t.start, t.stop,
                                                            window=t.window)[2])]
    assert sorted(first) != whole and "origin=None" in "".join(set(first) - set(whole))
    again, unsearched = reruns(tasks, decoded(tasks, results))
    assert [t.origins for t in again.values()] == [(SINK_STEP,)] and unsearched == {}
    assert all(t.start > SINK_STEP + LOOKBACK for t in again.values())
    tasks = [again.get(i, t) for i, t in enumerate(tasks)]
    pieces = [r for t in tasks for r in _rows(replayed_range(
        capture, t.start, t.stop, window=t.window, origins=t.origins)[2])]
    assert sorted(pieces) == whole


def test_the_triage_rows_merge_the_pieces_replayed_again(far_origin: Path) -> None:
    """``with_origins`` replays again only the piece that looked for the carried origin (by
    the runner given), and the merged row counts what the unsplit triage counts."""
    tasks, results = _pieces(far_origin)
    ran: list[Any] = []

    def run(given: Any) -> list[bytes]:
        ran.extend(given)
        return _serial(given)

    pieces, unsearched = with_origins(tasks, decoded(tasks, results), run)
    rows = merged(tasks, pieces, unsearched)
    one = plan([far_origin], 10**6)
    whole = merged(one, decoded(one, _serial(one)))
    assert len(ran) == 1 and ran[0].origins == (SINK_STEP,) and unsearched == {}
    assert rows[0]["findings"] == whole[0]["findings"] and rows[0]["known"] == whole[0]["known"]
    assert "origin_wanted" not in rows[0] and "origin_candidates" not in rows[0]


def test_a_request_matches_its_own_and_an_unknown_one() -> None:
    """A sink finding of a request is given the latest origin of that request or of an
    unknown one, never another request's; of an unknown request, any."""
    from forensics.fleet.carry import _steps

    latest = {(0, -1, "a"): 5, (0, -1, "b"): 9, (0, -1, None): 3, (1, -1, "a"): 11}
    assert _steps([(0, -1, "a")], latest) == ({5}, False)
    assert _steps([(0, -1, "c")], latest) == ({3}, False)
    assert _steps([(0, -1, None)], latest) == ({9}, False)
    assert _steps([(2, -1, "a"), (0, -1, "a")], latest) == ({5}, True)


def _piece(start: int, wanted: list[list[Any]], cut: bool, keys: list[list[Any]],
           since: int | None) -> bytes:
    """A piece's result of steps from ``start`` that looked for ``wanted`` (``cut``: and more)
    and holds the candidates ``keys``, complete from step ``since``."""
    from forensics.fleet.piece import to_ipc

    return to_ipc([{"capture": "c", "name": "c", "start": start, "stop": start + 10,
                    "error": "", "origin_wanted": json.dumps({"keys": wanted, "cut": cut}),
                    "origin_candidates": json.dumps({"keys": keys, "from": since})}])


def test_an_origin_past_what_was_carried_is_said_not_searched() -> None:
    """A piece looking for an origin that no carried key holds, where an earlier piece left
    keys out (more than ``MAX_KEYS``), or that looked for more than ``MAX_KEYS`` itself, is
    named with the step before which its origins were not searched, and its first finding (a
    sink finding of null origin) says so, never that it has none."""
    from forensics.fleet.carry import noted
    from forensics.fleet.tasks import Task
    from forensics.present.conclusion import describe_finding

    tasks = [Task("c", 0, 10), Task("c", 10, 20)]
    early = _piece(0, [], False, [[0, -1, "a", 5]], 3)

    def walked(later: bytes) -> Any:
        """``reruns`` of ``early`` and ``later``, decoded as the triage hands them."""
        return reruns(tasks, decoded(tasks, [early, later]))

    assert walked(_piece(10, [[0, -1, "b"]], False, [], None)) == ({}, {1: 3})
    again, unsearched = walked(_piece(10, [[0, -1, "a"]], False, [], None))
    assert again[1].origins == (5,) and unsearched == {}
    assert walked(_piece(10, [], True, [], None)) == ({}, {1: 10 - LOOKBACK})
    sink = {"site": "embedding", "step": 12, "rank": 0, "row": 0, "kind": "out_of_bounds",
            "value": -1, "tensor": "input_ids", "origin": None}
    said = json.loads(noted(json.dumps(sink), 3) or "null")
    assert said["origin_unsearched"] == 3 and \
        "(origin not searched before step 3: " in describe_finding(said)
    assert noted(json.dumps({**sink, "origin": "prepare_input_ids"}), 3) == \
        json.dumps({**sink, "origin": "prepare_input_ids"})


def test_the_carried_keys_are_capped_at_the_latest() -> None:
    """More than ``MAX_KEYS`` keys keep the latest ones and say from which step they are
    complete: memory stays bounded."""
    from forensics.fleet.origins import capped as _capped

    latest = {(0, v, None): v for v in range(MAX_KEYS + 10)}
    kept, complete = _capped(latest)
    assert len(kept) == MAX_KEYS and complete == 10 and min(kept.values()) == 10


#: what the redacted capture of a cut, full events file says no variant judged
NOT_JUDGED = ("1200 event(s) left out by the probe, its events file full; the ends of 1 "
              "file(s) cut short, in the capture this one was redacted from (not kept by the "
              "redaction)")


def test_inspect_of_a_redacted_capture_says_what_no_variant_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture whose probe left 1,200 events out and whose events file was cut short,
    redacted: ``inspect`` says both as the replay words them, in its text and its JSON; the
    write-up's capture facts word the redaction's (they showed its dict)."""
    original = _dropped_capture(tmp_path)
    with (original / "events-w0.jsonl").open("a") as events:
        events.write('{"kind": "probe_st')
    red = tmp_path / "red.capture"
    code, said, err = run_cli(capsys, "redact", original, "-o", red)
    assert code == 0, err
    code, said, err = run_cli(capsys, "inspect", red)
    assert code == 0, err
    assert f"  not judged: {NOT_JUDGED}" in said.splitlines(), said
    assert "{" not in said, said
    code, said, err = run_cli(capsys, "inspect", red, "--json")
    assert code == 0 and json.loads(said)["not_judged"] == NOT_JUDGED, (said, err)
    code, said, err = run_cli(capsys, "summary", red, "--format", "markdown")
    assert code == 0 and "- redacted unjudged: `the ends of 1 file(s) cut short, in the " \
        "capture this one was redacted from (not kept by the redaction)`" in said, (said, err)


def test_inspect_of_a_redacted_capture_names_the_sites_it_could_not_keep(
        plugin_captures: dict[str, Path], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    """The redaction of a capture holding 3 records of a site not known here: ``inspect``
    names them, and whose they were."""
    red = tmp_path / "red.capture"
    code, said, err = run_cli(capsys, "redact", plugin_captures["both"], "-o", red)
    assert code == 0, err
    code, said, err = run_cli(capsys, "inspect", red)
    assert code == 0, err
    assert ("  not judged: 3 record(s) of site 'toy_gather' (not known to the install that "
            "redacted it), in the capture this one was redacted from (not kept by the "
            "redaction)") in said.splitlines(), said


def test_the_timeline_title_says_what_no_variant_judged(tmp_path: Path) -> None:
    """data/clean.capture whose probe never wrote 100 records and left 1,200 events out: the
    timeline's title (the report's SVG, matplotlib's, a dense timeline's) says so after its
    two lines, as the verdict matrix' does, in lines of at most 80 characters."""
    import shutil

    from test_round20_lead import LOST_EVENTS

    import forensics
    from forensics.present.plots import plot_bounds_timeline
    from forensics.present.scene.timeline import timeline_data
    from forensics.present.scene.verdicts import verdict_title
    from forensics.present.svg.timeline import timeline_panel

    capture = tmp_path / "lost.capture"
    shutil.copytree(Path(__file__).parents[2] / "data" / "clean.capture", capture)
    (capture / "events-w0.jsonl").write_text(LOST_EVENTS)
    result = forensics.replay(capture, ["upstream", "patched"])
    said = verdict_title(result).split("\n")[2:]
    assert said[0].startswith("not judged: 100 record(s)") and all(len(x) <= 80 for x in said)
    title = timeline_panel(result).title.split("\n")
    assert title[0] == "lost · embedding · upstream" and title[2:] == said, title
    assert timeline_data(result).title("counts per bin").split("\n")[1:] == \
        ["counts per bin", *said]
    shown = plot_bounds_timeline(result)
    if hasattr(shown, "get_title"):  # matplotlib's axes (an SVG panel when it is not there)
        assert shown.get_title().split("\n")[2:] == said


#: texts whose Markdown must render as themselves: times, shortcodes, links, emphasis, ...
RENDERED = ["engine dead at 10:46:44 (2026-12-07T10:46:44Z)", "a :smile: and :+1: and :8ball:",
            "a :100: b :1234: c :1000: d 1:2:3", "*x* _y_ ~z~ `code` $m$ a|b",
            "[text](http://x) [ref]: y ![img](z)", "<b>bold</b> &amp; &#65;",
            "# head", "- item", "1. one", "> quote", "back\\slash \\* \\:x:",
            "see https://example.com/a:b and alice@example.com", "@user #12 GH-3",
            "x = y:z: w", "trailing ##"]


def _rendered(source: str) -> str:
    """The text of ``source`` as CommonMark renders it (markdown-it, in the lock): tags
    dropped, entities read."""
    import html
    import re

    from markdown_it import MarkdownIt

    out = MarkdownIt("commonmark").render(source)
    return html.unescape(re.sub(r"<[^>]+>", "", out)).strip()


@pytest.mark.parametrize("text", RENDERED)
def test_markdown_renders_as_the_text(text: str) -> None:
    """Each text as :func:`~forensics.escaping.markdown` writes it (a capture's value) renders
    as the text itself."""
    from forensics.escaping import markdown

    assert _rendered(markdown(text, raw=True)) == text, markdown(text, raw=True)


def test_a_time_is_written_as_it_is() -> None:
    """A log line's time holds no shortcode: no escape is written in it (it was
    ``10\\:46:44``); GitHub's shortcodes of digits, and any of a letter, are still escaped."""
    from forensics.escaping import markdown

    assert markdown("died at 10:46:44", raw=True) == "died at 10:46:44"
    assert markdown("a :100: b :1234: :smile: :+1:", raw=True) == \
        "a \\:100: b \\:1234: \\:smile: \\:+1:"


def test_a_redacted_capture_keeps_a_reports_cut(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    """An ``EngineDeadError`` report on a line longer than the log's bound: the redacted
    capture's report says it was read only in part, as the original's does."""
    from test_round20_fix20c import DEAD_LINE, ILLEGAL, STEP1, _import

    from forensics.share.redaction import redact

    _, events = _import(capsys, tmp_path, STEP1 + ILLEGAL + DEAD_LINE.rstrip("\n")
                        + " x" * 40_000 + "\n")
    cut = events[0]["engine_dead"]["cut"]  # type: ignore[index]
    out = redact(tmp_path / "engine.capture", tmp_path / "out.capture").path
    report = json.loads(run_cli(capsys, "inspect", out, "--json")[1])["events"][0]["engine_dead"]
    assert report["cut"] == cut and "longer than 65536 bytes" in cut, report


def test_the_probe_refuses_a_record_past_the_readers_caps(tmp_path: Path) -> None:
    """An ``async_output`` record of 262,145 requests (string lists and a ragged field one
    past the 262,144 a reader takes in a row), of plain Python values: the probe's write path
    wrote it trusted, and every reader then refused the capture. It is dropped, counted and
    reported naming the field and the cap, and the capture reads whole with the record before
    it."""
    import numpy as np

    import forensics
    from forensics.probe.copy import PendingRecord
    from forensics.probe.writing import BatchWriter
    from forensics.records import MAX_CONTAINERS, Record
    from forensics.store.writer import CaptureWriter

    small = next(r for r in forensics.simulate("soak", steps=3, batch=3, spec_tokens=2)
                 if r.site == "async_output")
    n = MAX_CONTAINERS + 1
    fields = {**small.fields, "req_ids": [f"r{i}" for i in range(n)],
              "prev_req_ids": [f"r{i}" for i in range(n)],
              "sampled_token_ids_cpu": np.ones((n, 3), dtype=np.int64),
              "output_tail": [[1, 1]] * n, "output_len": np.full(n, 2, dtype=np.int64)}
    records = [Record("async_output", 1, 0, dict(small.fields)),
               Record("async_output", 2, 0, fields)]
    reported: list[tuple[str, str]] = []
    counts: dict[str, int] = {}
    path = tmp_path / "capped.capture"
    with CaptureWriter(path, process="t") as writer:
        batch = BatchWriter(writer, lambda exc, where: reported.append((where, str(exc))),
                            lambda name, k: counts.__setitem__(name, counts.get(name, 0) + k))
        written = batch.write([PendingRecord(r.site, r.step, r.rank, dict(r.fields))
                               for r in records])
    assert written == 1 and counts == {"written": 1, "dropped": 1}, (counts, reported)
    (where, said), = reported
    assert "step 2" in where and f"holds {n} strings, past the {MAX_CONTAINERS}" in said
    assert [r.step for r in forensics.load(path).records()] == [1]
