"""The schema of the known-signature catalogue (``forensics/known/catalogue.toml``).

:func:`load_catalogue` reads the TOML with :mod:`tomllib` and checks every field, so a bad entry
fails with one line naming the file, the entry, the field and the fix. The data holds no code:
a signature is a tree of the clause kinds in :data:`CLAUSE_KINDS`, evaluated by
:mod:`forensics.known.matching`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.digits import plain_int
from forensics.errors import CaptureFormatError, reason
from forensics.escaping import terminal

CATALOGUE_PATH = Path(__file__).with_name("catalogue.toml")
RUNNERS = ("v1", "v2", "both", "unknown")
REF_KINDS = ("issue", "pr")
REF_STATES = ("open", "closed", "merged", "unknown")
VALUE_CLASSES = ("placeholder", "vocab_size", "negative", "past_end", "stale_row")
FINDING_KEYS = ("site", "tensor", "kind", "value_class", "origin", "variant", "effect")
#: a crash dump's scheduled drafts: every one -1, any one -1, or some -1 beside drafted ids (vLLM's
#: AsyncScheduler schedules every draft as -1, its placeholders: ``all`` and ``any`` hold of
#: every dump of an async-scheduling run, whatever its drafter wrote)
SPEC_TOKEN_CLASSES = ("all_placeholder", "any_placeholder", "some_placeholder")
#: clause kind -> the type its value must have
CLAUSE_KINDS: dict[str, type] = {"finding": dict, "fact": dict, "event": dict, "spec_tokens": str,
                "crash_without_findings": bool, "any": list}
DEFAULT_REPO = "vllm-project/vllm"
#: the deepest ``any`` clauses may nest (the bundled catalogue nests 1; matching recurses per
#: level)
MAX_CLAUSE_DEPTH = 32


@dataclass(frozen=True)
class Reference:
    """One thread: its number, whether an issue or a pull request, its state when checked."""

    number: int
    kind: str
    state: str
    verified: bool
    repo: str = DEFAULT_REPO

    def label(self) -> str:
        """``"#46533 (pr, merged)"``; another repository is named; unchecked facts say so."""
        where = "" if self.repo == DEFAULT_REPO else self.repo
        text = f"{where}#{self.number} ({self.kind}, {self.state})"
        return text if self.verified else f"{text} [not verified]"


@dataclass(frozen=True)
class Entry:
    """One known failure signature (fields as in the catalogue's header)."""

    id: str
    title: str
    runner: str
    methods: tuple[str, ...] | str
    versions: str
    workaround: str
    refs: tuple[Reference, ...]
    fix_pr: str
    fix_release: str
    require: tuple[dict[str, Any], ...]
    context: tuple[dict[str, Any], ...] = ()
    notes: str = ""
    #: the date its facts were last checked against the threads (``checked = YYYY-MM-DD``)
    checked: str = "unknown"

    def threads(self) -> str:
        """The entry's threads, comma-separated."""
        return ", ".join(ref.label() for ref in self.refs)

    def fix_text(self) -> str:
        """``"PR 46533, 50939 (first release: unknown)"``, ``"none known"`` or ``"unknown"``."""
        if self.fix_pr in ("none", "unknown"):
            return "none known" if self.fix_pr == "none" else "unknown"
        return f"PR {self.fix_pr} (first release: {self.fix_release})"


@dataclass(frozen=True)
class Catalogue:
    """The validated catalogue: entries in file order, and the race-evidence settings."""

    entries: tuple[Entry, ...]
    race_reader: dict[str, str] = field(default_factory=dict)
    race_writers: tuple[dict[str, str], ...] = ()


def load_catalogue(path: Path | str = CATALOGUE_PATH) -> Catalogue:
    """Read and validate the catalogue at ``path``.

    Raises:
        CaptureFormatError: unreadable TOML or a field of the wrong shape (named, with the fix).
    """
    from forensics.store.guarded import read_bytes

    path = Path(path)
    try:  # a FIFO or device is refused, never blocked on; a file past its cap is not read
        data = tomllib.loads(read_bytes(path, "catalogue").decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CaptureFormatError(f"catalogue '{terminal(path)}': cannot be read as TOML "
                                 f"({reason(exc)}); fix the file") from None
    except RecursionError:  # arrays or tables nested deeper than the parser recurses
        raise CaptureFormatError(f"catalogue '{terminal(path)}': cannot be read as TOML (nested "
                                 "deeper than Python's recursion limit); fix the file") from None
    if data.get("format") != 1:
        raise _bad(path, "format", "must be 1")
    entries = data.get("entry")
    if not isinstance(entries, list) or not entries:
        raise _bad(path, "entry", "must be a non-empty array of tables ([[entry]])")
    parsed = tuple(_entry(path, i, e) for i, e in enumerate(entries))
    ids = [e.id for e in parsed]
    if len(set(ids)) != len(ids):
        raise _bad(path, "entry.id", f"ids must be unique, got {sorted(ids)}")
    race = data.get("race", {})
    reader = _table(path, "race.reader", race.get("reader", {}))
    writers = race.get("writers", [])
    if not isinstance(writers, list):
        raise _bad(path, "race.writers", "must be an array of tables")
    return Catalogue(parsed, {k: str(v) for k, v in reader.items()},
                     tuple({k: str(v) for k, v in _table(path, "race.writers", w).items()}
                           for w in writers))


def _bad(path: Path, where: str, problem: str) -> CaptureFormatError:
    return CaptureFormatError(f"catalogue '{terminal(path)}': field '{where}' {problem}; fix the "
                              "entry")


def _table(path: Path, where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad(path, where, "must be a table")
    return value


def _text(path: Path, where: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(path, where, "must be a non-empty string (write \"unknown\" when unknown)")
    return value


def _entry(path: Path, index: int, raw: Any) -> Entry:
    """One validated :class:`Entry` from the ``index``-th ``[[entry]]`` table."""
    raw = _table(path, f"entry[{index}]", raw)
    name = f"entry[{index}]"
    ident = _text(path, f"{name}.id", raw.get("id"))
    name = f"entry '{terminal(ident)}'"
    runner = _text(path, f"{name}.runner", raw.get("runner"))
    if runner not in RUNNERS:
        raise _bad(path, f"{name}.runner", f"must be one of {list(RUNNERS)}, got {runner!r}")
    methods = raw.get("methods")
    if not (isinstance(methods, str) or (isinstance(methods, list) and methods
                                         and all(isinstance(m, str) for m in methods))):
        raise _bad(path, f"{name}.methods", "must be a list of method names or a string")
    fix = _table(path, f"{name}.fix", raw.get("fix"))
    signature = _table(path, f"{name}.signature", raw.get("signature"))
    require = signature.get("require")
    if not isinstance(require, list) or not require:
        raise _bad(path, f"{name}.signature.require", "must be a non-empty array of clauses")
    context = signature.get("context", [])
    for i, clause in enumerate([*require, *context]):
        check_clause(path, f"{name}.signature clause {i}", clause)
    return Entry(
        id=ident, title=_text(path, f"{name}.title", raw.get("title")), runner=runner,
        methods=tuple(methods) if isinstance(methods, list) else methods,
        versions=_text(path, f"{name}.versions", raw.get("versions")),
        workaround=_text(path, f"{name}.workaround", raw.get("workaround")),
        refs=tuple(_reference(path, f"{name}.refs[{i}]", r)
                   for i, r in enumerate(raw.get("refs") or [])),
        fix_pr=_text(path, f"{name}.fix.pr", fix.get("pr")),
        fix_release=_text(path, f"{name}.fix.release", fix.get("release")),
        require=tuple(require), context=tuple(context), notes=str(raw.get("notes", "")),
        checked=str(raw.get("checked", "unknown")))


def _reference(path: Path, where: str, raw: Any) -> Reference:
    raw = _table(path, where, raw)
    number = raw.get("number")
    if not plain_int(number) or number <= 0:
        raise _bad(path, f"{where}.number", "must be a positive thread number")
    if raw.get("kind") not in REF_KINDS:
        raise _bad(path, f"{where}.kind", f"must be one of {list(REF_KINDS)}")
    if raw.get("state") not in REF_STATES:
        raise _bad(path, f"{where}.state", f"must be one of {list(REF_STATES)}")
    if not isinstance(raw.get("verified"), bool):
        raise _bad(path, f"{where}.verified", "must be true or false")
    return Reference(number, raw["kind"], raw["state"], raw["verified"],
                     _text(path, f"{where}.repo", raw.get("repo", DEFAULT_REPO)))


def check_clause(path: Path, where: str, clause: Any, depth: int = 0) -> None:
    """Raise CaptureFormatError unless ``clause`` is one well-formed clause (recursively, at
    most :data:`MAX_CLAUSE_DEPTH` ``any`` deep)."""
    clause = _table(path, where, clause)
    if depth > MAX_CLAUSE_DEPTH:
        raise _bad(path, where, f"nests 'any' clauses deeper than {MAX_CLAUSE_DEPTH}")
    if len(clause) != 1 or next(iter(clause)) not in CLAUSE_KINDS:
        raise _bad(path, where, f"must have exactly one key of {list(CLAUSE_KINDS)}, got "
                                f"{sorted(clause)}")
    kind, value = next(iter(clause.items()))
    value = _typed(path, where, kind, value)
    if kind == "any":
        for i, inner in enumerate(value):
            check_clause(path, f"{where}.any[{i}]", inner, depth + 1)
    elif kind == "finding":
        _check_finding(path, f"{where}.finding", value)
    elif kind == "fact":
        _check_fact(path, f"{where}.fact", value)
    elif kind == "event":
        if not set(value) <= {"kind", "contains"}:
            raise _bad(path, f"{where}.event", "takes only 'kind' and 'contains'")
        for key, words in value.items():
            _words(path, f"{where}.event.{key}", words)
    elif kind == "spec_tokens" and value not in SPEC_TOKEN_CLASSES:
        raise _bad(path, f"{where}.spec_tokens", f"must be one of {list(SPEC_TOKEN_CLASSES)}")


def _typed(path: Path, where: str, kind: str, value: Any) -> Any:
    """``value`` when it has the type its clause kind needs (typed ``Any`` for the checks)."""
    if not isinstance(value, CLAUSE_KINDS[kind]):
        raise _bad(path, f"{where}.{kind}", f"must be a {CLAUSE_KINDS[kind].__name__}")
    return value


def _words(path: Path, where: str, value: Any) -> None:
    """Raise CaptureFormatError unless ``value`` is a string or a non-empty list of strings
    (what a clause compares text with: a number or a table there was an internal error)."""
    if not (isinstance(value, str) or (isinstance(value, list) and value
                                       and all(isinstance(v, str) for v in value))):
        raise _bad(path, where, "must be a string or a non-empty list of strings")


def _check_fact(path: Path, where: str, value: dict[str, Any]) -> None:
    if "name" not in value or "equals" not in value:
        raise _bad(path, where, "must have 'name' and 'equals'")
    if not isinstance(value["name"], str):
        raise _bad(path, f"{where}.name", "must be a string")
    if not isinstance(value["equals"], (str, bool, int, float)):
        raise _bad(path, f"{where}.equals", "must be a string, a number, true or false")


def _check_finding(path: Path, where: str, value: dict[str, Any]) -> None:
    unknown = set(value) - set(FINDING_KEYS)
    if unknown or not value:
        raise _bad(path, where, f"takes keys of {list(FINDING_KEYS)}, got {sorted(value)}")
    for key, wanted in value.items():
        if key == "variant" and not isinstance(wanted, str):
            raise _bad(path, f"{where}.variant", "must be a string (one variant's name)")
        _words(path, f"{where}.{key}", wanted)
    classes = value.get("value_class")
    for name in [classes] if isinstance(classes, str) else (classes or []):
        if name not in VALUE_CLASSES:
            raise _bad(path, f"{where}.value_class", f"must be one of {list(VALUE_CLASSES)}")
