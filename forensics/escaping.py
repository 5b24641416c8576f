"""One escaping rule per output: every string that comes from a capture goes through the
function of the output it lands in, keys and column names included. This is the only module
that escapes (no output keeps a copy of these rules).

- :func:`terminal`: control characters (C0, DEL, C1, the Unicode line separators, the
  bidirectional marks, overrides and isolates, the byte-order mark), characters drawn as
  nothing or as a space that is not one, noncharacters and lone surrogates shown as
  ``\\x1b``-style escapes, a backslash that would read as an escape's
  start as ``\\\\`` (no two values print alike), and a very long string cut at :data:`LIMIT`
  characters with a marker, so a string is one line of inert text of bounded length; the base
  of every other function. A string that is not in Unicode's composed form (NFC: ``e`` and
  U+0301 where ``é`` is one character, a Hangul syllable as its jamo, U+212B for ``Å``) has
  every character NFC may change or join to the one before (NFC quick check No or Maybe)
  escaped too, so it never prints as its NFC spelling does (a name in NFC prints as before);
  a run of more than :data:`MOST_MARKS` combining marks (Zalgo text, drawn over the lines
  around it) is escaped whole, here and in :func:`inert`, so in every output;
- :func:`unicode`: only lone surrogates shown (``\\udcff``): text a UTF-8 store (Arrow, JSON
  files) can hold, otherwise unchanged; :func:`unicode_path` the same for a capture's path,
  with a backslash that would read as an escape's start doubled (no two paths alike), and
  :func:`from_unicode_path` its inverse;
- :func:`inert`: :func:`terminal` for a message whose values are already escaped (their
  backslashes not doubled again);
- :func:`html` (also SVG/XML text and attribute values): :func:`inert` (a text built of
  values through :func:`terminal`; ``raw=True``: a capture's value, :func:`terminal`), then
  ``& < > " '`` as entities (a noncharacter or C0 control never reaches XML);
- :func:`markdown`: :func:`inert` (``raw=True``: :func:`terminal`), then only what
  GitHub-flavoured Markdown would read as markup escaped, so the rendered text is the text, and
  what GitHub would read as a mention or an issue reference (``@user``, ``#123``) or link by
  itself (a bare ``https://...``, ``www.``, ``mailto:``, ``xmpp:`` or an address,
  ``alice@example.com``) in a code span, so pasting it pings no one and links nothing; in a
  text (not ``raw``) a span between backticks becomes a code span (:func:`markdown_code`,
  with a fence longer than any backtick run in it), while a capture's value (``raw``) has its
  backticks escaped: they never open or close a code span;
- :func:`spanless`: a capture's value inside a sentence (a model name, an event's message):
  :func:`terminal` with a backtick written ``\\x60``, so the value never opens or closes a
  code span of the sentence when :func:`markdown` renders it; :func:`quoted` (a request id):
  that between single quotes, with a quote written ``\\x27``, so it never ends its quotes;
- :func:`csv_cell`: :func:`terminal`, then a cell starting with ``= + - @``, tab or CR
  prefixed with ``'`` (a spreadsheet would evaluate it as a formula), and one starting with
  ``'`` too (so the prefix never makes two values one cell);
- :func:`python_string`: a Python string literal (ASCII, from :func:`repr`) that evaluates to
  :func:`terminal` of the value: generated source holds capture text only as such a literal;
- :func:`terminal_lines`: a text of several lines (a message, a list of differences), each
  line through :func:`inert`;
- :func:`shell_word` and :func:`shell_path`: one word of a command line we suggest (``to
  accept it: forensics check PATH --accept``): pasted into a shell it is that very word (quoted,
  a path starting with ``-`` given as ``./-...``) in every POSIX shell, and printed it is
  inert: a character :func:`terminal` escapes is written by ``"$(printf '\\NNN')"``, and line
  breaks that end it by ``${IFS#??}`` (the command stays one line);
- :func:`json_text`: strict JSON (ASCII): a float JSON cannot hold (``NaN``, the infinities
  a capture's JSON files may carry: Python's parser takes them) as its text, ``"nan"``,
  ``"inf"`` or ``"-inf"``.
"""

from __future__ import annotations

import functools
import html as _html
import json
import math
import re
import shlex
import unicodedata
from collections import deque
from collections.abc import Callable
from typing import Any

#: characters of a capture string written at most this many, then a marker of how many more
LIMIT = 20_000
#: noncharacters: U+FDD0-U+FDEF and the last two code points of every plane
_NONCHARACTERS = "\ufdd0-\ufdef" + "".join(
    f"{chr(plane * 0x10000 + 0xFFFE)}{chr(plane * 0x10000 + 0xFFFF)}" for plane in range(17))
#: characters drawn as nothing (Unicode's Default_Ignorable_Code_Point, and the interlinear
#: annotation marks): the soft hyphen, the combining grapheme joiner, Hangul and Mongolian
#: fillers and selectors, zero-width space, non-joiner and joiner, word joiner, invisible
#: operators and the deprecated format characters after them, variation selectors (and their
#: supplement), U+FFF0-U+FFFB, the shorthand format controls, the musical beam and slur
#: controls, and plane 14's tags (a name holding one reads as the name without it)
_INVISIBLE = ("\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200d\u2060-\u206f"
              "\u3164\ufe00-\ufe0f\uffa0\ufff0-\ufffb\U0001bca0-\U0001bca3"
              "\U0001d173-\U0001d17a\U000e0000-\U000e0fff")
#: characters drawn as a space that are not one (Unicode's space separators but U+0020, and
#: the Braille blank): ``a b.capture`` and ``a<U+00A0>b.capture`` read alike
_SPACES = "\u00a0\u1680\u2000-\u200a\u202f\u205f\u2800\u3000"
#: characters never written raw: C0 controls, DEL, C1 controls, the Arabic letter mark, the
#: left-to-right/right-to-left marks, line/paragraph separators, bidirectional embeddings,
#: overrides and isolates, the byte-order mark, lone surrogates (an undecodable file name),
#: noncharacters, the :data:`_INVISIBLE` and the :data:`_SPACES`
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff"
                      "\ud800-\udfff" + _NONCHARACTERS + _INVISIBLE + _SPACES + "]")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: :func:`unicode`'s escapes, and a backslash before a backslash, ``u`` or a lone surrogate
_UNICODE = re.compile(r"\\(?=[\\u]|" + _SURROGATE.pattern + ")|" + _SURROGATE.pattern)
#: inline characters GitHub-flavoured Markdown reads as markup wherever they stand: a
#: backslash before punctuation, emphasis and strikethrough marks, a table cell's bar, math
_MD_INLINE = re.compile(r"(\\(?=[!-/:-@\[-`{-~])|[*~|$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|`)")
#: what follows the ``]`` that closes a link's text (an inline link, a reference, a definition)
_MD_LINK_NEXT = ("(", "[", ":")
#: an entity (``&amp;``), raw HTML or an autolink (``<a``, ``</``, ``<!``, ``<?``), an emoji
#: shortcode (``:smile:``, ``:+1:``; of digits only, GitHub's two: ``:100:``, ``:1234:``, so
#: a time's ``10:46:44`` is left as it is, no shortcode GitHub renders)
_MD_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
_MD_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_MD_EMOJI = re.compile(r":(?=(?![0-9]+:)[A-Za-z0-9_+-]+:|(?:100|1234):)")
#: a line start Markdown reads as a block: a list item (``- ``, ``1. ``), a heading (``# ``), a
#: quote, a rule or a setext underline; group 2 is the character escaped
_MD_BLOCK_START = re.compile(r"^(\s*\d{0,9})([.)](?=\s|$))|^(\s*)([-+*#]|=)(?=[-=\s]|$)|^(\s*)(>)")
#: a heading's closing sequence (`` ##`` at the end), which GitHub drops
_MD_CLOSING = re.compile(r"(\s)(#+\s*)$")
#: a run of backticks: a code span opens at one and closes at the next run of its length
_MD_BACKTICKS = re.compile("`+")
#: what GitHub turns into a notification or a link to an issue wherever it stands outside
#: code (a backslash does not stop it): a mention (``@user``, ``@org/team``: an ``@`` after no
#: letter, digit or ``_``, as GitHub reads one, so ``fix.diff@bdea3073`` and an address stay
#: as they are), an issue or pull request reference (``#123``, ``owner/repo#123``,
#: ``GH-123``); group 1 is the run of backslashes before it
_MD_PING = re.compile(r"(\\*)((?<![A-Za-z0-9_])@[A-Za-z0-9][A-Za-z0-9-]*|#[0-9]+"
                      r"|(?<![A-Za-z0-9])GH-[0-9]+)", re.IGNORECASE)
#: what GitHub links outside code, as its extended autolinks read them (GFM's "Autolinks
#: (extension)"; and more: after a letter too, as other renderers link): a URL (``https://``,
#: ``http://``, ``ftp://``), ``www.``, ``mailto:`` or ``xmpp:``, up to a space, ``<``, a
#: backtick, a table cell's bar or a backslash (an escape's start); or an address
#: (``alice@example.com``: letters, digits and ``.+-_`` from where such a run starts, ``@``, a
#: domain of two labels or more; a trailing ``.`` left out, as GFM leaves it); written as a
#: code span, it links nothing. Time linear in the text: an address is tried only where a run
#: of its characters starts
_MD_AUTOLINK = re.compile(r"(?:https?://|ftp://|www\.|mailto:|xmpp:)[^\s<`|\\]*"
                          r"|(?<![A-Za-z0-9.+_-])[A-Za-z0-9.+_-]+@[A-Za-z0-9_-]+"
                          r"(?:\.[A-Za-z0-9_-]+)+", re.IGNORECASE)
#: first characters that make a spreadsheet evaluate a cell
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: first characters of a CSV cell prefixed with ``'``: a formula's, and ``'`` itself (so the
#: cell ``'=1`` of a value ``'=1`` is never the cell of the value ``=1``)
_QUOTED = (*FORMULA_STARTS, "'")


#: Hangul vowel and trailing jamo: NFC joins them to the syllable before (their composition is
#: computed, not listed in the Unicode data's decompositions)
_JAMO_JOINED = "\u1161-\u1175\u11a8-\u11c2"
#: above this code point no character has a canonical decomposition
_LAST_DECOMPOSED = 0x2FA1D


@functools.cache
def _nfc_sets() -> tuple[frozenset[str], frozenset[str]]:
    """From the running Python's Unicode data: the characters NFC changes wherever they stand
    (NFC quick check No: a string holding one is never NFC), and those it may join to the
    character before (Maybe: the second of each canonical pair; the Hangul jamo NFC joins are
    :data:`_JAMO_JOINED`). Built on the first string that is not NFC (about 0.1 s)."""
    changed, joined = set(), set()
    for code in range(_LAST_DECOMPOSED + 1):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        if unicodedata.normalize("NFC", char) != char:
            changed.add(char)
        parts = unicodedata.decomposition(char).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            joined.add(chr(int(parts[1], 16)))
    return frozenset(changed), frozenset(joined)


def _unstable_class() -> str:
    """A regex character class of the characters NFC may change or join to the character
    before (NFC quick check No or Maybe)."""
    changed, joined = _nfc_sets()
    return "[" + _ranges(changed | joined) + _JAMO_JOINED + "]"


def _ranges(chars: frozenset[str]) -> str:
    """``chars`` as the inside of a regex character class, runs of code points as ranges."""
    from forensics.digits import runs

    return "".join(re.escape(chr(a)) + (f"-{re.escape(chr(b))}" if b > a else "")
                   for a, b in runs(sorted(map(ord, chars))))


def unprinted_class() -> str:
    """ASCII regex text of a class of the characters :func:`terminal` escapes wherever they
    stand: :data:`_CONTROL`'s and those NFC changes (a string holding one is never NFC). The
    generated repro, which imports no forensics, refuses a data file's word holding one, or
    not in NFC (``forensics.share.repro_template``)."""
    return ascii(f"{_CONTROL.pattern}|[{_ranges(_nfc_sets()[0])}]")


#: no combining mark (categories Mn, Mc, Me) lies outside these code points
_MARKS_SPAN = (0x300, 0xE01EF)
#: the most combining marks in a row written as themselves (a letter's accent, Vietnamese's
#: two); a longer run (Zalgo text: ``a`` and 200 U+0301, drawn over the lines above and below)
#: is escaped whole, in every output
MOST_MARKS = 2


@functools.cache
def _marks_class() -> str:
    """A regex character class of the combining marks (Mn, Mc, Me) of the running Python's
    Unicode data: drawn onto the character before them. Built on the first string that is not
    ASCII (about 0.1 s)."""
    marks = frozenset(chr(c) for c in range(_MARKS_SPAN[0], _MARKS_SPAN[1] + 1)
                      if unicodedata.category(chr(c)) in ("Mn", "Mc", "Me"))
    return "[" + _ranges(marks) + "]"


@functools.cache
def _patterns(nfc: bool, ascii_only: bool = False
              ) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """What :func:`terminal` escapes in a string that is NFC (``nfc``: :data:`_CONTROL`) or
    not (those and :func:`_unstable_class`): the characters; them and a backslash that would
    otherwise read as an escape's start (before a backslash, ``x``, ``u``, ``U`` or a character
    escaped: ESC and the four characters ``\\x1b`` never look alike); and the characters
    :func:`shell_word`'s ``printf`` format writes as octal escapes (them, and the three a
    single-quoted format cannot hold as themselves: the quote, printf's escape and directive
    characters). Combining marks right after a character escaped, or that begin the string,
    are escaped with it (drawn onto an escape's last letter, ``\\x1e`` and U+0301 would read
    ``\\x1é``); an ASCII string (``ascii_only``) holds none."""
    escaped = _CONTROL.pattern if nfc else f"{_CONTROL.pattern}|{_unstable_class()}"
    marks = "" if ascii_only else _marks_class()
    if marks:  # a run past MOST_MARKS draws over the lines around it
        escaped = f"{escaped}|{marks}{{{MOST_MARKS + 1},}}"
    after, start = (f"{marks}*", f"|^{marks}+") if marks else ("", "")
    return (re.compile(f"(?:{escaped}){after}{start}"),
            re.compile(r"\\(?=[\\xuU]|" + escaped + f")|(?:{escaped}){after}{start}"),
            re.compile(f"(?:{escaped}|['\\\\%]){after}{start}"))


def _escaped_in(text: str) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """:func:`_patterns` for ``text``."""
    return _patterns(unicodedata.is_normalized("NFC", text), text.isascii())


def _visible(match: re.Match[str]) -> str:
    """The matched characters as their escapes (a backslash as two)."""
    return "".join(_escape(char) for char in match.group())


def _escape(char: str) -> str:
    """One character as its escape (a backslash as two)."""
    if char == "\\":
        return "\\\\"
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def capped(value: Any, limit: int = LIMIT) -> str:
    """``str(value)``, cut after ``limit`` characters with ``… [N more characters]``."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def terminal(value: Any) -> str:
    """``value`` as one line of text of at most about :data:`LIMIT` characters: every control
    character, character drawn as nothing, noncharacter and lone surrogate as a
    ``\\x..``/``\\u....`` escape, and a backslash that would read as an escape's start as
    ``\\\\``, so two values (of at most :data:`LIMIT` characters) never look alike. For a value
    written once: a message built of values already escaped goes through :func:`inert`. A
    string not in NFC has each character NFC may change or join to the one before escaped too
    (the module's docstring)."""
    text = capped(value)
    return _escaped_in(text)[1].sub(_visible, text)


def inert(text: Any) -> str:
    """``text`` (a message that holds values already through :func:`terminal`) as one line of
    inert text: control characters, noncharacters and lone surrogates escaped as by
    :func:`terminal`, backslashes left as they are (a value's escapes are not doubled)."""
    text = capped(text)
    return (_CONTROL if text.isascii() else _inert_pattern()).sub(_visible, text)


@functools.cache
def _inert_pattern() -> re.Pattern[str]:
    """What :func:`inert` escapes in a text not ASCII: :data:`_CONTROL`'s characters and a run
    of more than :data:`MOST_MARKS` combining marks."""
    return re.compile(f"{_CONTROL.pattern}|{_marks_class()}{{{MOST_MARKS + 1},}}")


def spanless(value: Any) -> str:
    """``value`` (a capture's value: a model name, an event's message) inside a sentence that
    :func:`markdown` may render: :func:`terminal` of it, each backtick written ``\\x60`` (a
    backslash before one doubled), so the value never opens or closes a code span of the
    sentence. The sentence goes out through :func:`inert` (and :func:`html`,
    :func:`markdown`, :func:`csv_cell` not ``raw``)."""
    return _also_escaped(terminal(value), "`")


def quoted(value: Any) -> str:
    """``value`` (a capture's value: a request id) inside a sentence: :func:`spanless` of it
    between single quotes, each ``'`` in it written ``\\x27`` too, so the value never ends
    its quotes."""
    return "'" + _also_escaped(terminal(value), "'`") + "'"


def _also_escaped(text: str, marks: str) -> str:
    """``text`` (through :func:`terminal`) with each of ``marks`` as its ``\\xNN`` escape
    and a backslash before one doubled (as :func:`terminal` doubles one before an escape)."""
    return re.sub(r"\\?[" + re.escape(marks) + "]", _mark_escaped, text)


def _mark_escaped(match: re.Match[str]) -> str:
    """A mark of :func:`_also_escaped` as its escape, a backslash before it doubled."""
    mark = match.group()
    return ("\\\\" if len(mark) == 2 else "") + f"\\x{ord(mark[-1]):02x}"


def unicode(value: Any) -> str:
    """``value`` as text UTF-8 can encode: a lone surrogate as ``\\udcNN``, nothing else
    changed (a message, a JSON text: for a capture's path that must stay apart from every
    other, :func:`unicode_path`)."""
    return _SURROGATE.sub(_visible, str(value))


def unicode_path(value: Any) -> str:
    """``value`` (a capture's path) as text UTF-8 can encode that no other value shares: a lone
    surrogate as ``\\udcNN`` and a backslash before a backslash, ``u`` or a lone surrogate as
    ``\\\\`` (a folder spelled ``\\udc80`` never reads as one holding that undecodable
    byte)."""
    return _UNICODE.sub(_visible, str(value))


#: what :func:`unicode_path` writes: a doubled backslash, a lone surrogate's escape
_UNICODE_WRITTEN = re.compile(r"\\\\|\\u(d[89a-f][0-9a-f]{2})")


def from_unicode_path(text: str) -> str:
    """The path whose :func:`unicode_path` is ``text`` (a capture's label read back, to be
    shown as every other path is, through :func:`terminal`)."""
    return _UNICODE_WRITTEN.sub(
        lambda m: "\\" if m.group(1) is None else chr(int(m.group(1), 16)), text)


def html(value: Any, raw: bool = False) -> str:
    """``value`` as HTML or XML text (an attribute value too): :func:`inert` (a text whose
    values are escaped already; ``raw``: a capture's value, :func:`terminal`), then markup
    characters as entities."""
    return _html.escape(terminal(value) if raw else inert(value), quote=True)


def markdown(value: Any, table: bool = False, raw: bool = False, spans: bool = True) -> str:
    """``value`` as one line of Markdown that GitHub renders as the text itself: what would be
    markup escaped, no raw HTML; a span between backticks a code span (``table``: in a table
    cell, :func:`markdown_code`). ``value`` through :func:`inert` (a text whose values are
    escaped already; ``raw``: a capture's value, :func:`terminal`, its backticks escaped, never
    a code span's; ``spans=False``: a text whose values may hold backticks, an error naming a
    capture's path, its backticks escaped too)."""
    text = terminal(value) if raw else inert(value)
    parts: list[str] = []
    at = 0
    for start, end, code in _code_spans(text) if spans and not raw else []:
        parts += [_markdown_plain(text[at:start]), markdown_code(code, table)]
        at = end
    parts.append(_markdown_plain(text[at:]))
    out = "".join(parts)
    return _MD_BLOCK_START.sub(_escape_block_start, out, count=1)


def _code_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, content)`` of each code span of ``text``: a run of backticks closed by
    the next run of the same length (as CommonMark reads them), found in one pass (time linear
    in ``text``: a regex retried every opener and backtracked within each run, cubic in a
    capture string of backticks)."""
    runs = [(m.start(), m.end()) for m in _MD_BACKTICKS.finditer(text)]
    later: dict[int, deque[int]] = {}
    for number, (start, end) in enumerate(runs):
        later.setdefault(end - start, deque()).append(number)
    spans: list[tuple[int, int, str]] = []
    number = 0
    while number < len(runs):
        start, end = runs[number]
        closers = later[end - start]
        while closers and closers[0] <= number:
            closers.popleft()
        if not closers:
            number += 1
            continue
        close = closers.popleft()
        spans.append((start, runs[close][1], text[end:runs[close][0]]))
        number = close + 1
    return spans


def _escape_link_openers(text: str) -> str:
    """``text`` with each ``[`` that opens a link, an image, a reference or a footnote
    backslash-escaped: one before ``^``, and every one before a ``]`` followed by ``(``, ``[``
    or ``:`` (time linear in ``text``: the ``[`` between two ``]`` share their answer)."""
    parts = text.split("]")
    for number, part in enumerate(parts):
        follows = parts[number + 1][:1] if number + 1 < len(parts) else ""
        parts[number] = (part.replace("[", "\\[") if follows and follows in _MD_LINK_NEXT
                         else part.replace("[^", "\\[^"))
    return "]".join(parts)


def _escape_block_start(match: re.Match[str]) -> str:
    """A :data:`_MD_BLOCK_START` match with its marker character backslash-escaped."""
    groups = match.groups()
    lead, marker = next((groups[i], groups[i + 1]) for i in (0, 2, 4) if groups[i + 1])
    return f"{lead or ''}\\{marker}"


def _markdown_plain(text: str) -> str:
    """``text`` (no code span) with only what GitHub would read as markup escaped, and what it
    would link by itself (:data:`_MD_AUTOLINK`: a capture's ``https://...``) a code span; the
    text between such spans has every ``[`` escaped (a link's text may hold a code span: a
    ``[`` before the URL and a ``](`` after it made a link)."""
    links = list(_MD_AUTOLINK.finditer(text))
    parts: list[str] = []
    at = 0
    for link in links:  # escaped as if a backtick followed (a backslash before it escaped)
        parts += [_markdown_escaped(text[at:link.start()] + "`", True)[:-2],
                  markdown_code(link.group())]
        at = link.end()
    return "".join([*parts, _markdown_escaped(text[at:], bool(links))])


def _markdown_escaped(text: str, every_bracket: bool = False) -> str:
    """``text`` (no code span, no autolink) with only what GitHub would read as markup
    escaped (``every_bracket``: each ``[``, not only those that open a link in ``text``)."""
    text = _MD_ENTITY.sub("&amp;", text)
    text = _MD_TAG.sub("&lt;", text)
    text = _MD_INLINE.sub(r"\\\1", text)
    text = text.replace("[", "\\[") if every_bracket else _escape_link_openers(text)
    text = _MD_EMOJI.sub(r"\\:", text)
    text = _MD_CLOSING.sub(lambda m: m.group(1) + "\\" + m.group(2), text)
    return _MD_PING.sub(_unpinged, text)


def _unpinged(match: re.Match[str]) -> str:
    """A :data:`_MD_PING` match as a code span (GitHub links no mention or reference in one:
    the text stays the text, where a zero-width character would change it when copied), a
    lone backslash before it doubled (it would escape the span's opening backtick)."""
    run, ping = match.groups()
    return run + ("\\" if len(run) % 2 else "") + markdown_code(ping)


def markdown_code(value: Any, table: bool = False, raw: bool = False) -> str:
    """``value`` as a Markdown code span (one line) fenced by more backticks than any run in
    it; in a table cell (``table``) a ``|`` is escaped, as GitHub's tables need. ``value``
    through :func:`inert` (``raw``: :func:`terminal`)."""
    text = terminal(value) if raw else inert(value)
    if table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() or (
        text.startswith(" ") and text.endswith(" ")) else ""  # CommonMark strips one of each
    return f"{fence}{pad}{text}{pad}{fence}"


def csv_cell(value: Any, raw: bool = True) -> Any:
    """A CSV cell: a string escaped (:func:`terminal`; not ``raw``, a text whose values are
    escaped already: :func:`inert`) and prefixed with ``'`` when it starts like a formula or
    with ``'``; other values unchanged."""
    if not isinstance(value, str):
        return value
    text = terminal(value) if raw else inert(value)
    return "'" + text if text.startswith(_QUOTED) or value.startswith(FORMULA_STARTS) else text


def python_string(value: Any) -> str:
    """A Python string literal (ASCII only) of :func:`terminal` of ``value``: safe inside
    generated source (never ends a string, a docstring or a comment line)."""
    return ascii(terminal(value))


def terminal_lines(value: Any) -> str:
    """``value`` (a message, its values already escaped) as lines of inert text: each line
    through :func:`inert`, the line breaks kept (``check``'s list of differences)."""
    return "\n".join(inert(line) for line in str(value).split("\n"))


def _octal(match: re.Match[str]) -> str:
    """The characters of :func:`shell_word`'s ``printf`` format matched as the ``\\NNN``
    octal escapes of their bytes: those of a file name that is not UTF-8 as themselves
    (surrogateescape), others' UTF-8 bytes."""
    return "".join(_octal_char(char) for char in match.group())


def _octal_char(char: str) -> str:
    """One character as the octal escapes of its bytes (:func:`_octal`)."""
    try:
        data = char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no file name decodes to
        data = char.encode("utf-8", "surrogatepass")
    return "".join(f"\\{byte:03o}" for byte in data)


#: a line break in a word of a command line we suggest: the third character of ``IFS``, which
#: a POSIX shell sets to space, tab, line break when it starts (a command substitution would
#: drop a line break that ends its output, and a line break itself would start a second line)
_SHELL_LINE_BREAK = "${IFS#??}"


def shell_word(value: Any) -> str:
    """``value`` as one word of a command line that any POSIX shell (``dash``, ``bash``,
    ``ksh``; ``zsh`` too, but for more than one line break ending ``value``: its ``IFS`` ends
    with NUL) reads back as that very word, and that is one line of inert text on a terminal:
    :func:`shlex.quote` of it; where it holds a character :func:`terminal` escapes, its text up
    to that character single-quoted and the rest written by ``"$(printf '...')"`` with each such
    character (a byte of a file name that is not UTF-8 too) and each ``' \\ %`` as octal
    escapes (``\\033``) of its bytes. A command substitution drops the line breaks that end
    its output, so line breaks that end ``value`` follow it, each as ``${IFS#??}`` (a line
    break while ``IFS`` holds its value a shell starts with). Never cut short (a shorter word
    would name another file)."""
    text = str(value)
    escaped, _, printf = _escaped_in(text)
    first = escaped.search(text)
    if first is None:
        return shlex.quote(text)
    rest = text[first.start():]
    body = rest.rstrip("\n")
    breaks = _SHELL_LINE_BREAK * (len(rest) - len(body))
    return "".join([shlex.quote(text[:first.start()]) if first.start() else "",
                    "\"" + (f"$(printf '{printf.sub(_octal, body)}')" if body else "") + breaks
                    + "\""])


def shell_path(path: Any) -> str:
    """:func:`shell_word` of ``path``, with ``./`` before a path starting with ``-`` (which a
    command would read as an option)."""
    text = str(path)
    return shell_word("./" + text if text.startswith("-") else text)


def json_text(value: Any, indent: int | None = None, sort_keys: bool = False,
              default: Callable[[Any], Any] | None = None) -> str:
    """``value`` as strict JSON (ASCII, so no raw control character): a float JSON cannot hold
    (``NaN``, an infinity) written as its text ``"nan"``, ``"inf"`` or ``"-inf"``; a lone
    surrogate (a name that is not UTF-8) as :func:`unicode` writes it (``\\udcff``, as text),
    in keys too: ``json.dumps`` writes it as the escape ``\\udcff``, which no UTF-8 text holds
    and strict readers (RFC 7493) refuse; ``default`` as :func:`json.dumps`'s, for values JSON
    has no type for."""
    def dumped(value: Any) -> str:
        return json.dumps(value, indent=indent, sort_keys=sort_keys, allow_nan=False,
                          default=default)

    try:
        text = dumped(value)
    except ValueError:  # a NaN or an infinity somewhere: only then is the value copied
        value = _finite(value)
        text = dumped(value)
    if "\\ud" not in text:  # no surrogate escape at all: only then is the value not copied
        return text
    if default is not None:
        given = default
        default = lambda item: json_ready(given(item))  # noqa: E731  (a value it makes, too)
    return dumped(json_ready(value))


def json_ready(value: Any) -> Any:
    """``value`` with every string (keys too) in lists and dicts made UTF-8 encodable
    (:func:`unicode`: a lone surrogate as the text ``\\udcNN``)."""
    if isinstance(value, str):
        return unicode(value)
    if isinstance(value, dict):
        return {json_ready(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def _finite(value: Any) -> Any:
    """``value`` with each float JSON cannot hold as its text (in dicts, lists and tuples)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
