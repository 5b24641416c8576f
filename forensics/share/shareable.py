"""What a redacted capture may keep: closed vocabularies of dict keys and string values.

``forensics redact`` keeps a string (a value or a dict key) of the manifest, the events or a
summary record only when it is in one of these vocabularies, which hold nothing private:

- keys: the manifest and event keys this toolkit writes, and the sites' field names;
- values: ``unknown`` (a fact not known, as the toolkit writes it), event kinds, site names,
  built-in variant names, simulator scenario names, the speculative methods vLLM 0.33.0
  defines (``vllm.config.speculative.SpeculativeMethod``), KV-cache dtypes, tensor dtypes,
  and version strings or timestamps of a strict form
  (:data:`VERSION`, :data:`TIMESTAMP`: a local build tag such as ``0.33.0+corp.7`` is not).
"""

from __future__ import annotations

import functools
import re

from forensics.manifest_facts import MTP_METHODS, UNKNOWN

#: ``0.33.0``, ``2.14.0rc1``, ``0.32.0.post1``, ``3.11.9``: no local build tag
VERSION = re.compile(r"\d{1,4}(\.\d{1,6}){1,3}((a|b|rc)\d{1,4}|\.post\d{1,4}|\.dev\d{1,4})?")
#: ``2026-12-02T17:38:57Z`` (UTC, as the toolkit writes them)
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z")
#: who wrote a capture: ``vllm-forensics VERSION`` or one of these
CREATOR = re.compile(r"vllm-forensics " + VERSION.pattern)
CREATORS = ("forensics redact", "forensics import", "forensics simulate", "forensics shrink",
            "forensics.embedding_guard")
#: event kinds besides those that mean the engine failed (``CRASH_EVENT_KINDS``, kept too: a
#: redacted capture's crash verdict is its original's); a kernel launch's is not kept (its
#: fields are not redacted: ``kernels`` would read a launch without them)
EVENT_KINDS = ("probe_error", "probe_start", "probe_stop", "probe_writer_lost",
               "probe_unsupported", "guard_passed_on", "index_error", "guard", "warning",
               "crash", "redacted")
VARIANTS = ("upstream", "patched", "vllm")
#: ``vllm.config.speculative.SpeculativeMethod`` of vLLM 0.33.0, flattened
SPECULATIVE_METHODS = (
    "ngram", "draft_model", "suffix", "custom_class", "eagle", "eagle3", "extract_hidden_states",
    "dflash", "ngram_gpu", "dspark", *MTP_METHODS, "medusa", "mlp_speculator")
DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4", "int8",
          "bfloat16", "float16", "float32", "half", "float", "int32", "int64", "int16", "uint8",
          "bool")
RUNNERS = ("v1", "v2")
#: manifest and event keys the toolkit writes
KEYS = (
    "format", "created", "creator", "creator_command", "versions", "forensics", "python",
    "torch", "vllm", "triton", "model", "name", "vocab_size", "num_embeddings", "speculative",
    "method", "num_speculative_tokens", "async_scheduling", "tensor_parallel_size",
    "pipeline_parallel_size", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
    "kv_cache_dtype", "hardware", "host", "notes", "runner", "mode", "sites", "variants",
    "simulation", "scenario", "seed", "steps", "batch", "vocab", "spec_tokens", "accept_rate",
    "arrival_rate", "mean_output", "faults", "forced_faults", "regenerate", "sources",
    "redaction", "redacted", "token_ids", "request_ids", "manifest_and_events", "dropped",
    "kept_on_request", "kind", "time", "pid", "rank", "step", "site", "function", "detail",
    "message", "source", "line", "process", "count", "location", "where", "written", "errors",
    "error", "failed", "timeouts", "violations", "records", "dtype", "min", "max", "tensor",
    "frame",
    # a shrunk capture's ``shrink`` entry: counts, steps and where its engine stopped
    "shrink", "records_before", "records_kept", "steps_kept", "stopped_after", "before",
    # a probe_stop's count of the events its full events file left out (what was not judged)
    "events_dropped",
    # its count of the records a signal cut out of their hand-off to the writer (T131f)
    "lost_to_signal",
    # its count of the events its stalled writer could not take (T163a)
    "events_unwritten",
    # a simulated capture's flag: its vLLM clamps input ids (``clamped-placeholder``)
    "clamps",
    # the probe's settings (its manifest's ``probe`` entry, its ``probe_start``): public words
    # and numbers, its mode among them (whether the run was in guard mode)
    "probe", "ring", "flush_every", "handoff",
    # the probe's ``model.speculative_config``: its method and draft tokens (a model's path
    # under it goes, as any text of no closed vocabulary)
    "speculative_config", "draft_tensor_parallel_size")
#: names the probe and ``import`` write whose values a redacted capture does not keep (an
#: engine's id, a process's tag of its host, CPU numbers, an import's file names): dropped,
#: each named
WRITTEN = (
    "engine_id", "tag", "async_spec_decode", "started", "first_write_step", "kernels",
    "engine_cpus", "writer_cpus", "unacknowledged", "found", "recovered", "unsure_steps",
    "imported")
#: the probe's words for its mode and hand-off (``FORENSICS_MODE``, ``FORENSICS_HANDOFF``)
SETTING_WORDS = ("record", "guard", "batch")
#: fields that hold request ids
REQUEST_FIELDS = ("req_ids", "prev_req_ids", "prev_req_id_to_index")


@functools.cache
def closed_values() -> frozenset[str]:
    """Every string value a redacted capture may keep as it is (besides the patterns)."""
    from forensics.known.evidence import CRASH_EVENT_KINDS
    from forensics.simulator.scenarios import SCENARIOS
    from forensics.sites import SITES

    return frozenset((UNKNOWN, *CREATORS, *EVENT_KINDS, *CRASH_EVENT_KINDS, *VARIANTS,
                      *SETTING_WORDS,
                      *SPECULATIVE_METHODS, *DTYPES, *RUNNERS, *SITES, *SCENARIOS))


@functools.cache
def closed_keys() -> frozenset[str]:
    """Every dict key a redacted capture may keep: :data:`KEYS`, the sites' field names and
    ``simulate``'s own (each fault's name, under ``faults``, ``forced_faults`` and
    ``injected``: names of ours, once dropped as "fields of names forensics does not write")."""
    from forensics.simulator.scenarios import FAULTS, SCENARIOS

    fields = every_site_field()
    faults = {*FAULTS, *(name for sc in SCENARIOS.values() for name, _ in sc.v2_faults)}
    return frozenset((*KEYS, *fields, *(f"{name}_after" for name in fields), *faults,
                      "injected"))


@functools.cache
def id_keys() -> frozenset[str]:
    """The keys that name token ids or request ids in a record (each site's token fields and
    their ``_after`` copies, a summary's ``min`` and ``max``, :data:`REQUEST_FIELDS`): what
    stands under one in the manifest or an event is ids the records' redaction maps, so it
    goes (a key the toolkit knows, its value numbers: it was kept, the ids shipped as they
    were)."""
    from forensics.schema import SUMMARY_COMMON
    from forensics.sites import SITES, get_site

    tokens = {name for site in SITES for name in get_site(site).token_fields}
    return frozenset((*tokens, *(f"{name}_after" for name in tokens), *SUMMARY_COMMON,
                      *REQUEST_FIELDS, *(f"{name}_after" for name in REQUEST_FIELDS)))


@functools.cache
def tensor_names() -> frozenset[str]:
    """The tensor names a site's guard may name (:class:`forensics.sites.Violation`): its
    field names, and ``out.NAME`` for each of its output fields (``out.output_token_ids``)."""
    from forensics.sites import REGISTRY

    outputs = {f"out.{name}" for site in REGISTRY.values()
               for name in site_field_names(site, "output_fields")}
    return frozenset({*every_site_field(), *outputs})


@functools.cache
def every_site_field() -> frozenset[str]:
    """The field names every site declares (:func:`site_field_names`)."""
    from forensics.sites import REGISTRY

    return frozenset(name for site in REGISTRY.values() for name in site_field_names(site))


def shareable_tensor(value: object) -> bool:
    """Whether ``value`` is a tensor a site's guard names (:func:`tensor_names`), with the
    element the probe's id check adds (``input_ids[5]``): none of it is private."""
    found = _TENSOR.fullmatch(value) if isinstance(value, str) else None
    return found is not None and found["name"] in tensor_names()


_TENSOR = re.compile(r"(?P<name>[\w.]{1,100})(?:\[\d{1,20}\])?")


def site_field_names(site: object, declared: str = "fields") -> list[str]:
    """The field names a site declares (its ``fields``, or another such attribute, e.g.
    ``output_fields``: FieldSpecs or names)."""
    return [str(getattr(spec, "name", spec)) for spec in getattr(site, declared, None) or ()]


def shareable_value(value: str) -> bool:
    """Whether string ``value`` is in a closed vocabulary or of a strict public form."""
    return (value in closed_values() or VERSION.fullmatch(value) is not None
            or TIMESTAMP.fullmatch(value) is not None or CREATOR.fullmatch(value) is not None)


def shareable_key(key: object) -> bool:
    """Whether dict key ``key`` is one the toolkit writes."""
    return isinstance(key, str) and key in closed_keys()
