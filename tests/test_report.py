"""forensics report: self-contained offline HTML, code hidden, capture strings escaped.

The browser tests open the report in headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven with selenium): no console error, no request leaves the file, the
verdict table is there, every image decodes, the table and figures are not blank, and a request
id ``<script>alert(1)</script>`` does not run.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pytest

from forensics.errors import CaptureFormatError, ConfigurationError
from forensics.present.report import (
    NotebookExecutionError,
    UnsafeReportError,
    available_notebooks,
    find_notebook,
    write_report,
)
from forensics.records import Record
from tests.conftest import DATA

INCIDENT = DATA / "incident-b-vocab-sentinel.capture"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
XSS_ID = "<script>alert(1)</script>"
XSS_IMG = '<img src=x onerror="window.__pwned=1">'
NETWORK_REF = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


@pytest.fixture(scope="module")
def incident_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not INCIDENT.is_dir():
        pytest.fail(f"bundled capture {INCIDENT} is missing (regenerate data/)")
    return write_report(INCIDENT, tmp_path_factory.mktemp("report") / "incident-b.html")


def xss_records() -> list[Record]:
    """Embedding records whose request ids are HTML; the bad id sits in their rows."""
    records = []
    for step in range(3):
        ids = np.array([5, 6, 248320 if step == 1 else 7, 8], dtype=np.int64)
        records.append(Record("embedding", step, 0, {
            "input_ids": ids, "num_embeddings": 248320,
            "req_ids": [XSS_IMG, XSS_ID], "cu_num_tokens": np.array([2, 4], dtype=np.int32)}))
    return records


@pytest.fixture(scope="module")
def xss_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from forensics.store.writer import write_capture

    root = tmp_path_factory.mktemp("xss")
    capture = write_capture(root / "xss.capture", xss_records(),
                            manifest={"notes": XSS_ID})
    return write_report(capture, root / "xss.html")


# ------------------------------------------------------------------ the HTML itself


def test_report_is_self_contained(incident_report: Path) -> None:
    html = incident_report.read_text()
    assert not re.search(r"<\s*script", html, re.IGNORECASE)
    assert not NETWORK_REF.search(html), NETWORK_REF.search(html)
    assert "Content-Security-Policy" in html and "script-src 'none'" in html
    figures = svg_figures(html)
    assert len(figures) >= 4 and "data:image/png" not in html  # drawn as SVG, no matplotlib
    for figure in figures:
        assert figure.tag == "{http://www.w3.org/2000/svg}svg"
        assert not [e for e in figure.iter() if e.tag.endswith("script")]
    assert "incident-b-vocab-sentinel" in html


def svg_figures(html: str) -> list[Any]:
    """The report's SVG figures, each decoded from its data: URI and parsed as XML."""
    import base64
    import xml.etree.ElementTree as ET

    return [ET.fromstring(base64.b64decode(data))
            for data in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)]


def test_a_report_imports_no_matplotlib(tmp_path: Path) -> None:
    """The report's figures are SVG from forensics.present.svg: its process never imports
    matplotlib (its import and layout cost a small capture's report more than the replay)."""
    import subprocess
    import sys

    script = ("import sys\n"
              "from forensics.present.report import write_report\n"
              f"write_report({str(INCIDENT)!r}, {str(tmp_path / 'b.html')!r})\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600, check=True).stdout
    assert out.strip() == "[]", out
    assert len(svg_figures((tmp_path / "b.html").read_text())) >= 4


def _notebook(tmp_path: Path, *sources: str) -> Path:
    """A notebook with a parameters cell for ``capture`` and the given code cells."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("capture = ''", metadata={"tags": ["parameters"]}),
                *(nbformat.v4.new_code_cell(source) for source in sources)]
    path = tmp_path / "figures.ipynb"
    nbformat.write(nb, str(path))
    return path


def test_a_notebook_that_draws_with_pyplot_still_gets_its_figure(tmp_path: Path) -> None:
    notebook = _notebook(tmp_path, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 4]);")
    html = write_report(INCIDENT, tmp_path / "plt.html", notebook=notebook).read_text()
    assert html.count("data:image/png;base64,") == 1


def test_the_callers_open_figures_stay_out_of_the_report_and_open(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = plt.figure()  # the caller's, current: the notebook's plt.plot must not draw on it
    try:
        notebook = _notebook(tmp_path, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 4]);")
        html = write_report(INCIDENT, tmp_path / "own.html", notebook=notebook).read_text()
        assert html.count("data:image/png;base64,") == 1
        assert plt.fignum_exists(mine.number) and not mine.axes
    finally:
        plt.close(mine)


def test_the_callers_main_module_is_kept(tmp_path: Path) -> None:
    """IPython's shell installs its own ``__main__`` (no ``__spec__``); a local triage's
    spawned workers in the same process then failed to start."""
    import sys

    main = sys.modules["__main__"]
    write_report(INCIDENT, tmp_path / "main.html", notebook=_notebook(tmp_path, "x = 1"))
    assert sys.modules["__main__"] is main


def test_a_figure_that_is_a_cells_last_expression_is_shown_once(tmp_path: Path) -> None:
    notebook = _notebook(tmp_path, "import forensics\nfrom forensics import plots\n"
                                   "result = forensics.replay(capture)\n"
                                   "plots.plot_verdict_matrix(result)")
    html = write_report(INCIDENT, tmp_path / "last.html", notebook=notebook).read_text()
    assert len(svg_figures(html)) == 1 and "&lt;forensics" not in html and "Figure object" \
        not in html


def test_code_is_hidden_unless_asked(incident_report: Path, tmp_path: Path) -> None:
    assert "forensics.replay(" not in incident_report.read_text()
    assert '<div class="jp-CodeMirrorEditor' not in incident_report.read_text()
    capture = _write_small_capture(tmp_path / "s.capture")
    notebook = _notebook(tmp_path, "import forensics\nprint(len(forensics.load(capture)))")
    html = write_report(capture, tmp_path / "code.html", notebook=notebook,
                        with_code=True).read_text()
    assert '<div class="jp-CodeMirrorEditor' in html and "forensics" in html and "load" in html


def test_capture_strings_are_escaped(xss_report: Path) -> None:
    html = xss_report.read_text()
    assert "<script" not in html.lower()
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, "the request id reached the report"


def _write_small_capture(path: Path) -> Path:
    from forensics.store.writer import write_capture

    return write_capture(path, xss_records()[:2])


def test_unknown_notebook_lists_the_available_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="03_triage"):
        find_notebook("bogus")
    assert {"00_quickstart", "01_stale_prev_rows", "02_vocab_sentinel",
            "03_triage"} <= set(available_notebooks())
    assert find_notebook("03_triage").name == "03_triage.ipynb"
    with pytest.raises(ConfigurationError, match="does not exist"):
        find_notebook(tmp_path / "nope.ipynb")


def test_missing_capture_fails_before_running_anything(tmp_path: Path) -> None:
    with pytest.raises(CaptureFormatError, match="nope.capture"):
        write_report(tmp_path / "nope.capture", tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def _notebook(tmp_path: Path, body: str) -> Path:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("capture = None")
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path = tmp_path / "mine.ipynb"
    nbformat.write(nb, path)
    return path


def test_a_failing_notebook_names_the_cell_and_error(tmp_path: Path) -> None:
    capture = _write_small_capture(tmp_path / "s.capture")
    notebook = _notebook(tmp_path, "raise ValueError('boom')")
    with pytest.raises(NotebookExecutionError, match="ValueError: boom"):
        write_report(capture, tmp_path / "r.html", notebook=notebook)


def test_raw_script_output_is_refused(tmp_path: Path) -> None:
    capture = _write_small_capture(tmp_path / "s.capture")
    notebook = _notebook(tmp_path, "from IPython.display import HTML\n"
                                   "HTML('<script>window.x = 1</script>')")
    with pytest.raises(UnsafeReportError, match="script"):
        write_report(capture, tmp_path / "r.html", notebook=notebook)


def test_cli_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.cli import main

    capture = _write_small_capture(tmp_path / "s.capture")
    notebook = _notebook(tmp_path, "print('records:', len(__import__('forensics').load(capture)))")
    out = tmp_path / "sub" / "r.html"
    assert main(["report", str(capture), "-o", str(out), "--notebook", str(notebook)]) == 0
    assert str(out) in capsys.readouterr().out
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "records: 2" in html
    assert main(["report", str(capture), "-o", str(out), "--notebook", "bogus"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "03_triage" in err


# ------------------------------------------------------------------ in headless Chromium


def _need_browser() -> None:
    if not (shutil.which("chromium") or Path(CHROMIUM).exists()) or \
            not (shutil.which("chromedriver") or Path(CHROMEDRIVER).exists()):
        pytest.skip("headless Chromium is not installed: apt-get install -y chromium "
                    "chromium-driver (Debian packages 'chromium' and 'chromium-driver')")


@pytest.fixture
def browser(tmp_path: Path) -> Any:
    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(executable_path=shutil.which("chromedriver") or CHROMEDRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


def _open(driver: Any, report: Path) -> None:
    driver.get("about:blank")
    driver.get_log("performance")  # drop what the browser's start page did
    driver.get_log("browser")
    driver.get(report.resolve().as_uri())
    driver.execute_script("return document.readyState")


def _network(driver: Any) -> tuple[list[str], list[str]]:
    """(URLs requested that are not the file itself or data:, failed loads)."""
    requested, failed = [], []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message.get("method") == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            if not url.startswith(("file:", "data:")):
                requested.append(url)
        elif message.get("method") == "Network.loadingFailed":
            failed.append(f"{params.get('errorText')} ({params.get('blockedReason')})")
    return requested, failed


def _not_blank(png: bytes) -> bool:
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    return pixels.size > 0 and pixels.std() > 8 and len(np.unique(pixels)) > 8


def test_report_renders_in_chromium(browser: Any, incident_report: Path) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, incident_report)
    console = browser.get_log("browser")
    assert not [e for e in console if e["level"] in ("SEVERE", "ERROR")], console
    requested, failed = _network(browser)
    assert not requested, f"the report loaded from the network: {requested}"
    assert not failed, failed

    table = browser.find_element(By.XPATH, "//h2[starts-with(@id, 'Verdicts')]"
                                           "/following::table[1]")
    text = table.text
    assert "upstream" in text and "patched" in text and "violation" in text
    images = browser.find_elements(By.TAG_NAME, "img")
    assert len(images) >= 4
    for image in images:
        assert image.get_attribute("src").startswith("data:image/")
        assert int(browser.execute_script("return arguments[0].naturalWidth", image)) > 0
    for box in [table, *images]:
        browser.execute_script("arguments[0].scrollIntoView()", box)
        assert _not_blank(box.screenshot_as_png), box.tag_name


def test_a_script_request_id_does_not_run(browser: Any, xss_report: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    _open(browser, xss_report)
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert browser.execute_script("return window.__pwned === undefined")
    body = browser.find_element(By.TAG_NAME, "body").text
    assert XSS_ID in body, "the id is shown as text"
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    requested, failed = _network(browser)
    assert not requested and not failed


# ------------------------------------------------------------------ the answer first (issue 16)

LEAK = DATA / "placeholder-leak.capture"


@pytest.fixture(scope="module")
def leak_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    import forensics

    variants = ["patched", "upstream"]
    out = write_report(LEAK, tmp_path_factory.mktemp("leak") / "leak.html", variants=variants)
    return out, forensics.replay(LEAK, variants=variants)


def test_report_opens_with_the_conclusion_and_lists_every_finding(browser: Any,
                                                                  leak_report: Any) -> None:
    import pandas as pd
    from selenium.webdriver.common.by import By

    from forensics.present.conclusion import conclude
    from forensics.present.report import header_data
    from forensics.present.tables import grouped_findings

    report, result = leak_report
    _open(browser, report)
    assert not [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    after_title = browser.find_element(By.XPATH, "//h1/following-sibling::*[1]")
    assert after_title.get_attribute("id") == "conclusion" and after_title.tag_name == "ul"
    lines = [li.text for li in after_title.find_elements(By.TAG_NAME, "li")]
    assert lines == header_data(result, conclude(result))["lines"]
    # vLLM 0.33.0 (the capture's) clamps the -1 to token 0: the embedding reads it in range
    assert lines[0].startswith("patched leaves prepare_input_ids in violation")
    verdicts = browser.find_element(By.ID, "verdicts")
    assert verdicts.location["y"] + verdicts.size["height"] < 1000, "verdicts below the fold"
    assert "prepare_input_ids violation violation" in verdicts.text
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "Triage of an incident" not in body  # the notebook's introduction stays out
    groups = grouped_findings(result)
    assert len(result.findings) > 30
    sections = browser.find_elements(By.CSS_SELECTOR, "details.forensics-findings")
    assert len(sections) == len(groups.groupby(["variant", "site"]))
    rows = [row for section in sections for row in
            section.find_elements(By.XPATH, ".//tbody/tr")]
    assert len(rows) == len(groups)

    def cells(row: Any) -> list[str]:
        return [td.get_attribute("textContent").strip()
                for td in row.find_elements(By.TAG_NAME, "td")]

    assert sum(int(cells(r)[3]) for r in rows) == len(result.findings)
    in_sections = [part for _, part in groups.groupby(["variant", "site"], sort=False)]
    for row, group in zip(rows, pd.concat(in_sections).itertuples(index=False), strict=True):
        assert cells(row)[:2] == [str(group.step), str(group.row)]
        assert cells(row)[7] == group.values
    text = " ".join(s.get_attribute("textContent") for s in sections)
    assert "nan" not in text.lower() and "<NA>" not in text
    summary = sections[0].find_element(By.TAG_NAME, "summary").text
    assert summary.startswith("patched · prepare_input_ids: ") and " findings in " in summary


def test_report_layout_puts_the_answer_and_pictures_first(leak_report: Any) -> None:
    """Conclusion, verdict table, contents, next steps, summary by site, pictures, then the
    sections; every contents link
    has its target; findings collapsed with counts; no Python repr; wide tables scroll."""
    html = leak_report[0].read_text()
    order = [html.index(mark) for mark in (
        'id="conclusion"', 'id="verdicts"', 'id="contents"', 'id="What-to-look-at-next"',
        'id="Summary-by-site"', "<img", 'id="The-first-violation"', 'id="Findings"',
        '<details class="forensics-findings"', 'id="What-was-captured"')]
    assert order == sorted(order), order
    targets = re.findall(r'<a href="#([^"]+)">', html.split('id="contents"')[1].split("</nav>")[0])
    assert len(targets) >= 6
    for target in targets:
        assert f'id="{target}"' in html.replace("&#39;", "'"), target
    assert not re.search(r"&lt;Capture|<Capture|object at 0x", html)
    assert "overflow-x: auto" in html
    summaries = re.findall(r'class="forensics-findings"><summary>([^<]*)</summary>', html)
    assert summaries and all(re.search(r": \d+ findings in \d+ groups", s) for s in summaries)


def test_report_body_has_no_empty_conclusion_section(leak_report: Any) -> None:
    """The conclusion is lifted into the header: the notebook's own 'Conclusion' heading and
    its boilerplate stay out of the body, and each first violation is said once per variant."""
    html = leak_report[0].read_text()
    assert "Computed from the replay" not in html
    assert not re.search(r"<h2[^>]*>\s*Conclusion", html)
    assert "patched: First violation" not in html and "upstream: First violation" not in html
    assert html.count("First violation (upstream)") == 2  # the header, the first-violation cell
    assert html.count("First violation (patched)") == 1  # the same place: the header says once


def test_a_relative_diff_variant_reaches_the_notebook_as_its_absolute_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The notebook runs in its own folder: ``--variant vllm+data/patches/x.diff`` given from
    the repository root must reach it as a variant whose diff exists there too (named by its
    file name and digest: the report is made to be shared)."""
    import forensics.present.report as report
    from forensics.variants import registry

    seen: list[list[str] | None] = []
    paths: list[str] = []

    def run(notebook: Path, capture: Path, workdir: Path, variants: Any = None,
            diffs: Any = None) -> Any:
        seen.append(variants)
        paths.append(diffs[variants[1]])
        raise report.NotebookExecutionError("stop here")

    monkeypatch.setattr(report, "execute_notebook", run)
    monkeypatch.chdir(DATA.parent)
    with pytest.raises(report.NotebookExecutionError):
        write_report(INCIDENT, tmp_path / "r.html",
                     variants=["upstream", "vllm+data/patches/vocab-guard.diff"])
    upstream, diff = seen[0] or []
    assert upstream == "upstream" and diff.startswith("vllm+vocab-guard.diff@")
    assert Path(paths[0]) == DATA / "patches" / "vocab-guard.diff"
    assert registry.find(diff) is None  # known only to the notebook, never registered
    with pytest.raises(ConfigurationError, match="no diff file at 'nowhere.diff'"):
        write_report(INCIDENT, tmp_path / "r.html", variants=["vllm+nowhere.diff"])
    assert len(seen) == 1  # refused before the notebook ran


def test_report_variants_and_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    html = write_report(INCIDENT, tmp_path / "b.html", variants=["patched"],
                        progress=True).read_text()
    err = capsys.readouterr().err
    assert "report: running notebook 03_triage" in err and "report: wrote" in err
    # the fix alone judges no crash (T59f): the conclusion says so first, then the fix's verdict
    assert re.search(r'id="conclusion">\s*<li>Not judged: the capture holds a crash, but no '
                     r'variant of the engine', html)
    assert re.search(r'<li>patched leaves no site in violation', html)
    assert "<script" not in html.lower() and "Content-Security-Policy" in html


def test_a_3000_step_report_renders_readable_plots(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    import forensics

    capture = forensics.simulate("placeholder-leak", steps=3000, seed=0,
                                 out=tmp_path / "leak3k.capture")
    report = write_report(capture, tmp_path / "leak3k.html")
    _open(browser, report)
    assert not [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert browser.find_element(By.XPATH, "//h1/following-sibling::*[1]").get_attribute(
        "id") == "conclusion"
    images = browser.find_elements(By.TAG_NAME, "img")
    assert len(images) >= 5  # verdicts, then timeline, heatmap, histogram per flagged site
    for i, image in enumerate(images):
        assert int(browser.execute_script("return arguments[0].naturalWidth", image)) > 0
        browser.execute_script("arguments[0].scrollIntoView()", image)
        png = image.screenshot_as_png
        (tmp_path / f"shot-{i}.png").write_bytes(png)  # kept for a look by eye
        assert _not_blank(png)


def test_a_report_figure_is_drawn_once_with_the_pixels_savefig_gives(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The notebook's figures become PNGs from one draw (savefig draws a laid-out figure
    twice), pixel for pixel what savefig writes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from PIL import Image

    from forensics.present.notebook_exec import figure_png

    def figure() -> Figure:
        fig, ax = plt.subplots(figsize=(3, 2), layout="constrained")
        ax.plot([0, 1, 2], [248320, 5, 7], label="input_ids")
        ax.set_title("a title\non two lines")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2))
        return fig

    saved = io.BytesIO()
    figure().savefig(saved, format="png")
    fig = figure()
    draws: list[int] = []
    draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, r: (draws.append(1), draw(self, r))[1])
    ours = figure_png(fig)
    plt.close("all")
    assert len(draws) == 1
    assert ours.startswith(b"\x89PNG")
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(ours)).convert("RGBA")),
                          np.asarray(Image.open(saved).convert("RGBA")))
