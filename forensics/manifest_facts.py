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

from forensics.digits import plain_int
from forensics.versions import Release, release_of

UNKNOWN = "unknown"
#: the longest text fact read (a host name is at most 253; a version, a few dozen)
MAX_TEXT = 256
#: the largest integer fact read (a signed 32-bit integer, as a pid_t is)
MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class Fact:
    """One manifest fact: its column, its keys in the manifest and its type (``str``: text of
    at most :data:`MAX_TEXT` characters; :class:`~forensics.versions.Release`: a version
    string, see the module; ``int``: ``noun``, from ``low`` to ``high``; ``bool``: a flag)."""

    column: str
    keys: tuple[str, ...]
    kind: type
    low: int = 1
    high: int = MAX_INT
    noun: str = "an integer"

    @property
    def field(self) -> str:
        """The fact's manifest field as a reader names it: ``versions.vllm``."""
        return ".".join(self.keys)

    @property
    def unknown(self) -> str | None:
        """What an unknown value of the fact is: ``"unknown"`` for text, None otherwise."""
        return None if self.kind in (int, bool) else UNKNOWN

    def fits(self, value: Any) -> bool:
        """Whether ``value`` is of the fact's type, in its range and form."""
        if self.kind is bool:
            return isinstance(value, bool)
        if self.kind is int:
            return plain_int(value) and self.low <= value <= self.high
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            return False
        return self.kind is str or value == UNKNOWN or release_of(value) is not None

    @property
    def refused(self) -> str:
        """Why a value that does not fit is refused (a phrase after the field's name)."""
        if self.kind is int:
            return f"is not {self.noun} ({self.low} to {self.high})"
        return _REFUSALS[self.kind]


#: the speculative methods vLLM reads as ``mtp`` (vLLM 0.33.0's ``MTPModelTypes``: its
#: ``SpeculativeConfig`` replaces each with ``mtp``; older vLLMs kept the model's own name)
MTP_METHODS = (
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp",
    "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp",
    "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp",
    "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp",
    "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp",
    "inkling_mtp", "glm5_next_mtp")
#: the vLLM version a capture declares
VLLM = Fact("vllm", ("versions", "vllm"), Release)
_REFUSALS = {str: f"is not a string of at most {MAX_TEXT} characters",
             Release: f"is not a string naming a version as vLLM's releases spell it (such as "
                      f"0.33.0, in ASCII digits, at most {MAX_TEXT} characters)",
             bool: "is not true or false"}
#: the engine's model runner (``v1``, ``v2``), at the manifest's top level or under ``model``
RUNNER = Fact("runner", ("runner",), str)
#: where a manifest may state the runner, in order: its top level, then under ``model``
RUNNERS = (RUNNER, Fact("runner", ("model", "runner"), str))
#: the model's vocabulary (token ids index it) and its longest sequence (positions index it)
VOCAB = Fact("vocabulary", ("model", "vocab_size"), int, noun="a vocabulary size")
MAX_MODEL_LEN = Fact("max model length", ("model", "max_model_len"), int,
                     noun="a length in tokens")
#: the model facts a capture's manifest states (``model.*``), under the labels the
#: conclusion and ``inspect`` show; the known-issue evidence names each by its last key
MODEL = (Fact("model", ("model", "name"), str), VOCAB,
         Fact("embedding rows", ("model", "num_embeddings"), int, noun="a row count"),
         Fact("speculative method", ("model", "speculative"), str),
         Fact("speculative tokens", ("model", "num_speculative_tokens"), int, low=0,
              noun="a count of draft tokens"),
         Fact("async scheduling", ("model", "async_scheduling"), bool),
         Fact("tensor parallel", ("model", "tensor_parallel_size"), int,
              noun="a count of processes"), MAX_MODEL_LEN,
         Fact("hardware", ("model", "hardware"), str))


#: where the probe states three of :data:`MODEL` (``forensics/probe/manifest.py``: vLLM's
#: ``model_config.model`` and its ``speculative_config``), read where the field above is absent
PROBE_MODEL = {
    "model": Fact("model", ("model", "model"), str),
    "speculative method": Fact("speculative method", ("model", "speculative_config", "method"),
                               str),
    "speculative tokens": Fact("speculative tokens",
                               ("model", "speculative_config", "num_speculative_tokens"), int,
                               low=0, noun="a count of draft tokens")}


def read_stated(manifest: Any, fact: Fact) -> tuple[Any, str, str]:
    """:func:`read_fact` of ``fact``, else, where its field is absent, of the field the probe
    states it in (:data:`PROBE_MODEL`): a probe's capture said no speculative method."""
    value, field, problem = read_fact(manifest, fact)
    if value is None and not problem and fact.column in PROBE_MODEL and fact.keys[0] == "model":
        return read_fact(manifest, PROBE_MODEL[fact.column])
    return value, field, problem


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
    return (value, fact.field, "") if fact.fits(value) else (None, fact.field, fact.refused)


def refusal(field: str, problem: str) -> str:
    """The phrase naming a refused field: ``manifest field F is not ...: read as unknown``."""
    return f"manifest field {field} {problem}: read as unknown"


def runner_of(manifest: Any) -> str | None:
    """The runner ``manifest`` states (:data:`RUNNERS`, the first stated), lower-cased as vLLM
    names its runners (``v1``, ``v2``); None when it states none that fits. Every reader that
    decides by the runner asks here: the known-issue evidence read ``V2`` as ``v2`` while the
    replay, the repro and triage read it as no runner they knew."""
    for fact in RUNNERS:
        value, _, _ = read_fact(manifest, fact)
        if value is not None:
            return str(value).lower()
    return None


def vllm_version(manifest: Any) -> tuple[str | None, str]:
    """``(version, refused)``: the vLLM version ``manifest`` names (:data:`VLLM`); None when
    it names none; ``"unknown"`` when it names it unknown, or names one :func:`read_fact`
    refuses, and then ``refused`` says which field and why (else ``""``)."""
    value, field, problem = read_fact(manifest, VLLM)
    if problem:
        return UNKNOWN, refusal(field, problem)
    return value, ""


#: the facts of the run beside the model's: torch's, Python's and CUDA's versions, the host
#: (as ``import --set`` states it; the probe's is ``process.host``) and when it was made
TORCH = Fact("torch", ("versions", "torch"), str)
PYTHON = Fact("python", ("versions", "python"), str)
CUDA = Fact("cuda", ("versions", "cuda"), str)
HOST = Fact("host", ("host",), str)
#: the process that wrote a capture, as the probe states it: its host and process id
PROCESS_HOST = Fact("host", ("process", "host"), str)
PID = Fact("pid", ("process", "pid"), int, noun="a process id")
CREATED = Fact("created", ("created",), str)
#: the records of an imported capture at a step its source never named (a log's probe line
#: naming none: its step is the line's order among the probe lines), as ``import`` counts them
ORDINAL = Fact("records at ordinal steps", ("imported", "ordinal_records"), int,
               noun="a record count")
#: the records of the capture a shrunk one was shrunk from (``forensics shrink``): its counts and
#: its notes may be of those, not of the records it kept
SHRUNK_FROM = Fact("records before shrinking", ("shrink", "records_before"), int,
                   noun="a record count")


#: why a capture the probe made holds no record (:func:`no_records_why`)
PROBE_NO_RECORDS = "the probe saw no call, or its segments were removed"


def no_records_why(manifest: Any) -> str:
    """Why a capture holds no record, as its manifest tells: one ``forensics import`` made (its
    ``imported`` entry) read logs or crash dumps alone; else the probe saw no call, or the
    capture's segments were removed."""
    if isinstance(manifest, dict) and isinstance(manifest.get("imported"), dict):
        return "it was imported from logs or crash dumps alone"
    return PROBE_NO_RECORDS


def ran_in_guard_mode(manifest: Any) -> bool:
    """Whether the manifest says the probe ran in guard mode (its ``probe.mode``, as the probe
    writes it: ``"guard"``; anything else, or none, says nothing of it)."""
    probe = manifest.get("probe") if isinstance(manifest, dict) else None
    return isinstance(probe, dict) and probe.get("mode") == "guard"
