"""The fixed text of the pytest file ``forensics repro`` writes (:mod:`forensics.share.repro`).

The file is the same for every capture: :data:`HEAD`, then one ``run_<site>(r)`` function per
site that declares a repro (its ``Site.repro`` body), the names of the sites whose vLLM code is a
Triton kernel (``TRITON_SITES``), each site's fields (``FIELDS``: kind, dimensions, required), then
``TAIL`` (:mod:`forensics.share.repro_template_tail`). A Triton site's call runs in a fresh Python
process started on this same file (``python NAME.py --case N``) with Triton's interpreter
switched on (``TRITON_INTERPRET=1``, read when vLLM's kernels are decorated, so before vLLM is
imported) and no GPU visible, so vLLM's own kernel runs on CPU tensors; the process prints its
outcome as one JSON line, and a process killed by a signal (a wild address) is a failure.

Everything that comes from a capture (records, request ids, names, the finding's words, the
facts bounds come from) is in the JSON file beside it, read at run time through its guarded
loader (``load_data``), so no capture text is ever code, a docstring or a comment.
"""

from __future__ import annotations

HEAD = '''"""Reproducer of out-of-range indices in vLLM, written by `forensics repro`.

Each test calls vLLM's own function on CPU with one captured record and the smallest stand-ins
the function reads: it fails while the call leaves an index out of range (an IndexError, or an
id written outside the capture's vocabulary) and passes once a fix keeps it in range (a V1
embedding's test runs the embedding on the ids as recorded: a fix to the call that wrote them
passes that call's test, not this one, which says so when it fails). Model
Runner V2's functions are Triton kernels: each of their tests runs the kernel in a fresh Python
process (this file, run with `--case N`) in Triton's interpreter, on CPU; the buffers it writes
have spare rows past their end, so a write past a buffer lands there and fails the test; an
index outside its buffer is not observed by Triton's interpreter, so where the capture's finding
names a record field holding one, the test checks that value against its bound and says so. A
V2 embedding's test first runs the vLLM call that wrote its ids (its origin) on that call's
recorded inputs, and checks the ids it writes (the embedding's forward, which fails on no id
inside the vocabulary, is not called: it would import much of vLLM), so a fix to that call
passes it; where the data file holds the call that stored one of that call's per-slot inputs a
step before (the origin's `chain`), that call runs first and what it stores replaces the
recorded values at those slots, so a fix to it passes the test too; a case of that
origin's call carries the same `chain` and runs it the same way (one run for both). The
records, and the facts their bounds come from, are read at run time from the JSON file beside
this one (same name, `.json`), through `load_data`: this file holds no text of the capture.
Every call has a deadline (the data file's `deadline_s`); past it the test fails with "timed out
after N s"; a case's own process (`--case N`, `--origin N`) ends itself at it too, with the line
"timed out after N s in FUNCTION ..." on stderr and exit status 124. No buffer sized by
a record's numbers passes one allocation budget (1 GiB, or FORENSICS_MAX_ALLOC bytes): past it,
or where a record disagrees with the call run on it, the data file is refused (BadData), naming
the field. Without the vLLM this repro needs, the tests are skipped, saying why.

Run it with the vLLM under test installed: `pytest THIS_FILE.py`. Needs only torch, vllm and
pytest.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import unicodedata as ud
import warnings
from pathlib import Path

import pytest
import torch

#: the data file: this file's name with `.json`
DATA_FILE = Path(__file__).with_suffix(".json")
#: the largest data file read (bytes)
MAX_BYTES = 256 * 1024 * 1024
#: the data format this file reads
FORMAT = 1
#: the dtypes a record's tensor may have
DTYPES = {"bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16,
          "int32": torch.int32, "int64": torch.int64}
#: the longest deadline a data file may set (seconds)
MAX_DEADLINE = 3600
#: the range of every number of a record (a capture stores them as int64): past it torch
#: refuses a shape or an argument with an internal error
INT64 = (-(1 << 63), (1 << 63) - 1)
#: the most digits of a number a message prints in full: past them, its first and last
#: `NUMBER_ENDS` digits and its count of digits (a forged number may hold thousands)
MAX_DIGITS, NUMBER_ENDS = 40, 10
#: the prefix of the line a Triton case's process prints its outcome on (vLLM logs to stdout)
OUTCOME = "REPRO-OUTCOME "
#: the most bytes one buffer a test allocates from a record's numbers may take: 1 GiB, or
#: FORENSICS_MAX_ALLOC bytes (as `forensics` reads it: an integer, or with a K, M or G suffix)
MAX_ALLOC_ENV = "FORENSICS_MAX_ALLOC"


class BadData(Exception):
    """The data file is not one `forensics repro` wrote for this file."""


def _fail(where, why):
    raise BadData(f"{DATA_FILE.name}: {where}: {why}; write it again with `forensics repro`")


def _no_constant(name):
    _fail("the JSON text", f"holds {name}, which is no JSON number")


def _once(pairs):
    """An object of the JSON text, refusing a key given twice (readers differ on which wins)."""
    seen = set()  # (set.add gives None: a key is yielded only when seen before)
    for key in (key for key, _ in pairs if key in seen or seen.add(key)):
        _fail("the JSON text", f"key {ascii(key[:80])} is there twice in one object")
    return dict(pairs)


def number(value):
    """An integer as a message prints it: in full up to ``MAX_DIGITS`` digits, else its first
    and last ``NUMBER_ENDS`` digits with the count of digits (the one rule of every message)."""
    text = str(value)
    digits = len(text.lstrip("-"))
    if digits <= MAX_DIGITS:
        return text
    return f"{text[:-digits + NUMBER_ENDS]}...{text[-NUMBER_ENDS:]} ({digits} digits)"


def _int(value, where, low=INT64[0], high=INT64[1]):
    """``value`` when it is an int (not a bool) within [low, high] (int64's range unless
    given: a capture stores its numbers as int64)."""
    if not isinstance(value, int) or isinstance(value, bool):
        _fail(where, f"expected an integer, got {type(value).__name__}")
    if not low <= value <= high:
        _fail(where, f"{number(value)} is outside [{low}, {high}]")
    return value


def _str(value, where, optional=False):
    if not (isinstance(value, str) or (optional and value is None)):
        _fail(where, f"expected a string, got {type(value).__name__}")
    return value


#: what `forensics repro` escapes wherever it stands in a word (a word not NFC, a mark first too)
UNPRINTED = re.compile(@UNPRINTED_CLASS@)


def _words(value, where, optional=False):
    """A string this file prints in a message (a function's or field's name, the finding's
    words): one whose every character prints as itself, as `forensics repro` writes them."""
    _str(value, where, optional)
    if value is not None and UNPRINTED.search(value):
        _fail(where, f"holds {ascii(UNPRINTED.search(value).group())}, which it never writes")
    if value and (ud.category(value[0])[0] == "M" or not ud.is_normalized("NFC", value)):
        _fail(where, "begins with a combining mark or is not in NFC, which it never writes")
    return value


def _list(value, where):
    if not isinstance(value, list):
        _fail(where, f"expected a list, got {type(value).__name__}")
    return value


def _dict(value, where, keys):
    """``value`` when it is a dict holding exactly ``keys``."""
    if not isinstance(value, dict) or set(value) != set(keys):
        _fail(where, f"expected an object with the keys {sorted(keys)}")
    return value


def load_data(path=DATA_FILE):
    """The data file as plain values, its size, format and layout checked (BadData if not)."""
    try:
        with open(path, "rb") as stream:
            raw = stream.read(MAX_BYTES + 1)
    except OSError as exc:
        raise BadData(f"{path.name}: cannot be read ({exc.strerror}); keep it beside "
                      f"{Path(__file__).name}") from None
    if len(raw) > MAX_BYTES:
        _fail("the file", f"larger than {MAX_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=_once)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # (nested too deep)
        _fail("the file", f"not JSON ({exc})")
    _dict(data, "the file", ["format", "vllm", "deadline_s", "cases"])
    _int(data["format"], "format", FORMAT, FORMAT)
    vllm = _dict(data["vllm"], "vllm", ["needed", "capture"])
    _words(vllm["needed"], "vllm.needed")
    _str(vllm["capture"], "vllm.capture", optional=True)
    _int(data["deadline_s"], "deadline_s", 1, MAX_DEADLINE)
    for i, case in enumerate(_list(data["cases"], "cases")):
        _case(case, f"cases[{i}]")
    return data


def _case(case, where):
    """Check one case's layout: a known site, a step, a rank, a record, facts and a finding
    (and, for a V2 embedding, its origin: a record of its own, or null; for a case of an
    origin's site, its chain)."""
    keys = ["site", "function", "step", "rank", "record", "facts", "finding"]
    extra = [key for key in ("origin", "chain") if isinstance(case, dict) and key in case]
    _dict(case, where, keys + extra)
    _record(case, where)
    if "chain" in case:
        _chain(case, f"{where}.chain")
    if case.get("origin") is not None:
        origin = case["origin"]
        _dict(origin, f"{where}.origin",
              keys[:5] + ["chain"] if isinstance(origin, dict) and "chain" in origin
              else keys[:5])
        _record(origin, f"{where}.origin")
        if "chain" in origin:
            _chain(origin, f"{where}.origin.chain")
    facts = _dict(case["facts"], f"{where}.facts", ["vocab_size"])
    if facts["vocab_size"] is not None:
        _int(facts["vocab_size"], f"{where}.facts.vocab_size", 1)
    finding = _dict(case["finding"], f"{where}.finding",
                    ["text", "tensor", "element", "value", "lower", "upper", "indexed"])
    _words(finding["text"], f"{where}.finding.text")
    _words(finding["tensor"], f"{where}.finding.tensor", optional=True)
    _words(finding["indexed"], f"{where}.finding.indexed", optional=True)
    for key in ("element", "value", "lower", "upper"):
        if finding[key] is not None:
            _int(finding[key], f"{where}.finding.{key}")


def _chain(origin, where):
    """Check an origin's (or a case's) chain: the record of the call that stored one of its
    per-slot inputs a step before, the field (a tensor of both records) and the slots it stored
    the values of."""
    chain = _dict(origin["chain"], where, ["site", "function", "step", "rank", "record",
                                           "field", "slots"])
    _record(chain, where)
    field = _words(chain["field"], f"{where}.field")
    for holder in (chain, origin):
        if holder["record"].get(field, {}).get("kind") != "tensor":
            _fail(f"{where}.field", f"{ascii(field)} is no tensor of both records")
    for slot in _list(chain["slots"], f"{where}.slots"):
        _int(slot, f"{where}.slots", 0)


def function_of(record_case):
    """The vLLM function this file runs for the record's site (``FUNCTIONS``), the one every
    message names: a data file's ``function`` is checked as words only, and a forged one once
    named another function as the one that failed."""
    return FUNCTIONS[record_case["site"]]


def _record(case, where):
    """Check one record's layout: a known site, its function, a step, a rank and its fields."""
    if not isinstance(case["site"], str) or case["site"] not in RUNNERS:
        _fail(f"{where}.site", "not a site this file can run")
    _words(case["function"], f"{where}.function")
    _int(case["step"], f"{where}.step", 0)
    _int(case["rank"], f"{where}.rank", 0)
    record = case["record"]
    if not isinstance(record, dict):
        _fail(f"{where}.record", "expected an object")
    for name, field in record.items():
        _dict(field, f"{where}.record[{ascii(name)}]", ["kind", "value"])


class Fields(dict):
    """A record's decoded fields: a field the call reads and the record lacks (one the schema
    makes optional) is BadData naming it, never a KeyError."""

    def __missing__(self, name):
        _fail(f"record[{ascii(name)}]", "the record lacks this field, which the call reads")


def decode(field, where, spec=None):
    """One record field as the value the vLLM call reads (a tensor, an int, ids, a map); of
    the kind, (a tensor) the dimensions and (an int: a count or a bound) the range ``spec``
    gives, where given (its site's schema: ``[kind, dimensions, required, [low, high]]``):
    the one place a record's count or bound is checked before a call is sized by it."""
    kind, value = field["kind"], field["value"]
    ndim = None if spec is None else spec[1]
    if spec is not None and kind != spec[0] and kind in KINDS:
        _fail(f"{where}.kind", f"{ascii(kind)}, expected {ascii(spec[0])}")
    if kind == "tensor":
        value = _dict(value, where, ["dtype", "shape", "values"])
        if not isinstance(value["dtype"], str) or value["dtype"] not in DTYPES:
            _fail(where, f"dtype {ascii(value['dtype'])} is not one of {sorted(DTYPES)}")
        dtype = DTYPES[value["dtype"]]
        shape = [_int(n, f"{where}.shape", 0)
                 for n in _list(value["shape"], f"{where}.shape")]
        if not 1 <= len(shape) <= 2 or (ndim is not None and len(shape) != ndim):
            _fail(f"{where}.shape", f"expected {ndim or '1 or 2'} dimension(s)")
        low, high = (0, 1) if dtype is torch.bool else (torch.iinfo(dtype).min,
                                                         torch.iinfo(dtype).max)
        flat = [_int(v, f"{where}.values", low, high)  # in its dtype's range: never wrapped
                for v in _list(value["values"], f"{where}.values")]
        if len(flat) != (shape[0] * (shape[1] if len(shape) == 2 else 1)):
            _fail(f"{where}.values", f"{len(flat)} values for the shape {shape}")
        return torch.tensor(flat, dtype=dtype).reshape(shape)
    if kind == "int":
        return _int(value, where, *([] if spec is None else spec[3]))
    if kind in ("str_list", "opt_str_list"):
        return [_str(v, where, optional=kind == "opt_str_list") for v in _list(value, where)]
    if kind == "index_map":
        if not isinstance(value, dict):
            _fail(where, "expected an object")
        return {_str(k, where): _int(v, where) for k, v in value.items()}
    if kind == "ragged":
        return [[_int(v, where) for v in _list(row, where)]
                for row in _list(value, where)]
    _fail(where, f"unknown kind {ascii(kind)}")


#: the kinds of a record's fields
KINDS = ("tensor", "int", "str_list", "opt_str_list", "index_map", "ragged")


def record(case):
    """The case's record, decoded: ``{field: value}`` (:class:`Fields`), each field one of its
    site's (``FIELDS``) of the kind and dimensions it gives, and every required one there
    (BadData naming the field if not)."""
    schema = FIELDS[case["site"]]
    decoded = Fields()
    for name, field in case["record"].items():
        if name not in schema:
            _fail(f"record[{ascii(name)}]", f"not a field of a {case['site']} record")
        decoded[name] = decode(field, f"record[{ascii(name)}]", schema[name])
    missing = [name for name, spec in schema.items() if spec[2] and name not in decoded]
    if missing:
        _fail("record", f"lacks the field {ascii(missing[0])}, which every {case['site']} "
                        "record holds")
    return decoded


class NS:
    """A plain object holding the attributes a vLLM method reads (a stand-in)."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def real(function):
    """The plain function behind a torch.compile wrapper."""
    return getattr(function, "_torchdynamo_orig_callable", function)


def need_vllm(needed):
    """Skip, saying why, unless vLLM of the minor version ``needed`` is installed."""
    try:
        import vllm
    except ImportError as exc:
        pytest.skip(f"vLLM is not installed ({exc}); this repro needs vLLM {needed}.x")
    version = str(getattr(vllm, "__version__", "unknown"))
    if not (version == needed or version.startswith(needed + ".")):
        pytest.skip(f"this repro needs vLLM {needed}.x (the version that reproduced the "
                    f"capture's failure); installed: vLLM {version}")


class Deadline(BaseException):
    """The call ran past its deadline (never caught by the code under test's handlers)."""


@contextlib.contextmanager
def deadline(seconds):
    """Raise Deadline in the block after ``seconds`` (where signals can: the main thread)."""
    main = threading.current_thread() is threading.main_thread()
    if not hasattr(signal, "setitimer") or not main:
        yield
        return

    def expire(signum, frame):
        raise Deadline()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def require_interpreter():
    """Raise unless Triton's interpreter is on: a Triton case runs only in its own process
    (see ``run_in_interpreter``), where vLLM's kernels run on CPU."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("a Triton case runs in its own process, started with "
                           "TRITON_INTERPRET=1 (run_in_interpreter)")


def interpreted_kernels():
    """vLLM's Model Runner V2 kernels (``vllm.v1.worker.gpu.input_batch``), run by Triton's
    interpreter on CPU."""
    require_interpreter()
    from vllm.v1.worker.gpu import input_batch

    return input_batch


def max_alloc():
    """The budget of one allocation in bytes (see ``MAX_ALLOC_ENV``)."""
    text = os.environ.get(MAX_ALLOC_ENV, "").strip()
    unit = text[-1:].upper() if text[-1:].isalpha() else ""
    number = text[:-1] if unit else text
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(unit)
    if not text or scale is None or not (number.isascii() and number.isdigit()) \
            or len(number) > 19 or int(number) <= 0:  # as forensics reads it: else refused
        return 1 << 30
    return int(number) * scale


def budget(nbytes, what, value):
    """Raise BadData, naming the record's ``what`` and its ``value``, when an allocation of
    ``nbytes`` it sizes would pass :func:`max_alloc`: no number in the data file allocates
    beyond it (the replay that wrote the file held its buffers to the same budget)."""
    if nbytes > max_alloc():
        _fail(what, f"{value} would allocate {nbytes} bytes, past the allocation budget of "
                    f"{max_alloc()} bytes (raise {MAX_ALLOC_ENV} if the engine really had "
                    "buffers that large)")


def zeros(shape, dtype, what):
    """A ``shape`` buffer of zeros, held to the allocation budget first (``what``: the record's
    fields that sized it)."""
    shape = [max(int(n), 0) for n in shape]
    count = 1
    for n in shape:
        count *= n
    budget(count * torch.empty((), dtype=dtype).element_size(), what, " x ".join(map(str, shape)))
    return torch.zeros(shape, dtype=dtype)


def spare(shape, fill, dtype, extra, what="the record's buffer sizes"):
    """A ``shape`` buffer of ``fill`` with ``extra`` spare rows past its end: (the whole
    buffer, the view handed to vLLM); held to the allocation budget first."""
    whole = zeros([shape[0] + extra, *shape[1:]], dtype, what).fill_(fill)
    return whole, whole[:shape[0]]


def written_cells(first, second, start=0, stop=None):
    """``{"[i]" or "[i, j]": value}`` of every cell of rows ``start:stop`` the call wrote: the
    same after two runs whose buffers started at different fills."""
    same = (first == second)[start:stop]
    return {"[" + ", ".join(str(i) for i in (cell[0] + start, *cell[1:])) + "]":
            int(first[(cell[0] + start, *cell[1:])]) for cell in same.nonzero().tolist()}


def written_past(first, second, rows, what):
    """Raise IndexError when the call wrote a spare row past the first ``rows`` (see
    ``spare``), naming ``what`` and the first such cell."""
    past = written_cells(first, second, rows)
    if past:
        cell, value = next(iter(past.items()))
        unit = "rows" if first.dim() > 1 else "elements"
        raise IndexError(f"the call wrote {len(past)} cell(s) past the end of {what} "
                         f"({rows} {unit}): the first, {value}, at {what}{cell}")


def held(case, r):
    """Where the capture's bad index is: its tensor, element, value (read from the record)
    and bound, or the replay's words when the finding names no tensor; that it is unknown when
    the finding names an element the record does not hold, or one inside its bound (a forged
    data file's finding: its value was printed as the record's, "outside" a bound it is in)."""
    f = case["finding"]
    tensor, element = f["tensor"], f["element"]
    if tensor is None or element is None:
        return f"the capture's replay found: {f['text']}"
    lower = 0 if f["lower"] is None else f["lower"]
    bound = f"[{lower}, {f['upper']})" if f["upper"] is not None else f"[{lower}, unknown)"
    what = f", the valid indices of {f['indexed']}" if f["indexed"] else ""
    if tensor.startswith("out."):  # a buffer the call wrote, in the capture's replay
        return (f"in the capture's replay the call wrote {tensor[4:]}[{element}] = "
                f"{f['value']}, outside {bound}{what}")
    value = f["value"]
    if tensor not in r or torch.is_tensor(r[tensor]) and not 0 <= element < r[tensor].numel():
        return (f"the data file's finding names {tensor}[{element}], which the record does not "
                "hold: which index is out of range is unknown")
    if torch.is_tensor(r[tensor]):
        value = int(r[tensor].flatten()[element])
        if f["upper"] is not None and lower <= value < f["upper"]:
            return (f"the data file's finding names {tensor}[{element}], which holds {value}, "
                    f"inside {bound}: which index is out of range is unknown")
    return f"the capture's {tensor}[{element}] = {value} is outside {bound}{what}"


def read_unobserved(case, r):
    """For a Triton case whose finding names a field of the record holding an index outside
    its bound (an access Triton's interpreter does not check, so the kernel's run cannot show
    it): the words saying so and what is checked from the data instead; else ''."""
    f = case["finding"]
    tensor, element, upper = f["tensor"], f["element"], f["upper"]
    if tensor is None or element is None or upper is None or tensor not in r \
            or not torch.is_tensor(r[tensor]) or not 0 <= element < r[tensor].numel():
        return ""
    value, lower = int(r[tensor].flatten()[element]), f["lower"] or 0
    if lower <= value < upper:
        return ""
    return (f"{function_of(case)} uses an index outside its buffer, which Triton's interpreter "
            f"does not check: checked from the record instead (no fix to vLLM changes this "
            f"check), {held(case, r)}")


def ids_outside(values, upper, allowed, at=()):
    """(element, value) of every id in ``values`` (nested lists, or ``{element: id}``) outside
    [0, upper)."""
    if isinstance(values, dict):
        return [(k, v) for k, v in values.items() if not 0 <= v < upper and v not in allowed]
    bad = []
    for i, v in enumerate(values):
        if isinstance(v, list):
            bad += ids_outside(v, upper, allowed, (*at, i))
        elif not 0 <= v < upper and v not in allowed:
            bad.append(("".join(f"[{j}]" for j in (*at, i)), v))
    return bad
'''
