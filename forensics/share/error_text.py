"""What ``redact`` keeps of an event's error text: vLLM's, torch's and CUDA's own words, no more.

Maintainers search for the assert, the exception type and its message, so those stay; what
identifies a machine, a person or a request goes. Two passes, each linear in the text:

1. patterns take out what has a shape: URLs, e-mail and IP addresses, paths (a source file
   keeps its base name and line, as ``Indexing.cu:1515``), users' homes, ``pid=N``-style keyed
   ids, UUIDs, pointers, request ids, ``host:port`` and dotted host names (a site's tensor,
   ``out.output_token_ids``, as the probe's guard names it, is no host);
2. every word left is kept only when it is a number or made of words of vLLM's, torch's and
   CUDA's own error text (the closed vocabulary ``error_words.txt``, written by
   ``scripts/error_words.py``), or of the probe's own guard messages: a user's name, a host
   without a domain (``gpu-node-17``), an API token or a prompt's words become ``<text>``.
   This is an allow-list: a word we do not know goes, whatever it is.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from forensics.share.shareable import tensor_names

#: event fields holding error text from vLLM, torch or CUDA (the assert condition, the
#: exception line, the kernel source position): kept through :func:`public_error_text`
PUBLIC_ERROR_FIELDS = ("message", "detail", "location", "function", "exception", "error")
#: file suffixes whose base name is public (a source file of vLLM, torch or CUDA)
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".cc", ".c", ".h", ".hpp")
#: first labels of dotted names that are modules, not hosts (``torch.AcceleratorError``)
MODULE_ROOTS = frozenset({"torch", "vllm", "triton", "cuda", "numpy", "transformers", "ray",
                          "c10", "at", "aten", "std", "builtins", "asyncio", "concurrent"})
#: what stands for a word that is not kept
UNKNOWN_WORD = "<text>"
#: what stands for the n-th request id of a redacted capture (:mod:`forensics.share.redaction`)
PSEUDONYM = "anon-{}"
_PATH_RE = re.compile(r"(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:[/\\][\w.@%+=~-]+)+[/\\]?")
# each pattern that starts with a run of characters starts only where that run starts, and
# takes the run whole (``*+``, ``++``): one attempt per run, time linear in the text (a
# ``\b`` start let every character of ``a-a-a-...`` begin a scan to the end: 40 KB, 35 s)
_URL_RE = re.compile(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*+://\S+", re.I)
_EMAIL_RE = re.compile(r"(?<![\w.+-])[\w.+-]++@[\w-]+(?:\.[\w-]+)+\b")
_IP_RE = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"
                    r"|\b[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){3,7}\b", re.I)
_UUID_RE = re.compile(r"\b[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\b",
                      re.I)
_ADDRESS_RE = re.compile(r"\b0x[0-9a-f]{6,}\b|\b[0-9a-f]{16,}\b", re.I)
_ID_RE = re.compile(r"\b(?:(?:chat)?cmpl|req|request|trace|span)[-_][\w-]+", re.I)
_KEYED_RE = re.compile(r"\b(pid|tid|ppid|uid|host|hostname|node|ip|user|job|request_id|"
                       r"req_id)([=:]\s*)[^\s,;)\]]+", re.I)
_DOTTED_RE = re.compile(r"(?<![\w-])[A-Za-z][\w-]++(?:\.[A-Za-z][\w-]*)+\b")  # "e.g." is no host
#: a bare host and its port (``gpu-node-7:29500``; a source file's ``Indexing.cu:1515`` is not)
_HOST_PORT_RE = re.compile(r"(?<![\w.\-/\\])[A-Za-z][\w-]*(?=:\d{2,5}\b)")
#: a user's home (``~alice``)
_HOME_RE = re.compile(r"~[\w.-]+")
#: what pass 1 leaves in the text (kept as they are by pass 2)
_PLACEHOLDERS = ("url", "email", "path", "id", "ip", "addr", "host", "text")
#: a word of pass 2: a placeholder or a pseudonym (group ``kept``), or letters, digits and
#: ``_`` joined by hyphens (``device-side``, ``gpu-node-17``: a hyphenated name is judged whole)
_WORD_RE = re.compile(r"(?P<kept><(?:" + "|".join(_PLACEHOLDERS) + r")>|"
                      + PSEUDONYM.format(r"\d++") + r"\b)|\w++(?:-\w++)*+")
#: a word's parts: ``indexSelectSmallIndex_v2`` -> index, Select, Small, Index, v, 2
_PARTS_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+|[_-]+")
#: the longest word judged (vLLM's longest names are about 60 characters): longer ones are not
#: known, so judging a text costs time linear in it
LONGEST_WORD = 100
#: letter/digit and lower/upper changes past which a word looks random (a key, a token)
_RANDOM_CHANGES = 6


def public_error_text(text: str) -> str:
    """``text`` (an error line of vLLM, torch or CUDA) with what identifies a machine, a
    person or a request taken out (see the module docstring): the assert, exception type and
    message stay, as far as their words are vLLM's, torch's and CUDA's own."""
    text = _URL_RE.sub("<url>", text)
    text = _EMAIL_RE.sub("<email>", text)
    text = _HOME_RE.sub("<path>", text)
    text = _PATH_RE.sub(_path_part, text)
    text = _KEYED_RE.sub(lambda m: f"{m[1]}{m[2]}<id>", text)
    text = _UUID_RE.sub("<id>", text)
    text = _IP_RE.sub(lambda m: "<ip>" if any(c.isdigit() for c in m[0]) else m[0], text)
    text = _ADDRESS_RE.sub("<addr>", text)
    text = _ID_RE.sub("<id>", text)
    text = _HOST_PORT_RE.sub("<host>", text)
    text = _DOTTED_RE.sub(_dotted_part, text)
    return _WORD_RE.sub(_known_word, text)


def _path_part(match: re.Match[str]) -> str:
    """A source file's base name (public); any other path ``<path>``."""
    name = re.split(r"[/\\]", match[0].rstrip("/\\"))[-1]
    return name if name.lower().endswith(SOURCE_SUFFIXES) else "<path>"


def _dotted_part(match: re.Match[str]) -> str:
    """A module path or a source file kept; any other dotted name (a host) ``<host>``."""
    word = match[0]
    if word.split(".")[0] in MODULE_ROOTS or word.lower().endswith(SOURCE_SUFFIXES):
        return word
    first = word.split(".")[0]
    if word in tensor_names() or ("_" in first and first in tensor_names()):
        return word  # a site's tensor (``out.input_ids``, ``prev_positions.clamp``): a host
        # name holds no ``_``
    if word[0].isupper() or word.split(".")[-1][:1].isupper():  # Class.attr, module.Class
        return word
    return "<host>"


def _known_word(match: re.Match[str]) -> str:
    """A placeholder, a pseudonym, a number or a word of :func:`error_words` as it is; else
    :data:`UNKNOWN_WORD`."""
    word = match[0]
    return word if match["kept"] or known_word(word) else UNKNOWN_WORD


def known_word(word: str) -> bool:
    """Whether ``word`` (letters, digits, ``_`` and ``-``) is vLLM's, torch's or CUDA's own:
    ASCII, at most :data:`LONGEST_WORD` long, and a number, a word of :func:`error_words`
    (``GiB``) or made of parts (:data:`_PARTS_RE`) that are numbers, single letters or such
    words; never a hyphenated word holding a number (``gpu-node-17``, a host) or one that
    looks random (an API key)."""
    if len(word) > LONGEST_WORD or not word.isascii():
        return False
    parts = _PARTS_RE.findall(word)  # ASCII letters, digits, _ and -: every one in a part
    if word.isdigit():
        return True
    if "-" in word and any(p.isdigit() for p in parts) or _looks_random(word):
        return False
    words = kept_words()
    if word.lower() in words:
        return True
    return all(p.isdigit() or p[0] in "_-" or len(p) == 1 or p.lower() in words
               for p in parts)


def _looks_random(word: str) -> bool:
    """Whether ``word`` changes between letters and digits, or from lower to upper case,
    :data:`_RANDOM_CHANGES` times or more (``hf_kQzVbWmXy...``; ``indexSelectSmallIndex``
    changes three times)."""
    changes = sum(1 for a, b in zip(word, word[1:], strict=False)
                  if a.isdigit() != b.isdigit() or (a.islower() and b.isupper()))
    return changes >= _RANDOM_CHANGES


@functools.cache
def kept_words() -> frozenset[str]:
    """The words a public error text keeps: :func:`error_words` and :func:`guard_words`."""
    return error_words() | guard_words()


@functools.cache
def guard_words() -> frozenset[str]:
    """The lower-case words of the probe's own guard messages (:mod:`forensics.probe.guard`:
    ``forensics``, ``goes``, ``reaches``), in each of their forms, their values left out."""
    from forensics.probe.guard import bounds_error, passed_on_message
    from forensics.sites import Violation

    blank = Violation("", None, "", 0, 0, 0)
    texts = [text for capture, kept in ((None, True), ("0", True), ("0", False))
             for text in (str(bounds_error(blank, 0, 0, capture, kept)),
                          passed_on_message(blank, 0, 0, capture, kept))]
    return frozenset(word.lower() for text in texts for word in re.findall(r"[A-Za-z]+", text))


@functools.cache
def error_words() -> frozenset[str]:
    """The closed vocabulary: the lower-case words of ``error_words.txt``."""
    text = resources.files("forensics.share").joinpath("error_words.txt").read_text("utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))
