"""Hostile input, round 9 (issue 38, "Hostile input, round 3"): what shows a capture (the
heatmap of ``plot`` and of the report, ``demo``'s index and table, the report's one line when a
cell fails) and the known-issue catalogue a user is given (``load_catalogue``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import forensics
from forensics.errors import CaptureFormatError, ForensicsError, one_line
from forensics.records import Record
from forensics.store.writer import write_capture

ROOT = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------ T46a: the heatmap's grid


def _wide_batch(rows: int, steps: int) -> list[Record]:
    """Embedding records over ``steps`` steps; step 0 holds a batch of ``rows`` requests whose
    last one reads an id past the embedding rows (its finding sits in row ``rows - 1``)."""
    out = []
    for step in range(steps):
        n = rows if step == 0 else 2
        ids = np.full(n, 5, dtype=np.int64)
        ids[-1] = 100 if step == 0 else 5
        out.append(Record("embedding", step, 0, {
            "input_ids": ids, "num_embeddings": 50, "req_ids": [f"r{i}" for i in range(n)],
            "cu_num_tokens": np.arange(1, n + 1, dtype=np.int32)}))
    return out


def test_a_heatmap_of_a_wide_batch_over_many_steps_is_a_bounded_grid() -> None:
    """A batch of 6,000 requests and 1,500 steps (a capture of a few hundred KB) made a grid of
    every row by every step, 9 million cells (20,000 by 2,000 drew in 4.5 GB and 39 s through
    matplotlib); the grid is now at most 512 row cells by 10,000 step cells, and the offending
    cell still shows in the last row cell, at step 0."""
    from forensics.present import plots
    from forensics.present.scene.heatmap import heatmap_data
    from forensics.present.svg import views

    result = forensics.replay(_wide_batch(6000, 1500), ["upstream"])
    assert result.findings["row"].tolist() == [5999]
    data = heatmap_data(result, "embedding", "upstream")
    assert data.grid.shape[0] <= 512 and data.grid.size <= 512 * 10_000, data.grid.shape
    assert data.grid[-1, 0] > 0 and int(np.count_nonzero(data.grid)) == 1
    assert data.rows[0] == 0 and data.rows[-1] <= 5999 and data.steps[0] == 0
    assert len(data.steps) == 1500  # steps stay one cell each below the cap
    svg = views.figure("heatmap", result, site="embedding", variant="upstream").to_svg()
    assert svg.count('class="cell open"') == 1
    ax = plots.plot_row_heatmap(result, site="embedding", variant="upstream")
    assert ax.images[0].get_array().shape[0] <= 512
    plots.close(ax)


# ------------------------------------------------------------------ T46b, T46c: a catalogue

CATALOGUE = """format = 1
[[entry]]
id = "x"
title = "t"
runner = "v1"
methods = "all"
versions = "all"
workaround = "w"
fix = {{pr = "none", release = "unknown"}}
signature = {{require = [{clause}]}}
"""

#: clauses whose values are of the wrong type: each was an internal error (AttributeError,
#: TypeError, pandas' ValueError) when matched, not one line when loaded
WRONG_TYPES = {
    "{event = {contains = 5}}": "event.contains",
    "{event = {contains = [1, 2]}}": "event.contains",
    "{event = {kind = {a = 1}}}": "event.kind",
    "{finding = {value_class = 5}}": "finding.value_class",
    "{finding = {variant = ['upstream']}}": "finding.variant",
    "{finding = {site = {a = 1}}}": "finding.site",
    "{fact = {name = {a = 1}, equals = 'v1'}}": "fact.name",
    "{fact = {name = 'runner', equals = {a = 1}}}": "fact.equals",
}


@pytest.fixture(scope="module")
def incident_b() -> object:
    return forensics.replay(forensics.load(ROOT / "data" / "incident-b-vocab-sentinel.capture"),
                            ["upstream", "patched"])


@pytest.mark.parametrize("clause", list(WRONG_TYPES))
def test_a_catalogue_clause_of_the_wrong_type_is_one_line_at_load(
        clause: str, tmp_path: Path, incident_b: object) -> None:
    from forensics.known import answer, load_catalogue

    path = tmp_path / "catalogue.toml"
    path.write_text(CATALOGUE.format(clause=clause), encoding="utf-8")
    with pytest.raises(CaptureFormatError) as raised:
        answer(incident_b, load_catalogue(path))  # type: ignore[arg-type]
    line = one_line(raised.value)
    assert str(path) in line and WRONG_TYPES[clause] in line and "fix the entry" in line


def test_a_catalogue_of_the_right_types_still_matches(tmp_path: Path, incident_b: object) -> None:
    from forensics.known import answer, load_catalogue

    path = tmp_path / "catalogue.toml"
    path.write_text(CATALOGUE.format(
        clause="{finding = {site = ['embedding', 'x'], variant = 'upstream'}}"), "utf-8")
    known = answer(incident_b, load_catalogue(path))  # type: ignore[arg-type]
    assert [m.matched for m in known.checked] == [True]


def test_a_catalogue_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    """``load_catalogue`` read its file whole with ``read_text``: a FIFO blocked it for ever (a
    device such as /dev/zero filled memory); it now reads through the capture's guarded reader."""
    import os

    fifo = tmp_path / "catalogue.toml"
    os.mkfifo(fifo)
    code = ("from forensics.known import load_catalogue\n"
            "from forensics.errors import ForensicsError, one_line\n"
            "import sys\n"
            "for path in sys.argv[1:]:\n"
            "    try:\n"
            "        load_catalogue(path)\n"
            "    except ForensicsError as exc:\n"
            "        print(one_line(exc))\n")
    done = subprocess.run([sys.executable, "-c", code, str(fifo), "/dev/zero"],
                          capture_output=True, text=True, timeout=120, check=False)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 2, done.stderr[-2000:]
    assert all("not a regular file" in line for line in lines), lines
    assert str(fifo) in lines[0] and "/dev/zero" in lines[1]


def test_a_catalogue_past_its_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    from forensics.known import load_catalogue

    path = tmp_path / "catalogue.toml"
    with path.open("wb") as out:
        out.truncate(17 << 20)  # sparse: nothing stored, 17 MiB claimed
    with pytest.raises(ForensicsError, match="at most"):
        load_catalogue(path)


# ------------------------------------------------------------------ T46d: demo's index and table

#: a capture name that a link reads as a script, and one holding terminal controls
SCRIPTED = "javascript:alert(1);x"


def test_the_demo_index_links_a_capture_named_like_a_script_as_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_demo(data_dir=...)`` linked each report as ``href='NAME.html'``: a capture named
    ``javascript:alert(1);x`` made a link that ran ``alert(1)`` when clicked (the index had no
    Content-Security-Policy); the link is now percent-encoded (a relative URL) and the index
    forbids scripts. Its verdict table escapes the names for the terminal."""
    from forensics.present import demo
    from forensics.present.report import write_report  # noqa: F401  (patched below)

    data = tmp_path / "data"
    data.mkdir()
    name = SCRIPTED + "\x1b[2J"
    write_capture(data / f"{name}.capture", _wide_batch(3, 2))
    monkeypatch.setattr(demo, "_write_report",
                        lambda capture, target: target.write_text("r") and "")
    out = tmp_path / "out"
    made = demo.run_demo(out, data_dir=data)
    index = (out / "index.html").read_text(encoding="utf-8")
    hrefs = [part.split("'", 1)[0] for part in index.split("href='")[1:]]
    assert len(hrefs) == 2 and all(":" not in h for h in hrefs), hrefs  # no scheme: a file
    assert "Content-Security-Policy" in index and "default-src 'none'" in index
    table = demo.format_table(made.rows)
    assert "\x1b" not in table and r"\x1b[2J" in table


# ------------------------------------------------------------------ T46e: a report's failing cell

def _failing_notebook(path: Path) -> Path:
    cells = [{"cell_type": "code", "source": "capture = None", "metadata": {"tags": ["parameters"]},
              "outputs": [], "execution_count": None},
             {"cell_type": "code", "source": "raise ValueError('no')", "metadata": {},
              "outputs": [], "execution_count": None}]
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                "cells": cells}), encoding="utf-8")
    return path


def test_a_failing_cell_names_two_captures_spelled_alike_apart(tmp_path: Path) -> None:
    """The report's one line when a cell raises named the capture's path raw: one folder named
    with a newline and one with a space there (or ESC and the text ``\\x1b``) printed the same
    line (T42a); the path is now written as inert text."""
    from forensics.present.report import write_report

    notebook = _failing_notebook(tmp_path / "fails.ipynb")
    lines = []
    for name in ("a\nb", "a b", "c\x1bd", "c\\x1bd"):
        capture = write_capture(tmp_path / f"{name}.capture", _wide_batch(3, 2))
        with pytest.raises(ForensicsError) as raised:
            write_report(capture, tmp_path / "r.html", notebook=notebook)
        lines.append(one_line(raised.value))
    assert all("ValueError: no" in line and "\x1b" not in line for line in lines)
    assert len(set(lines)) == 4, lines


# ------------------------------------------------------------------ T46f: the events table


def _keyed_events(count: int) -> list[dict[str, object]]:
    """``count`` events, each naming a key of its own."""
    return [{"kind": "note", "step": 0, "rank": 0, f"k{i}": i} for i in range(count)]


def test_the_reports_events_table_grows_linearly_in_events_of_keys_of_their_own(
        tmp_path: Path) -> None:
    """03_triage (and 01_stale_prev_rows) showed ``pd.DataFrame(summary["events"])``: a column
    per key any event held, a cell per event and key, so 400 events naming a key each were
    11.6 MB of HTML and 4,000 would be a gigabyte; the events table now has at most
    EVENT_COLUMNS columns and one more, and 4x the events make under 6x the page (15x before)."""
    from forensics.present.report import write_report

    sizes = []
    for count in (100, 400):
        capture = write_capture(tmp_path / f"e{count}.capture", _wide_batch(3, 2),
                                events=_keyed_events(count))
        page = write_report(capture, tmp_path / f"e{count}.html").read_text(encoding="utf-8")
        assert f"k{count - 1}" in page  # every event's every key is shown
        sizes.append(len(page))
    assert sizes[1] < 6 * sizes[0], sizes


def test_the_events_table_folds_keys_past_its_columns_into_one_cell() -> None:
    import pandas as pd

    events = [{"kind": "a", "more": "x", **{f"k{i}": i for i in range(20)}}, {"kind": "b"}]
    table = forensics.events_table(events)
    assert list(table.columns[:2]) == ["kind", "more"] and len(table.columns) == 13
    assert table.columns[-1] == "more (1)" and table.iloc[0, -1].startswith("k10: 10; k11: 11")
    assert table.iloc[1, 0] == "b" and pd.isna(table.iloc[1, 1]) and table.iloc[1, -1] == ""
    assert list(forensics.events_table([{"kind": "a"}]).columns) == ["kind"]


# ------------------------------------------------------------------ T46g: a table's every row


def test_a_styled_table_past_pandas_render_cap_shows_every_row() -> None:
    """pandas' Styler renders at most ``styler.render.max_elements`` (262,144) cells and cut
    the rows past them without a word: the report's grouped findings of 30,000 groups showed
    19,201 under "show all 30000 rows" and a line saying every finding is listed."""
    import pandas as pd

    from forensics.present.tables import GROUP_COLUMNS

    count = 26_000  # 11 columns shown: 286,000 cells
    groups = pd.DataFrame({column: [f"{column}{i}" for i in range(count)]
                           for column in GROUP_COLUMNS})
    groups["variant"], groups["site"] = "upstream", "embedding"
    groups["step"], groups["findings"] = range(count), 1
    page = forensics.findings_details(groups)
    assert page.count("<tr>") == count + 1 and f"req_id{count - 1}<" in page
    whole = forensics.styled(groups)._repr_html_()
    assert f"show all {count} rows" in whole and f"req_id{count - 1}<" in whole


# ------------------------------------------------------------------ T46h: the fleet's banner


def test_the_fleet_banner_over_a_report_is_styled_within_its_csp(tmp_path: Path) -> None:
    """``triage --html`` put a rank divergence's banner over a group's report with an inline
    ``style`` attribute, which the report's Content-Security-Policy (style elements by hash,
    no ``'unsafe-inline'``) refuses: the browser logged a violation and drew no red border. The
    banner is now styled by report.css, inside the page's hashed style element."""
    import base64
    import hashlib
    import re

    from forensics.fleet.output import _add_banner
    from forensics.present.report import write_report

    page = write_report(write_capture(tmp_path / "r.capture", _wide_batch(3, 2)),
                        tmp_path / "r.html")
    _add_banner(page, "rank divergence at step 6 <b>")
    text = page.read_text(encoding="utf-8")
    body = text[text.index("<body"):]
    assert not re.search(r"<[^>]*\sstyle=", body), "an inline style the CSP refuses"
    assert '<p class="forensics-fleet">Fleet triage: rank divergence at step 6 &lt;b&gt;' in body
    csp = re.search(r'Content-Security-Policy" content="([^"]*)"', text)
    assert csp is not None and "unsafe" not in csp.group(1)
    styles = re.findall(r"<style[^>]*>(.*?)</style>", text, re.S)
    hashed = [s for s in styles if "'sha256-" + base64.b64encode(hashlib.sha256(
        s.encode("utf-8")).digest()).decode() + "'" in csp.group(1)]
    assert any(".forensics-fleet" in style for style in hashed)


# ------------------------------------------------------------------ mathtext in a variant's name


@pytest.mark.parametrize("kind", ["heatmap", "timeline"])
def test_a_plot_of_a_diff_variant_named_with_dollars_draws(kind: str) -> None:
    """The heatmap's legend of resolved cells, and a timeline's of 200 steps or fewer, named
    the variant (``resolved by vllm+/tmp/$\\frac$.diff``) without escaping ``$``: matplotlib
    read it as mathtext and the draw was an internal ``ValueError``; it is now text, as the
    titles are."""
    from forensics.present import plots
    from tests.test_plots import wide_result

    result = wide_result(steps=100, rows=8)
    name = "vllm+/tmp/$\\frac$.diff"
    for frame in (result.findings, result.bounds):
        frame["variant"] = frame["variant"].replace("upstream", name)
    result.findings["resolved"] = True
    result.verdicts = {name: result.verdicts["upstream"], "patched": result.verdicts["patched"]}
    result.variants = [name, "patched"]
    ax = plots.plot(result, kind, site="embedding", variant=name)
    ax.figure.canvas.draw()
    assert f"resolved by {name}" in [t.get_text().replace("\\$", "$")
                                     for t in ax.get_legend().get_texts()]
    plots.close(ax)
