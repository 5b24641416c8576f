"""The report's HTML page, written from an executed notebook without nbconvert.

nbconvert's export was a fifth of a small capture's report time (its import alone pulls
pygments, bleach-like filters, traitlets and jinja2's template tree); a report needs only a few
things of it, done here: markdown cells through mistune (headings get nbconvert's ids, spaces
as ``-``), outputs by mimetype in nbconvert's order of preference, code shown only when asked,
JavaScript and widgets left out. The page's own style is ``forensics/present/templates/report.css``;
its Content-Security-Policy forbids every script and every remote load (``style-src 'none'``
is replaced by the hashes of the page's style elements: :func:`forensics.present.report.seal`).

Escaping: capture strings reach the page as text outputs and header lines, escaped here with
:func:`forensics.escaping.html`, or inside the notebooks' HTML tables (escaped by
:func:`forensics.present.tables.styled`); markdown cells are the notebook's, never the capture's.
"""

from __future__ import annotations

import base64
import functools
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from forensics.escaping import html as esc

CSS = Path(__file__).resolve().parent / "templates" / "report.css"
CSP = ("default-src 'none'; script-src 'none'; img-src data:; style-src 'none'; font-src data:; "
       "base-uri 'none'; form-action 'none'")
#: mimetypes in nbconvert's HTML order of preference (the first one an output has is shown)
PRIORITY = ("application/vnd.jupyter.widget-view+json", "application/javascript", "text/html",
            "text/markdown", "image/svg+xml", "text/latex", "image/png", "image/jpeg",
            "text/plain")
_OMITTED = {"application/vnd.jupyter.widget-view+json": "[widget omitted from the report]",
            "application/javascript": "[JavaScript output omitted from the report]"}
_TAG = re.compile(r"<[^>]*>")


def anchor(title: str) -> str:
    """The id nbconvert gives a heading of text ``title`` (spaces as ``-``, URL-quoted)."""
    return quote(title.replace(" ", "-"), safe="?/:@!$&'()*+,;=")


@functools.cache
def _markdown() -> Any:
    """A mistune renderer whose headings carry :func:`anchor` ids and an anchor link (made
    once: every markdown cell and output of a page, and of later pages, goes through it)."""
    import html

    import mistune

    class Renderer(mistune.HTMLRenderer):
        """HTML with nbconvert's heading ids."""

        def heading(self, text: str, level: int, **attrs: Any) -> str:
            """A heading with its id and a ``¶`` link to it."""
            link = esc(anchor(html.unescape(_TAG.sub("", text))))
            return (f'<h{level} id="{link}">{text}<a class="anchor-link" href="#{link}">¶</a>'
                    f"</h{level}>\n")

    return mistune.create_markdown(renderer=Renderer(escape=False),
                                   plugins=["table", "strikethrough", "url"])


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _pre(value: Any) -> str:
    """Text as an escaped ``<pre>``, line by line (:func:`esc` shows a newline as ``\\x0a``)."""
    return "<pre>" + "\n".join(esc(line) for line in _text(value).split("\n")) + "</pre>"


def render_output(output: Any) -> str:
    """One output as HTML: a stream or text as escaped ``<pre>``, an image as a ``data:`` URI,
    HTML as it is (the notebook's tables), markdown rendered; JavaScript and widgets omitted."""
    if output.get("output_type") == "stream":
        return f'<div class="jp-OutputArea-output">{_pre(output.get("text", ""))}</div>'
    data = output.get("data") or {}
    mime = next((m for m in PRIORITY if m in data), None)
    if mime is None:
        return ""
    value = data[mime]
    if mime in _OMITTED:
        return f'<div class="jp-OutputArea-output"><pre>{_OMITTED[mime]}</pre></div>'
    if mime == "text/html":
        return f'<div class="jp-OutputArea-output jp-RenderedHTMLCommon">{_text(value)}</div>'
    if mime == "text/markdown":
        return (f'<div class="jp-OutputArea-output jp-RenderedHTMLCommon">'
                f"{_markdown()(_text(value))}</div>")
    if mime.startswith("image/"):
        encoded = _text(value).strip() if mime != "image/svg+xml" else \
            base64.b64encode(_text(value).encode("utf-8")).decode("ascii")
        return (f'<div class="jp-RenderedImage jp-OutputArea-output">'
                f'<img src="data:{mime};base64,{encoded.replace(chr(10), "")}" alt="figure"></div>')
    return f'<div class="jp-OutputArea-output">{_pre(value)}</div>'


#: figures a cell shows before the rest is folded into ``<details>`` (:func:`render_outputs`)
SHOWN_FIGURES = 1


def render_outputs(outputs: list[Any]) -> str:
    """A code cell's outputs in order (:func:`render_output`); figures past the first
    :data:`SHOWN_FIGURES` are folded, together, into one ``<details>`` at the end."""
    shown: list[str] = []
    folded: list[str] = []
    figures = 0
    for output in outputs:
        html = render_output(output)
        figures += html.startswith('<div class="jp-RenderedImage')
        folded_here = figures > SHOWN_FIGURES and html.startswith('<div class="jp-RenderedImage')
        (folded if folded_here else shown).append(html)
    if not folded:
        return "".join(shown)
    return ("".join(shown) + f'<details class="forensics-figures"><summary>show {len(folded)} '
            f'more figure{"s" if len(folded) > 1 else ""}</summary>{"".join(folded)}</details>')


def _code(source: str, number: Any) -> str:
    """A code cell's input: its prompt and its source, escaped, in a ``<pre>``."""
    prompt = f"In [{number}]:" if number is not None else "In [ ]:"
    return (f'<div class="jp-InputArea"><div class="jp-InputPrompt">{esc(prompt)}</div>'
            f'<div class="jp-CodeMirrorEditor jp-Editor">{_pre(source)}</div></div>')


def render_cells(nb: Any, with_code: bool) -> str:
    """The body of the page: every markdown cell rendered, every code cell's outputs (and its
    source when ``with_code``); raw cells left out, as nbconvert leaves them out of HTML."""
    markdown = _markdown()
    parts = []
    for cell in nb.cells:
        kind = cell.get("cell_type")
        if kind == "markdown":
            parts.append(f'<div class="jp-Cell jp-MarkdownCell jp-RenderedHTMLCommon">'
                         f'{markdown(_text(cell.get("source", "")))}</div>')
        elif kind == "code":
            inner = _code(_text(cell.get("source", "")), cell.get("execution_count")) \
                if with_code else ""
            inner += render_outputs(cell.get("outputs", []))
            if inner:
                parts.append(f'<div class="jp-Cell jp-CodeCell">{inner}</div>')
    return "\n".join(parts)


def render_header(info: dict[str, Any]) -> str:
    """The header: title, the conclusion's lines, the verdict table, the contents, the facts
    of the run; every text escaped."""
    header = info.get("header") or {}
    parts = ['<header class="forensics-header" id="forensics-header">',
             f"<h1>vllm-forensics report: {esc(info.get('capture', ''))}</h1>"]
    if header.get("lines"):
        items = "".join(f"<li>{esc(line)}</li>" for line in header["lines"])
        parts.append(f'<ul class="forensics-conclusion" id="conclusion">{items}</ul>')
    elif info.get("conclusion"):
        parts.append(f'<p class="forensics-conclusion" id="conclusion">'
                     f"{esc(info['conclusion'])}</p>")
    if header.get("verdicts"):
        heads = "".join(f"<th>{esc(v)}</th>" for v in header.get("variants", []))
        rows = "".join(
            f"<tr><td>{esc(row['site'])}</td>" + "".join(
                f'<td class="v-{esc(str(v).replace(" ", "-"))}">{esc(v)}</td>'
                for v in row["verdicts"]) + "</tr>" for row in header["verdicts"])
        parts.append(f'<table class="forensics-verdicts" id="verdicts"><thead><tr><th>site</th>'
                     f"{heads}</tr></thead><tbody>{rows}</tbody></table>")
    if info.get("contents"):
        entries = "".join(f'<li><a href="#{esc(e["id"])}">{esc(e["title"])}</a></li>'
                          for e in info["contents"])
        parts.append(f'<nav id="contents"><strong>Contents</strong><ol>{entries}</ol></nav>')
    parts.append(f'<p class="forensics-meta">capture <code>{esc(info.get("capture_path", ""))}'
                 f'</code> · notebook <code>{esc(info.get("notebook", ""))}</code> · generated '
                 f'{esc(info.get("generated", ""))} by vllm-forensics '
                 f'{esc(info.get("version", ""))}</p>')
    parts.append("</header>")
    return "\n".join(parts)


def page(nb: Any, *, title: str, info: dict[str, Any], with_code: bool) -> str:
    """The whole page of an executed notebook (its conclusion already lifted into ``info``)."""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1.0">\n'
            f"<title>{esc(title)}</title>\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f'<style type="text/css">\n{CSS.read_text(encoding="utf-8")}</style>\n</head>\n'
            f'<body class="jp-Notebook">\n{render_header(info)}\n<main>\n'
            f"{render_cells(nb, with_code)}\n</main>\n</body>\n</html>\n")
