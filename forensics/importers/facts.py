"""The incident's facts in an imported capture: what the sources say, what ``--set`` gives,
``unknown`` for the rest; the importing tool and time under their own key, ``imported``.

An imported capture states no fact of the machine that imported it: its vLLM, torch and
Python, and the import time, are not the incident's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from forensics.digits import ascii_int
from forensics.errors import ConfigurationError
from forensics.escaping import capped, quoted
from forensics.manifest_facts import (
    CREATED,
    CUDA,
    HOST,
    MODEL,
    ORDINAL,
    PYTHON,
    TORCH,
    VLLM,
    Fact,
)

UNKNOWN = "unknown"

#: ``--set`` key -> the declared fact its value must fit (``versions.*`` and ``model.*``
#: nest), and ``notes``, free text
SETTABLE: dict[str, Fact | None] = {
    **{fact.field: fact for fact in (VLLM, TORCH, PYTHON, CUDA, *MODEL, HOST, CREATED)},
    "notes": None}
#: facts every imported capture states, ``unknown`` until a source or ``--set`` gives them
STATED = ("versions.vllm", "versions.torch", "versions.python", "model.name", "created")
_TRUE, _FALSE = ("true", "on", "yes", "1"), ("false", "off", "no", "0")


def parse_settings(settings: list[str]) -> dict[str, Any]:
    """``["versions.vllm=0.31.0", ...]`` -> ``{"versions.vllm": "0.31.0", ...}``, each value
    read as its key's declared fact (:data:`SETTABLE`) and checked by it.

    Raises ConfigurationError naming the setting, the key and the fix.
    """
    facts: dict[str, Any] = {}
    for setting in settings:
        key, sep, text = setting.partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not text:
            raise ConfigurationError(f"--set {setting!r}: expected KEY=VALUE, e.g. "
                                     "--set versions.vllm=0.31.0")
        if key not in SETTABLE:
            raise ConfigurationError(f"--set {setting!r}: unknown key {key!r}; one of "
                                     f"{', '.join(SETTABLE)}")
        facts[key] = _value(setting, text, SETTABLE[key])
    return facts


def _value(setting: str, text: str, fact: Fact | None) -> Any:
    """``text`` read as ``fact``'s type (a string, an integer in ASCII digits, or a boolean
    word), which must fit the fact (:meth:`~forensics.manifest_facts.Fact.fits`)."""
    if fact is None:
        return text
    value: Any = text
    if fact.kind is int:
        value = ascii_int(text, 18)
    elif fact.kind is bool:
        value = {**dict.fromkeys(_TRUE, True), **dict.fromkeys(_FALSE, False)}.get(text.lower())
    if value is None or not fact.fits(value):
        raise ConfigurationError(f"--set {quoted(capped(setting, 80))}: {fact.field} "
                                 f"{fact.refused}; give one that is")
    return value


def import_manifest(sources: list[str], facts: dict[str, Any],
                    now: datetime | None = None, ordinal: int = 0) -> dict[str, Any]:
    """The manifest entries of an imported capture: the facts given (``"a.b"`` keys nested),
    ``unknown`` for every stated fact not given, and ``imported`` (tool, time, ``sources``:
    the sources' names, :func:`forensics.importers.source_names`; ``ordinal_records``: how
    many records stand at a step that is only their line's order, ``ordinal``, when any)."""
    from forensics import __version__

    unknown_keys = sorted(set(facts) - set(SETTABLE))
    if unknown_keys:
        raise ConfigurationError(f"unknown fact {unknown_keys[0]!r}; one of {', '.join(SETTABLE)}")
    given = {key: UNKNOWN for key in STATED} | facts
    manifest: dict[str, Any] = {"versions": {"forensics": UNKNOWN}, "model": {}}
    for key, value in given.items():
        group, _, name = key.partition(".")
        if name:
            manifest.setdefault(group, {})[name] = value
        else:
            manifest[group] = value
    manifest["creator"] = UNKNOWN
    manifest["imported"] = {
        "tool": f"vllm-forensics {__version__}", "command": "forensics import",
        "time": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sources": list(sources),
    } | ({ORDINAL.keys[-1]: ordinal} if ordinal else {})
    manifest["sources"] = manifest["imported"]["sources"]
    return manifest
