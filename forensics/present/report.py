"""HTML reports: run an investigation notebook against a capture, write self-contained HTML.

:func:`write_report` executes a notebook (:mod:`forensics.present.notebook_exec`, in a child
process whose every cell has a deadline enforced from outside:
:mod:`forensics.present.notebook_process`; its ``parameters`` cell is followed by one setting
``capture = "<absolute path>"``), then writes it as one page (:mod:`forensics.present.report_html`,
no nbconvert): no require.js, MathJax, Mermaid, widgets or JavaScript outputs, and a
Content-Security-Policy that forbids every script and every remote load. Figures (SVG, drawn
by :mod:`forensics.present.svg`; PNG for a notebook that draws with pyplot) are embedded as
``data:`` URIs (an SVG image runs no script and loads nothing), code is hidden unless
``with_code``, and stderr output (warnings) is left out.
The ``variants`` parameter of the notebook gets the report's ``variants`` when given.

The answer first: the printed text of the cell tagged ``conclusion`` is lifted into the header,
as the first paragraph after the title (``<p id="conclusion">``), and that cell leaves the body;
cells tagged ``report-skip`` (a notebook's own introduction) are left out of the report.
A long report stays short: the sections of :data:`LEAD_SECTIONS` ("What to look at next",
"Summary by site") follow the header, a table of more than
:data:`forensics.present.tables.SHOWN_ROWS` rows shows its first rows with every row in a
``<details>``, and a cell's figures past its first are folded the same way (no script).

Escaping: strings from a capture reach the HTML as text outputs (escaped by
:mod:`forensics.present.report_html`), as tables (escaped by
:func:`forensics.present.tables.styled`) or through the header; the notebooks never emit raw HTML
built from capture strings, and
:func:`write_report` refuses to write a report holding a ``<script`` element.

Where notebooks come from: ``notebook`` is a name (``03_triage``) looked up in the repository's
``notebooks/`` folder next to the package (a checkout or an editable install, how this project
is installed), then in ``forensics/present/templates/`` (a packaged copy, when a distribution ships
one); or a path to any ``.ipynb`` with a ``parameters`` cell defining ``capture``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from forensics.atomic import real_output, refuse_inside_captures, user_path, write_text_atomically
from forensics.budget import CHILD_TIMEOUT_ENV
from forensics.errors import ConfigurationError, ForensicsError, MissingDependencyError, reason
from forensics.escaping import terminal
from forensics.present.incident import refuse_other_capture

PACKAGE_DIR = Path(__file__).resolve().parents[1]
TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
REPO_NOTEBOOKS = PACKAGE_DIR.parent / "notebooks"
DEFAULT_NOTEBOOK = "03_triage"
_SCRIPT_TAG = re.compile(r"<\s*script\b", re.IGNORECASE)
#: elements a report's body never holds: they would run, load, redirect or submit
_FOREIGN_TAG = re.compile(r"<\s*(script|meta|base|link|iframe|frame|object|embed|form|svg|math"
                          r"|audio|video|source|portal)\b", re.IGNORECASE)
_STYLE = re.compile(r"<style[^>]*>(.*?)</style>", re.IGNORECASE | re.DOTALL)
#: a pandas Styler's style element: rules on its own table id only
_TABLE_STYLE = re.compile(r"\s*(#T_\w+[\w .#-]*\{[^{}<]*\}\s*)*")
_NO_STYLE = "style-src 'none'"
CONCLUSION_TAG, SKIP_TAG = "conclusion", "report-skip"
#: sections a report shows first, right under its header, in this order (:func:`lead_sections`)
LEAD_SECTIONS = ("What to look at next", "Summary by site")
#: the mimetype of the header data a notebook's conclusion cell displays (:func:`show_header`)
HEADER_MIME = "application/vnd.forensics.header+json"


class NotebookExecutionError(ForensicsError, RuntimeError):
    """The report's notebook raised while running against a capture."""


class UnsafeReportError(ForensicsError, RuntimeError):
    """The exported HTML would contain a script element (a notebook emitted raw HTML)."""


def notebook_dirs() -> list[Path]:
    """Folders searched for a notebook given by name, in order."""
    return [REPO_NOTEBOOKS, TEMPLATE_DIR]


def available_notebooks() -> list[str]:
    """Names of the notebooks that :func:`find_notebook` can find."""
    names = {p.stem for d in notebook_dirs() if d.is_dir() for p in d.glob("*.ipynb")}
    return sorted(names)


def find_notebook(notebook: str | Path) -> Path:
    """Resolve a notebook name (``03_triage``) or path to an existing ``.ipynb`` file.

    Returns:
        The notebook's path.
    Raises:
        ConfigurationError: no such notebook; the message lists the available names.
    """
    text = str(notebook)
    if text.endswith(".ipynb") or "/" in text or "\\" in text:
        path = user_path(text)
        if path.is_file():
            return path.resolve()
        raise ConfigurationError(f"notebook {text!r} does not exist; give a path to an .ipynb "
                                 f"or one of {available_notebooks()}")
    for folder in notebook_dirs():
        path = folder / f"{text}.ipynb"
        if path.is_file():
            return path
    raise ConfigurationError(
        f"unknown notebook {text!r}; expected one of {available_notebooks()} (searched "
        f"{[str(d) for d in notebook_dirs()]}) or a path to an .ipynb")


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(
            f"writing a report needs {module!r}; install the notebooks extra: "
            f"pip install 'vllm-forensics[notebooks]'") from None


def _capture_path(capture: Any) -> Path:
    """The capture's directory, after checking that it loads (bad input fails here, fast)."""
    import forensics

    path = user_path(getattr(capture, "path", capture)).resolve()
    forensics.load(path)
    return path


def execute_notebook(notebook: Path, capture: Path, workdir: Path,
                     variants: list[str] | None = None,
                     diffs: Mapping[str, str] | None = None) -> Any:
    """Run ``notebook`` with ``capture`` (and ``variants`` when given) as its parameters, in
    a child process of its own process group (:mod:`forensics.present.notebook_process`:
    each cell has a deadline enforced from outside), in the notebook's folder, its views
    drawn as SVG (:func:`forensics.present.svg.collecting`: no matplotlib); return the executed
    nbformat node. ``diffs``: the diffs ``variants`` names by their shared names, known there
    only (:func:`forensics.variants.diffs_named`). ``workdir``: the private folder the cells'
    temporary files go to (``tempfile``'s folder and ``TMPDIR`` there), the caller's to remove.

    Raises:
        NotebookExecutionError: a cell raised, ran past its deadline (``timed out after N s``:
            the child's group was killed) or ended the child; the message names the cell.
    """
    from forensics.errors import DeadlineError
    from forensics.escaping import terminal
    from forensics.present.notebook_exec import CellError, inject_parameters, read_notebook
    from forensics.present.notebook_process import NotebookProcessError, execute_in_child

    _require("IPython")
    nb = read_notebook(notebook)
    inject_parameters(nb, _parameters(capture, variants))
    _import_once()
    shown = terminal(capture)  # a name holding a newline or ESC never reads as another's
    try:
        return execute_in_child(nb, notebook.parent, lambda: _around(diffs or {}, workdir))
    except CellError as exc:
        raise NotebookExecutionError(
            f"notebook {notebook.name!r} failed on capture '{shown}' in cell "
            f"{exc.number}: {terminal(exc.ename)}: {terminal(exc.evalue)}; open "
            f"{terminal(notebook)} with "
            f"capture = '{shown}' to see the traceback") from None
    except (DeadlineError, NotebookProcessError) as exc:
        why = f" ({CHILD_TIMEOUT_ENV} sets the deadline of one cell)" if isinstance(
            exc, DeadlineError) else ""
        raise NotebookExecutionError(
            f"notebook {notebook.name!r} on capture '{shown}': {reason(exc)}; its processes were "
            f"ended{why}") from None


@contextlib.contextmanager
def _around(diffs: Mapping[str, str], workdir: Path) -> Iterator[None]:
    """What a report's notebook runs inside: its views drawn as SVG, ``diffs`` known by their
    shared names, its temporary files in ``workdir`` (:func:`_temporary_files_in`)."""
    from forensics.present import svg
    from forensics.present.svg import views
    from forensics.variants import diffs_named

    with svg.collecting(views.draw), diffs_named(diffs), _temporary_files_in(workdir):
        yield


@contextlib.contextmanager
def _temporary_files_in(workdir: Path) -> Iterator[None]:
    """``tempfile``'s folder and ``TMPDIR`` set to ``workdir`` in the block (what a cell, or a
    process it starts, makes with ``tempfile`` goes there and is removed with it), then
    restored."""
    before_dir, before_env = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir, os.environ["TMPDIR"] = str(workdir), str(workdir)
    try:
        yield
    finally:
        tempfile.tempdir = before_dir
        if before_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before_env


#: modules every bundled notebook uses (replay, conclusion, styled tables)
WARM_MODULES = ("forensics.replaying", "forensics.present.conclusion",
                "forensics.present.tables", "pandas.io.formats.style")


def _import_once() -> None:
    """Import :data:`WARM_MODULES` in this process, once: each report's notebook runs in a
    child forked from it, whose own imports end with it (a quarter of a report's time when
    reports are written one after another)."""
    import importlib

    for name in WARM_MODULES:
        importlib.import_module(name)


def _parameters(capture: Path, variants: list[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {"capture": str(capture)}
    if variants:
        params["variants"] = list(variants)
    return params


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def header_data(result: Any, conclusion: Any) -> dict[str, Any]:
    """What the report's header shows: the conclusion as short lines ("not explained" first
    when so, one per variant's verdict, the known-issue match, the first violation, the silent
    inputs, another vLLM version, the capture's facts) and the verdict
    table (site -> variant -> verdict)."""
    from forensics.present.capture_facts import facts_sentence, version_sentence

    known = conclusion.known
    lines = [known.lead() if known is not None else ""]
    lines += [conclusion.verdict_sentence(v) for v in conclusion.variants]
    lines += conclusion.not_judged_sentences()  # what no variant (or some) could judge
    lines += [known.known_sentence() if known is not None else ""]  # the known-issue match
    lines += [conclusion.first_sentence(conclusion.baseline), conclusion.silent_sentence()]
    lines.append(version_sentence(conclusion.facts, conclusion.variants))
    lines.append(facts_sentence(conclusion.facts))
    variants = list(result.variants)
    sites = list(dict.fromkeys(s for v in variants for s in result.verdicts[v]))
    return {"lines": [line for line in lines if line], "variants": variants,
            "verdicts": [{"site": s, "verdicts": [result.shown_verdict(v, s) for v in
                                                  variants]} for s in sites]}


def show_header(result: Any, conclusion: Any) -> None:
    """Display :func:`header_data` in a notebook cell (the report lifts it into its header)."""
    from IPython.display import display

    display({HEADER_MIME: header_data(result, conclusion)}, raw=True)


def take_conclusion(nb: Any) -> tuple[str, dict[str, Any]]:
    """The printed text and the :func:`header_data` of the cells tagged ``conclusion``; those
    cells and the ones tagged ``report-skip`` are removed from ``nb``."""
    outputs = [o for cell in nb.cells if CONCLUSION_TAG in _tags(cell)
               for o in cell.get("outputs", [])]
    texts = [o.get("text", "") for o in outputs
             if o.get("output_type") == "stream" and o.get("name") == "stdout"]
    header: dict[str, Any] = next((o["data"][HEADER_MIME] for o in outputs
                   if HEADER_MIME in o.get("data", {})), {})
    nb.cells = [c for c in nb.cells if not {CONCLUSION_TAG, SKIP_TAG} & set(_tags(c))]
    return "".join(texts).strip(), dict(header)


def contents(nb: Any) -> list[dict[str, str]]:
    """The report's contents: each ``## `` heading of ``nb``'s markdown cells, with the anchor
    its heading gets (:func:`forensics.present.report_html.anchor`: spaces as ``-``)."""
    from forensics.present.report_html import anchor

    found = []
    for cell in nb.cells:
        if cell.get("cell_type") != "markdown":
            continue
        for line in cell.source.splitlines():
            if line.startswith("## "):
                title = line[3:].strip()
                found.append({"title": title, "id": anchor(title)})
    return found


def _section_title(cell: Any) -> str | None:
    """The title of the first ``## `` heading of a markdown cell, or None."""
    if cell.get("cell_type") != "markdown":
        return None
    source = "".join(cell.get("source", ""))
    return next((line[3:].strip() for line in source.splitlines() if line.startswith("## ")),
                None)


def lead_sections(nb: Any) -> None:
    """Move the sections titled :data:`LEAD_SECTIONS` (a ``## `` heading cell and the cells up
    to the next one) to the front of ``nb``, so a long report opens with the next steps and the
    summary; a notebook without them is left as it is."""
    sections: list[list[Any]] = [[]]
    for cell in nb.cells:
        if _section_title(cell) is not None:
            sections.append([])
        sections[-1].append(cell)
    titled = {_section_title(part[0]): part for part in sections[1:]}
    lead = [titled[title] for title in LEAD_SECTIONS if title in titled]
    rest = [part for part in sections if not any(part is chosen for chosen in lead)]
    nb.cells = [cell for part in lead + rest for cell in part]


def _strip_for_report(nb: Any) -> Any:
    """Drop stderr streams (warnings) and widget state from an executed notebook."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            cell.outputs = [o for o in cell.get("outputs", [])
                            if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
            for output in cell.outputs:
                _escape_text_output(output)
    return nb


def _escape_text_output(output: Any) -> None:
    """Control characters of a text output (a printed line, a ``text/plain`` repr) shown as
    escapes (:func:`forensics.escaping.inert`: a printed line may hold values escaped
    already), line by line: the template escapes markup."""
    from forensics.escaping import inert

    def lines(text: Any) -> str:
        text = "".join(text) if isinstance(text, list) else str(text)
        return "\n".join(inert(line) for line in text.split("\n"))

    if output.get("output_type") == "stream":
        output["text"] = lines(output.get("text", ""))
    data = output.get("data") or {}
    if "text/plain" in data:
        data["text/plain"] = lines(data["text/plain"])


def seal(body: str, capture: str) -> str:
    """``body`` with its Content-Security-Policy allowing exactly its own style elements (by
    hash).

    Raises:
        UnsafeReportError: the body holds an element that runs, loads, redirects or submits, or
            a style element that is not ours (a notebook emitted raw HTML).
    """
    import base64
    import hashlib

    head, _, rest = body.partition("<body")
    foreign = _FOREIGN_TAG.search(rest)
    strange = [m for m in _STYLE.finditer(rest) if not _TABLE_STYLE.fullmatch(m.group(1))]
    if foreign or strange or _NO_STYLE not in head:
        what = foreign.group(0) if foreign else "<style>" if strange else "no CSP"
        raise UnsafeReportError(
            f"the report of {capture!r} would contain {what!r}; a notebook cell emitted raw "
            f"HTML: display tables with forensics.present.tables.styled and text with print()")
    hashes = sorted({"'sha256-" + base64.b64encode(hashlib.sha256(
        m.group(1).encode("utf-8")).digest()).decode() + "'" for m in _STYLE.finditer(body)})
    return body.replace(_NO_STYLE, "style-src " + " ".join(hashes or ["'none'"]), 1)


def export_html(nb: Any, *, title: str, info: dict[str, Any], with_code: bool = False) -> str:
    """Write an executed notebook as one self-contained HTML page
    (:func:`forensics.present.report_html.page`).

    Returns:
        The HTML text.
    Raises:
        UnsafeReportError: the HTML would contain a ``<script`` element.
    """
    from forensics.present.report_html import page

    _require("mistune")
    nb = _strip_for_report(nb)
    conclusion, header = take_conclusion(nb)
    lead_sections(nb)
    info = {**info, "conclusion": conclusion, "header": header, "contents": contents(nb)}
    body = page(nb, title=title, info=info, with_code=with_code)
    if _SCRIPT_TAG.search(body):
        raise UnsafeReportError(
            f"the report of {info.get('capture', '?')!r} would contain a <script> element; "
            f"a notebook cell emitted raw HTML or JavaScript: display tables with pandas and "
            f"text with print()")
    return seal(body, info.get("capture", "?"))


def write_report(capture: Any, out: str | Path, notebook: str | Path = DEFAULT_NOTEBOOK,
                 with_code: bool = False, variants: list[str] | None = None,
                 progress: bool = False) -> Path:
    """Execute ``notebook`` against ``capture`` and write a self-contained HTML report to ``out``.

    Args:
        capture: a ``NAME.capture`` directory (path) or a loaded Capture.
        out: the HTML file to write (overwritten; parent folders are created).
        notebook: a notebook name from :func:`available_notebooks` or a path to an ``.ipynb``.
        with_code: show the code cells (hidden by default).
        variants: the variants the notebook replays (names such as ``vllm+fix.diff``); default,
            the notebook's own. The report names a diff by its file name and digest
            (``vllm+fix.diff@1a2b3c4d``), never the folders it lies in.
        progress: print one line per stage on stderr.
    Returns:
        The path written.
    Raises:
        CaptureFormatError: the capture is missing or malformed.
        ConfigurationError: the notebook does not exist, or ``out`` is a directory or lies
            inside the capture.
        MissingDependencyError: IPython or mistune is not installed.
        NotebookExecutionError: a cell of the notebook raised.
        UnsafeReportError: the notebook emitted a script element.
    """
    import forensics
    from forensics.variants import DEFAULT_VARIANTS, shared_diffs

    capture_path = _capture_path(capture)
    nb_path = find_notebook(notebook)
    refuse_other_capture(nb_path, capture_path)  # an incident's story told of another capture
    target = user_path(out)
    refuse_inside_captures(target, [capture_path])
    real_output(target)  # a link planted on its way is refused before the notebook runs
    if target.is_dir():
        raise ConfigurationError(f"-o '{terminal(target)}' is a directory; give the HTML file to "
                                 f"write, e.g. "
                                 f"'{terminal(target / (capture_path.stem + '.html'))}'")
    variants = [absolute_variant(v) for v in variants] if variants else variants
    shown, diffs = shared_diffs(variants or [])  # a diff by its name, not the user's folders
    name = capture_path.name.removesuffix(".capture")
    if len(forensics.load(capture_path)) == 0:  # nothing for the notebook to replay
        result = forensics.replay(capture_path, variants or DEFAULT_VARIANTS)
        conclusion = forensics.conclude(result)
        answer = " ".join(conclusion.paragraph().replace(conclusion.no_records, "").split())
        return write_text_atomically(
            target, no_records_page(name, answer, conclusion.not_known, conclusion.no_records),
            shared=True)
    say = _stage_printer(progress)
    say(f"running notebook {nb_path.stem} on {name} (replay, tables, plots)")
    with tempfile.TemporaryDirectory(prefix="forensics-report-") as tmp:
        executed = execute_notebook(nb_path, capture_path, Path(tmp), shown or None, diffs)
    say("exporting HTML")
    info = {"capture": name, "capture_path": str(capture_path), "notebook": nb_path.stem,
            "generated": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "version": forensics.__version__}
    html = export_html(executed, title=f"forensics report: {name}", info=info,
                       with_code=with_code)
    write_text_atomically(target, html, shared=True)
    say(f"wrote {target}")
    return target


def no_records_page(name: str, answer: str, not_known: dict[str, int],
                    no_records: str) -> str:
    """The report of a capture of no records to replay: one page saying so, then ``answer``,
    the conclusion's paragraph (its crash events and the known issues they match: what
    ``summary`` says of it); no notebook is run. ``not_known``: site -> records of sites this
    install does not know: a capture holding only those holds records, none judged;
    ``no_records``: what the capture holds instead (the conclusion's sentence,
    :func:`~forensics.present.conclusion.no_records_sentence`)."""
    from forensics.escaping import html
    from forensics.store.unjudged import not_known_text

    said = (f"The capture holds {not_known_text(not_known)} and no other record: no variant "
            "judged them; install the plugin that declares each and report it again."
            if not_known else no_records)
    return ("<!doctype html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\""
            "Content-Security-Policy\" content=\"default-src 'none'\"><title>forensics report: "
            f"{html(name)}</title></head><body><h1>forensics report: {html(name)}</h1>\n"
            f"<p id=\"conclusion\">{html(said)}</p>\n"
            f"<p id=\"answer\">{html(answer)}</p></body></html>\n")


def absolute_variant(variant: str) -> str:
    """``variant`` with a ``vllm+PATH.diff`` path made absolute (the notebook runs in its own
    folder, where a path relative to the caller's would not be found); other names unchanged.

    Raises:
        ConfigurationError: the diff file does not exist (before the notebook runs).
    """
    prefix = "vllm+"
    if not variant.startswith(prefix):
        return variant
    if variant == prefix:
        from forensics.variants.vllm_diff import NO_PATH

        raise ConfigurationError(NO_PATH)
    path = user_path(variant.removeprefix(prefix))
    if not path.is_file():
        raise ConfigurationError(f"--variant {variant!r}: no diff file at '{terminal(path)}'; "
                                 f"give the path of a unified diff, as in --variant vllm+PATH.diff")
    return prefix + str(path.resolve())


def _stage_printer(enabled: bool) -> Any:
    """A function printing ``report: <stage> (<seconds since start>)`` on stderr, or nothing;
    a stage names the capture, so it is shown as inert text (``escaping.terminal``)."""
    import sys
    import time

    from forensics.escaping import terminal

    start = time.monotonic()

    def say(stage: str) -> None:
        if enabled:
            print(f"report: {terminal(stage)} [{time.monotonic() - start:.0f} s]",
                  file=sys.stderr, flush=True)
    return say
