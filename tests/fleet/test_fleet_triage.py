"""forensics triage on a small generated fleet: rows, groups, errors, divergence, outputs."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from forensics.cli import main
from forensics.fleet.generate import DIVERGENCE_STEP, Fleet, simulate_fleet
from forensics.fleet.output import flat_rows, render, write_html, write_table
from forensics.fleet.triage import Triage, triage

#: the conclusion and first-finding site of each kind of generated capture (a V1 fault that
#: the known-signature catalogue names concludes "known" where the runner is V1)
EXPECTED = {"clean": ("clean", None), "crash": ("unexplained", None),
            "stale_prev_row": ("violation", "batch_change"),
            "vocab_sentinel": ("violation", "async_output"),
            "placeholder_leak": ("violation", "prepare_input_ids"),
            "misattribution": ("suspect", "batch_change"),
            "divergence": ("rank divergence", None), "corrupt": ("unreadable", None)}


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return simulate_fleet(tmp_path_factory.mktemp("small"), count=14, steps=8, batch=3)


@pytest.fixture(scope="module")
def result(small: Fleet) -> Triage:
    return triage([small.root], workers=1)


def test_each_capture_is_one_row_with_its_conclusion(small: Fleet, result: Triage) -> None:
    assert [r["capture"] for r in result.rows] == sorted(small.kinds)
    for row in result.rows:
        conclusion, site = EXPECTED[small.kinds[row["capture"]]]
        if row["known"]:
            conclusion = "known"
        assert row["conclusion"] == conclusion, row["name"]
        if row["capture"] == small.divergence["captures"][1]:
            # the diverging rank's embedding ids are not what its prepare_input_ids wrote
            site = "embedding"
            assert row["first"]["kind"] == "unwritten_input", row["name"]
        assert (row["first"] or {}).get("site") == site, row["name"]


def test_the_corrupt_capture_is_a_row_with_its_error(small: Fleet, result: Triage) -> None:
    (row,) = [r for r in result.rows if r["capture"] == small.corrupt]
    assert "unreadable" in row["error"] and "async_output.r0" in row["error"]
    assert "\n" not in row["error"]
    assert [g.title() for g in result.groups if g.what == "unreadable capture"] == \
        ["1 capture: unreadable capture"]


def test_rank_divergence_is_found_at_its_step(small: Fleet, result: Triage) -> None:
    diverged = {r["capture"]: r["divergence"] for r in result.rows if r["divergence"]}
    assert sorted(diverged) == sorted(small.divergence["captures"])
    hit = next(iter(diverged.values()))
    assert (hit["step"], hit["site"], hit["tensor"], hit["element"]) == \
        (DIVERGENCE_STEP, "embedding", "input_ids", 0)
    assert hit["ranks"] == [0, 1] and hit["values"][1] == hit["values"][0] + 1
    engine_b = [r for r in result.rows if "engine-b" in r["name"]]
    assert len(engine_b) == 2 and all(r["divergence"] is None for r in engine_b)


def test_the_divergence_names_both_captures_compared(small: Fleet, result: Triage) -> None:
    from forensics.fleet.stitch import divergence_text

    (row, other) = [r for r in result.rows if r["divergence"]]
    text = divergence_text(row["divergence"])
    assert f"on rank 0 ({row['name']})" in text or f"on rank 0 ({other['name']})" in text
    assert row["name"] in text and other["name"] in text


def _forged_rank(small: Fleet, target: Path, drop_last_step: bool) -> Path:
    """A capture claiming engine-b's id as its rank 1, its ids changed at every step (a
    divergence, were it stitched); one step fewer when ``drop_last_step``."""
    from dataclasses import replace

    from forensics.store.reader import load
    from forensics.store.writer import write_capture

    source = load(next(p for p in small.kinds if p.endswith("engine-b-rank1.capture")))
    last = max(source.steps)
    records = []
    for record in source.records():
        if drop_last_step and record.step == last:
            continue
        fields = dict(record.fields)
        if record.site == "embedding" and not record.summary:
            fields["input_ids"] = fields["input_ids"][::-1].copy()
        records.append(replace(record, fields=fields))
    manifest = {k: v for k, v in source.manifest.items() if k not in ("format", "created")}
    manifest["process"] = {"host": "attacker", "pid": 1, "rank": 1}
    return write_capture(target, records, manifest)


def test_a_claimed_engine_id_alone_makes_no_divergence(small: Fleet, tmp_path: Path) -> None:
    engine_b = sorted(p for p in small.kinds if "engine-b" in p)
    forged = _forged_rank(small, tmp_path / "forged.capture", drop_last_step=True)
    rows = {r["name"]: r for r in triage([*engine_b, forged], workers=1).rows}
    assert all(r["divergence"] is None for r in rows.values())
    assert rows["engine-b-rank0.capture"]["conclusion"] == "clean"
    # the same claim with the engine's step history corroborated is stitched, and the verdict
    # names the capture it was compared with (rank 0's), never the other rank's
    same = _forged_rank(small, tmp_path / "same-history.capture", drop_last_step=False)
    rows = {r["name"]: r for r in triage([engine_b[0], same], workers=1).rows}
    assert rows["same-history.capture"]["divergence"] is not None
    assert rows["engine-b-rank0.capture"]["divergence"]["captures"][1].endswith(
        "same-history.capture")


def test_a_copy_claiming_a_rank_the_engine_holds_is_stitched_to_nothing(
        small: Fleet, result: Triage, tmp_path: Path) -> None:
    """A capture copying engine-b's id and step history that claims rank 1, beside engine-b's
    own rank 1, its ids changed, once made engine-b's rank 0 a rank divergence; two captures of
    one rank contradict each other, so neither is stitched: every engine-b row is the row it
    has without the copy but for its conclusion, ``divergence not judged`` (it was ``clean``:
    T84c), and the sentence naming the copy; the copy compares with nothing."""
    engine_b = sorted(p for p in small.kinds if "engine-b" in p)
    forged = _forged_rank(small, tmp_path / "forged.capture", drop_last_step=False)
    rows = {r["name"]: r for r in triage([*engine_b, forged], workers=1).rows}
    assert rows["forged.capture"]["divergence"] is None
    said = ("conclusion", "contested")
    for row in result.rows:
        if row["capture"] in engine_b:
            now = rows[row["name"]]
            assert {k: v for k, v in now.items() if k not in said} == \
                {k: v for k, v in row.items() if k not in said}
            assert (row["conclusion"], row["contested"]) == ("clean", None)
            assert now["conclusion"] == "divergence not judged"
            assert f"'{os.path.abspath(forged)}'" in now["contested"], now["contested"]


def test_groups_follow_the_generated_kinds(small: Fleet, result: Triage) -> None:
    got = sorted(sorted(r["capture"] for r in g.rows) for g in result.groups)
    expected: dict[tuple[str, ...], list[str]] = {}
    for path, key in small.groups.items():
        expected.setdefault(key, []).append(path)
    assert got == sorted(sorted(v) for v in expected.values())
    titles = [g.title() for g in result.groups]
    assert "2 captures on 2 hosts, vLLM 0.33.0, runner v1, speculation mtp: rank divergence " \
           "in input_ids at embedding" in titles


def test_a_split_capture_gives_the_rows_of_a_whole_one(small: Fleet, result: Triage) -> None:
    split = triage([small.root], workers=1, split_records=10)  # 8 steps x 4 sites: 4 pieces
    assert split.rows == result.rows


def test_outputs_text_markdown_json(result: Triage) -> None:
    text = render(result, "text")
    assert "1 capture: unreadable capture" in text and "rank divergence at step 6" in text
    assert render(result, "markdown").startswith("# triage: 14 captures")
    data = json.loads(render(result, "json"))
    assert data["captures"] == 14 and len(data["groups"]) == len(result.groups)


def test_table_files_are_written_whole(result: Triage, tmp_path: Path) -> None:
    table = pq.read_table(write_table(result, tmp_path / "t.parquet"))
    assert table.num_rows == 14 and table.column_names[:3] == ["capture", "name", "host"]
    with open(write_table(result, tmp_path / "t.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["conclusion"] for r in rows] == [r["conclusion"] for r in result.rows]
    assert sorted(os.listdir(tmp_path)) == ["t.csv", "t.parquet"]  # no temporary left
    assert (tmp_path / "t.csv").stat().st_mode & 0o044 == 0o044  # readable as any new file


def test_capture_strings_are_escaped_in_each_output(small: Fleet, tmp_path: Path) -> None:
    hostile = tmp_path / "=cmd|x <b>.capture"
    shutil.copytree(next(p for p, k in small.kinds.items() if k == "clean"), hostile)
    manifest = json.loads((hostile / "manifest.json").read_text())
    manifest["process"]["host"] = "<script>alert(1)</script>\x1b[31m"
    (hostile / "manifest.json").write_text(json.dumps(manifest))
    result = triage([hostile], workers=1)
    with open(write_table(result, tmp_path / "t.csv"), newline="") as handle:
        row = next(csv.DictReader(handle))
    assert row["name"].startswith("'=cmd") and row["host"].startswith("<script>")
    assert "\x1b" not in render(result, "text") and "\\x1b" in render(result, "text")
    assert render(result, "text").startswith("triage: 1 capture, 1 group (")  # not "1 captures"
    made: list[str] = []
    index = write_html(result, tmp_path / "html", report=lambda c, out: made.append(str(out)))
    page = index.read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;" in page
    assert made == [str(tmp_path / "html" / "group-000.html")]


def test_the_command_line(small: Fleet, tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.parquet"
    assert main(["triage", str(small.root), "--workers", "1", "--format", "json",
                 "-o", str(out)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["captures"] == 14 and pq.read_table(out).num_rows == 14
    assert main(["triage", str(tmp_path / "nothing"), "--workers", "1"]) == 2
    assert "names no capture" in capsys.readouterr().err


def test_local_processes_give_the_rows_of_one_process(small: Fleet, result: Triage) -> None:
    assert triage([small.root], workers=2).rows == result.rows


def test_flat_rows_have_the_table_columns(result: Triage) -> None:
    from forensics.fleet.output import COLUMNS

    assert all(list(r) == list(COLUMNS) for r in flat_rows(result))


def test_known_issue_names_come_from_the_catalogue(small: Fleet) -> None:
    leak = [p for p, k in small.kinds.items() if k == "placeholder_leak"]
    result = triage(leak, workers=1)
    v1 = [r for r in result.rows if r["runner"] == "v1"]
    assert v1 and all(r["known"] == ["placeholder-reaches-input-ids"] for r in v1)
    assert all(r["conclusion"] == "known" for r in v1)
    assert any(g.title().endswith(": known issue placeholder-reaches-input-ids")
               for g in result.groups)
    clean = [p for p, k in small.kinds.items() if k == "clean"][:1]
    assert triage(clean, workers=1).rows[0]["known"] == []


def test_ray_missing_is_one_line_naming_the_extra(small: Fleet,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["triage", str(small.root), "--ray"]) == 2
    assert "pip install 'vllm-forensics[fleet]'" in capsys.readouterr().err


def test_progress_only_when_asked(small: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    one = [p for p, k in small.kinds.items() if k == "clean"][:1]
    triage(one, workers=1)
    assert capsys.readouterr().err == ""
    triage(one, workers=1, progress=True)
    assert "triage" in capsys.readouterr().err


def test_the_report_of_a_diverged_engine_says_so(result: Triage, tmp_path: Path) -> None:
    def report(capture: str, out: Path) -> None:
        out.write_text("<html><body class='r'><h1>report</h1></body></html>")

    write_html(result, tmp_path, report=report)
    (number,) = [i for i, g in enumerate(result.groups) if g.rows[0]["divergence"]]
    page = (tmp_path / f"group-{number:03d}.html").read_text()
    assert page.startswith("<html><body class='r'><p class=\"forensics-fleet\"")
    assert "Fleet triage: rank divergence at step 6: embedding input_ids[0]" in page
    others = [i for i in range(len(result.groups)) if i != number
              and (tmp_path / f"group-{i:03d}.html").exists()]
    assert others and all("Fleet triage" not in (tmp_path / f"group-{i:03d}.html").read_text()
                          for i in others)


def test_the_bundled_captures(tmp_path: Path) -> None:
    data = Path(__file__).resolve().parents[2] / "data"
    rows = {r["name"]: r for r in triage([data], workers=1).rows}
    incident_b = rows["incident-b-vocab-sentinel.capture"]
    assert incident_b["conclusion"] == "known"
    assert incident_b["known"] == ["vocab-size-sentinel-counted"]
    assert (incident_b["first"]["site"], incident_b["first"]["step"],
            incident_b["first"]["value"]) == ("async_output", 13, 248320)
    assert incident_b["crash_events"].startswith("cuda_assert x1 (first at step 14)")
    assert rows["incident-a-stale-prev-rows-refuted.capture"]["conclusion"] == "unexplained"
    assert rows["clean.capture"]["conclusion"] == "clean"
    assert all(r["divergence"] is None and not r["error"] for r in rows.values())


def _dies_on_crash_captures(path: str, start: int | None, stop: int | None,
                            window: tuple[tuple[int, int], ...] | None = None) -> bytes:
    """A task body whose process exits abruptly on the crash captures (a dead worker)."""
    if path.endswith("-crash.capture"):
        os._exit(1)
    from forensics.fleet.piece import replay_piece

    return replay_piece(path, start, stop, window)


def test_a_dead_local_worker_is_reported_not_lost(small: Fleet) -> None:
    from forensics.fleet.paths import find_captures
    from forensics.fleet.runners import run_local
    from forensics.fleet.tasks import plan
    from forensics.fleet.triage import decoded, merged

    tasks = plan(find_captures([small.root]))
    results = run_local(tasks, workers=2, piece=_dies_on_crash_captures)
    rows = merged(tasks, decoded(tasks, results))
    assert [r["capture"] for r in rows] == sorted(small.kinds)
    crashed = [r for r in rows if r["name"].endswith("-crash.capture")]
    assert crashed and all(r["error"].startswith("task failed: BrokenProcessPool") for r in crashed)


@pytest.fixture(scope="module")
def one_issue(tmp_path_factory: pytest.TempPathFactory) -> Triage:
    """Three V1 captures of one known issue by two kinds and two vLLM versions."""
    from forensics.fleet.generate import _single

    root = tmp_path_factory.mktemp("one-issue")
    fleet = Fleet(root)
    for i, kind in ((13, "stale_prev_row"), (8, "misattribution"), (21, "stale_prev_row")):
        _single(fleet, i, kind, 8, 3, 1 + i)
    return triage([root], workers=1)


def test_one_known_issue_is_one_group(one_issue: Triage) -> None:
    assert [r["known"] for r in one_issue.rows] == [["stale-prev-positions-row"]] * 3
    (group,) = one_issue.groups
    assert group.title() == ("3 captures on 3 hosts, vLLM 0.32.0 or 0.33.0, runner v1, "
                             "speculation mtp: known issue stale-prev-positions-row")


def test_facts_are_labelled_and_unknown_once(small: Fleet, tmp_path: Path) -> None:
    from forensics.fleet.signature import Group

    rows = [{"vllm": "unknown", "runner": None, "spec_method": "unknown", "host": "unknown"}]
    assert Group((1, "clean"), rows).facts() == \
        "vLLM unknown, runner unknown, speculation unknown"
    rows.append({"vllm": "0.33.0", "runner": "v2", "spec_method": "unknown", "host": "h"})
    assert Group((1, "clean"), rows).facts() == \
        "vLLM 0.33.0 (some unknown), runner v2 (some unknown), speculation unknown"


def test_markdown_and_html_are_tables_that_render_to_the_text(result: Triage,
                                                              tmp_path: Path) -> None:
    import html as html_lib
    import re

    import mistune

    text = render(result, "markdown")
    assert "\\`" not in text and "\n- " not in text
    page = str(mistune.create_markdown(escape=False, plugins=["table"])(text))
    assert page.count("<table>") == len(result.groups)
    cells = [html_lib.unescape(re.sub(r"<[^>]+>", "", c))
             for c in re.findall(r"<td>(.*?)</td>", page)]
    names = [r["name"] for r in result.rows]
    assert sorted(c for c in cells if c in names) == sorted(names)
    assert all("\\" not in c for c in cells)  # nothing escaped shows in the rendered cells
    index = write_html(result, tmp_path / "html", report=lambda c, out: None).read_text()
    assert index.count("<table>") == len(result.groups) and "<li>" not in index
    plain = render(result, "text")
    assert "capture" in plain.splitlines()[3] and "what it shows" in plain.splitlines()[3]
