"""A capture's manifest facts, read with checks: each fact's field and type declared once
(:class:`Fact`), and one reading of it (:func:`read_fact`) for every reader. A fact the
manifest lacks, or holds with the wrong type, out of range or out of form, is unknown.

The vLLM version a capture declares (:data:`VLLM`, :func:`vllm_version`) is read here for
triage's row, the known-issue evidence, the clamp judgement and the conclusion alike: a string
as vLLM's releases spell it (:func:`forensics.versions.release_of`: ASCII digits, no control
character, one line) of at most :data:`MAX_TEXT` characters, or the word ``unknown``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from forensics.versions import Release, release_of

UNKNOWN = "unknown"
#: the longest text fact read (a host name is at most 253; a version, a few dozen)
MAX_TEXT = 256
#: the largest process id read (a pid_t is a signed 32-bit integer)
MAX_PID = 2**31 - 1


@dataclass(frozen=True)
class Fact:
    """One manifest fact: its column, its keys in the manifest and its type (``str``: text of
    at most :data:`MAX_TEXT` characters; :class:`~forensics.versions.Release`: a version
    string, see the module; ``int``: a process id, 1 to :data:`MAX_PID`; ``bool``: a flag)."""

    column: str
    keys: tuple[str, ...]
    kind: type

    @property
    def field(self) -> str:
        """The fact's manifest field as a reader names it: ``versions.vllm``."""
        return ".".join(self.keys)

    @property
    def unknown(self) -> str | None:
        """What an unknown value of the fact is: ``"unknown"`` for text, None otherwise."""
        return None if self.kind in (int, bool) else UNKNOWN


#: the vLLM version a capture declares
VLLM = Fact("vllm", ("versions", "vllm"), Release)
_REFUSALS = {str: f"is not a string of at most {MAX_TEXT} characters",
             Release: f"is not a string naming a version as vLLM's releases spell it (such as "
                      f"0.33.0, in ASCII digits, at most {MAX_TEXT} characters)",
             int: f"is not a process id (1 to {MAX_PID})", bool: "is not true or false"}


def read_fact(manifest: Any, fact: Fact) -> tuple[Any, str, str]:
    """``(value or None, field, problem)``: the fact's checked value, else None and the field
    refused with why (``problem`` is ``""`` when it is only missing, or empty text)."""
    value: Any = manifest
    for depth, key in enumerate(fact.keys):
        if not isinstance(value, dict):
            return None, ".".join(fact.keys[:depth]), "is not an object"
        value = value.get(key)
        if value is None:
            return None, fact.field, ""
    if fact.unknown is not None and value == "":
        return None, fact.field, ""
    return (value, fact.field, "") if fits(value, fact.kind) else \
        (None, fact.field, _REFUSALS[fact.kind])


def refusal(field: str, problem: str) -> str:
    """The phrase naming a refused field: ``manifest field F is not ...: read as unknown``."""
    return f"manifest field {field} {problem}: read as unknown"


def fits(value: Any, kind: type) -> bool:
    """Whether ``value`` is of ``kind`` and in its range (:class:`Fact`)."""
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_PID
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        return False
    return kind is str or value == UNKNOWN or release_of(value) is not None


def vllm_version(manifest: Any) -> tuple[str | None, str]:
    """``(version, refused)``: the vLLM version ``manifest`` names (:data:`VLLM`); None when
    it names none; ``"unknown"`` when it names it unknown, or names one :func:`read_fact`
    refuses, and then ``refused`` says which field and why (else ``""``)."""
    value, field, problem = read_fact(manifest, VLLM)
    if problem:
        return UNKNOWN, refusal(field, problem)
    return value, ""
