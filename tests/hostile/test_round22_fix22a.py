"""Round 22, fix22a (issue 38, "Hostile input, round 3"): round 21's leftovers in the split
triage's known issues (T130a), the split triage's decoding (T130b), the known answer, the
importer and the API."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import test_round21_fix21a

from forensics.fleet.piece import replay_piece
from forensics.fleet.tasks import plan
from forensics.fleet.triage import decoded, merged, rows_of
from forensics.simulator.runs import simulate

#: round 21's far origin (a fixture): a sink finding 30 steps past its origin
far_origin = test_round21_fix21a.far_origin

#: a catalogue of one entry that accepts a sink finding of no origin
NONE_ORIGIN = """format = 1
[race]
reader = { site = "embedding", field = "input_ids" }
writers = []
[[entry]]
id = "origin-none"
title = "a sink finding of no origin"
runner = "unknown"
methods = ["mtp"]
versions = "unknown"
workaround = "unknown"
fix = { pr = "unknown", release = "unknown" }
[entry.signature]
require = [{ finding = { site = "embedding", origin = "none" } }]
"""


def _serial(tasks: Any) -> list[bytes]:
    """What a runner returns for ``tasks``, replayed in this process."""
    return [replay_piece(t.path, t.start, t.stop, t.window, planned=t.planned,
                         origins=t.origins) for t in tasks]


def _none_catalogue(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Known matching reads :data:`NONE_ORIGIN` in place of the bundled catalogue."""
    from forensics.known.schema import load_catalogue

    path = tmp_path / "catalogue.toml"
    path.write_text(NONE_ORIGIN)
    monkeypatch.setattr(sys.modules["forensics.known.answer"], "load_catalogue",
                        lambda: load_catalogue(path))


def test_a_split_piece_past_the_key_cap_reads_its_null_origin_as_unknown(
        far_origin: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """T130a: with the carried keys capped (no key kept), the piece whose sink finding's origin
    lies before its lookback says "origin not searched" and matches no entry that wants origin
    ``none`` (not judged); the whole replay, which searched every step, finds the origin."""
    import forensics.fleet.carry as carry
    import forensics.fleet.origins as origins

    _none_catalogue(monkeypatch, tmp_path)
    monkeypatch.setattr(carry, "MAX_KEYS", 0)
    monkeypatch.setattr(origins, "MAX_KEYS", 0)
    tasks = plan([far_origin], test_round21_fix21a.SPLIT)
    rows = rows_of(tasks, _serial(tasks), _serial)
    assert rows[0]["known"] == [] and "known_unsearched" not in rows[0]


def test_a_split_piece_whose_origins_were_searched_reads_null_as_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """T130a: a piece whose null origin was searched everywhere (no cap reached) still matches
    an entry that wants origin ``none``, as the whole replay does."""
    _none_catalogue(monkeypatch, tmp_path)
    capture = Path(str(simulate("placeholder-leak", steps=60, out=tmp_path / "l.capture")))
    one = plan([capture], 10**6)
    whole = merged(one, decoded(one, _serial(one)))
    tasks = plan([capture], 100)
    assert rows_of(tasks, _serial(tasks), _serial)[0]["known"] == whole[0]["known"]


def test_the_known_sentence_reads_the_open_entries_once(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """The sentence of a failure no signature matches reads the entries not judged once, and
    still names them and says "if those do not apply"."""
    from forensics.known.answer import KnownAnswer
    from forensics.known.matching import Match
    from forensics.known.schema import load_catalogue

    entry = load_catalogue().entries[0]
    unjudged = Match(entry, matched=False, missing=["x"], unjudged=["x"])
    said = KnownAnswer("explained", [unjudged], failing=True)
    calls: list[int] = []
    reads = KnownAnswer.open_entries

    def counted(self: KnownAnswer) -> str:
        calls.append(1)
        return reads(self)

    monkeypatch.setattr(KnownAnswer, "open_entries", counted)
    text = said.known_sentence()
    assert len(calls) == 1 and entry.id in text and "if those do not apply" in text


def test_a_split_triage_decodes_each_result_once(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """T130b: the walk of the carried origins and the rows read each piece's Arrow result once
    (it was decoded twice, once for each); the rows are as before."""
    import forensics.fleet.carry as carry
    import forensics.fleet.piece as piece
    from forensics.fleet.triage import triage

    capture = Path(str(simulate("placeholder-leak", steps=600, out=tmp_path / "l.capture")))
    before = triage([capture], workers=1)
    calls: list[int] = []
    reads = piece.from_ipc

    def counted(data: bytes) -> Any:
        calls.append(1)
        return reads(data)

    monkeypatch.setattr(piece, "from_ipc", counted)
    monkeypatch.setattr(carry, "from_ipc", counted, raising=False)
    split = triage([capture], workers=1, split_records=100)
    assert len(calls) == len(plan([capture], 100)) > 1
    assert split.rows[0]["findings"] == before.rows[0]["findings"]
    assert split.rows[0]["known"] == before.rows[0]["known"]


# ------------------------------------------------ T130c, T130d: imported crash dumps

ROOT = Path(__file__).resolve().parents[2]
ALL_PLACEHOLDER = ROOT / "tests" / "data" / "vllm_dump_all_placeholder.log"


def _dump(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> dict[str, Any]:
    """The crash-dump event of the capture imported from a log of ``text``."""
    from test_round19_attack19b import import_log

    events = import_log(capsys, tmp_path, text)[2]
    return next(e for e in events if e["kind"] == "crash_dump")


def test_a_cached_request_id_holding_a_quote_is_read_as_printed(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """T130c: vLLM prints an id holding ``'`` in double quotes (``["it's", 'b']``): it is read
    as the id, not as the text between two of its quotes."""
    text = ALL_PLACEHOLDER.read_text(encoding="utf-8").replace(
        "req_ids=['chatcmpl-a1',", "req_ids=[\"it's]a1\",").replace("chatcmpl-a1:", "it's]a1:")
    dump = _dump(capsys, tmp_path, text)
    assert dump["req_ids"] == ["it's]a1", "chatcmpl-b2"]
    assert dump["num_scheduled_tokens"] == {"chatcmpl-b2": 5, "it's]a1": 5}


def test_a_cached_request_list_read_wrong_leaves_the_batch_unknown(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """T130c: a cached id list that is no list of printed strings, or that names a request
    the batch does not schedule, leaves the batch unknown, saying why."""
    base = ALL_PLACEHOLDER.read_text(encoding="utf-8")
    for text, why in ((base.replace("req_ids=['chatcmpl-a1',", "req_ids=[chatcmpl-a1,"),
                       "is not a list of quoted request ids"),
                      (base.replace("req_ids=['chatcmpl-a1',", "req_ids=['chatcmpl-zz',"),
                       "CachedRequestData(req_ids=[...]) are not among")):
        dump = _dump(capsys, tmp_path, text)
        assert dump["req_ids"] == "unknown" and why in str(dump["unread"])


def test_a_printed_list_is_read_by_its_quotes() -> None:
    """T130c: each escape ``repr`` writes is decoded; any other text is no list."""
    from forensics.importers.quoted import quoted_list

    text = "[" + ", ".join(map(repr, ["a", "it's", "x'y\"z", "\\", "\n\t", "é\x00"])) + "]"
    assert quoted_list(text, 1) == ["a", "it's", "x'y\"z", "\\", "\n\t", "é\x00"]
    assert quoted_list("[]", 1) == [] and quoted_list("['a' 'b']", 1) is None
    assert quoted_list("['a\\q']", 1) is None and quoted_list("['a', ", 1) is None


def test_known_says_why_a_fact_spelled_twice_is_unknown(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    """T130d: a speculative method the dump's config line spells twice (a model path holding
    ``SpeculativeConfig(method=``) is unknown, and ``known`` and its JSON say why, never
    "not recorded"."""
    from test_round2 import run_cli

    text = ALL_PLACEHOLDER.read_text(encoding="utf-8").replace(
        "SpeculativeConfig(method='mtp', model='/models/Qwen3.8-27B'",
        "SpeculativeConfig(method='mtp', model='/m/SpeculativeConfig(method=x/'")
    assert _dump(capsys, tmp_path, text)["config"]["speculative"] == "unknown"
    capture = tmp_path / "engine.capture"
    code, out, err = run_cli(capsys, "known", capture)
    assert code == 0, err
    said = " ".join(out.split())
    assert "speculative not recorded" not in said
    assert "speculative unknown: a crash dump's config line spells it more than once" in said
    code, out, err = run_cli(capsys, "known", capture, "--json")
    race = {m["id"]: m for m in json.loads(out)["checked"]}["all-placeholder-drafts-race"]
    assert any("spells it more than once" in u for u in race["unknown"])


# ------------------------------------------------ T130e: reports after an engine_dead event

DEAD_LINE = ("(APIServer pid=7) ERROR 12-02 10:46:45 [serving.py:1] "
             "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n")


def test_reports_after_an_engine_dead_event_are_counted_with_it(tmp_path: Path) -> None:
    """T130e: an ``EngineDeadError`` line alone is a crash event (its crash in another log);
    the later lines reporting the same death are counted with its own line (``count`` 3 of 3
    reports, its own line first), as a crash's reports are; the second line had become its
    report's first, ``count`` 2 of 3 reports."""
    from forensics.importers import read_source

    log = tmp_path / "api.log"
    log.write_text(DEAD_LINE + "x\n" + DEAD_LINE + "y\n" + DEAD_LINE)
    [event] = read_source(log).events
    report = event["engine_dead"]
    assert (event["kind"], event["line"]) == ("engine_dead", 1)
    assert (report["line"], report["count"]) == (1, 3)
    assert [r["line"] for r in report["more"]] == [3, 5]


# ------------------------------------------------ T130f, T130g: the plotting API

CLEAN = ROOT / "data" / "clean.capture"


@pytest.fixture(scope="module")
def clean_result() -> Any:
    """The bundled clean capture, replayed."""
    import forensics

    return forensics.replay(forensics.load(CLEAN))


def test_save_refuses_a_capture_folder(tmp_path: Path, clean_result: Any) -> None:
    """T130f: ``plots.save(ax, "X.capture/x.svg")`` (or into any folder holding a manifest,
    reached through a link too) is refused, naming the path and the fix; nothing is written.
    It wrote the image into the capture."""
    import shutil

    from forensics import plots
    from forensics.errors import ConfigurationError

    capture = Path(shutil.copytree(CLEAN, tmp_path / "c.capture"))
    plain = Path(shutil.copytree(CLEAN, tmp_path / "plain"))
    (tmp_path / "link").symlink_to(capture)
    for path in (capture / "x.svg", plain / "sub" / ".." / "x.png", tmp_path / "link" / "x.svg"):
        with pytest.raises(ConfigurationError, match="inside the capture .*a capture folder: "
                                                     "what is written there changes"):
            plots.save(plots.plot(clean_result, "timeline"), path)
        assert not Path(os.path.realpath(path)).exists()
    plots.save(plots.plot(clean_result, "timeline"), tmp_path / "out.svg")
    assert (tmp_path / "out.svg").stat().st_size > 0


def test_an_unknown_plot_kind_names_the_argument_and_the_choices(clean_result: Any) -> None:
    """T130g: ``plot``, ``plot_side_by_side`` and the SVG painter say one line for an unknown
    kind, naming ``kind=`` and the choices (a ValueError still); it was a bare ValueError
    "unknown plot kind 'nope'; expected one of [...]", from three copies of the line."""
    from forensics import plots
    from forensics.errors import ConfigurationError
    from forensics.present.svg.views import figure, side_by_side

    for draw in (lambda: plots.plot(clean_result, kind="nope"),
                 lambda: plots.plot_side_by_side(clean_result, kind="nope"),
                 lambda: figure("nope", clean_result),
                 lambda: side_by_side(clean_result, kind="nope")):
        with pytest.raises(ConfigurationError) as caught:
            draw()
        assert isinstance(caught.value, ValueError)
        assert str(caught.value).startswith("kind='nope' is no plot kind; give kind= one of [")
        assert "'timeline'" in str(caught.value)


def test_a_new_request_id_holding_a_comma_leaves_the_batch_unknown(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """T130c: vLLM prints a new request's id unquoted (``NewRequestData(req_id=a,b,...``): an
    id holding ``,`` is read short, names no request the batch schedules, and leaves the batch
    unknown, saying why (it was stored as ``a``)."""
    text = ALL_PLACEHOLDER.read_text(encoding="utf-8").replace(
        "scheduled_new_reqs=[]", "scheduled_new_reqs=[NewRequestData(req_id=n,1,"
        "prompt_token_ids_len=5)]").replace(
        "num_scheduled_tokens={chatcmpl-b2: 5,", "num_scheduled_tokens={n,1: 5, chatcmpl-b2: 5,"
    ).replace("total_num_scheduled_tokens=10", "total_num_scheduled_tokens=15")
    dump = _dump(capsys, tmp_path, text)
    assert dump["new_req_ids"] == "unknown"
    assert "NewRequestData(req_id=...) are not among" in str(dump["unread"])
