"""``forensics repro``: a standalone pytest file a vLLM maintainer can run without this
package, and the data file beside it.

The capture is replayed through the installed vLLM's real code (the ``vllm`` variant); for each
site it leaves out of range, the first failing record becomes one test case: the record's
fields, the facts its bounds come from (the vocabulary) and the finding, written as JSON to
``NAME.json`` beside ``NAME.py``. ``NAME.py`` is the same for every capture
(:mod:`forensics.share.repro_template`: the sites' ``Site.repro`` bodies between a fixed head
and tail); it reads the JSON at run time through a guarded loader, so no text of the capture
(its name, request ids, manifest, notes, field names) is ever written as code, a docstring or
a comment. Each test calls vLLM's own function on CPU with the smallest stand-ins it reads
(the ones :mod:`forensics.variants.vllm_adapters` uses) under a deadline, and fails on an
``IndexError`` or an id written outside the capture's vocabulary: it fails on the unpatched code
and passes once a fix keeps the index in range; without the vLLM it needs it skips, saying why.
Model Runner V2's sites (``combine_tokens``, ``post_update``) call vLLM's Triton kernel, each in
a process of its own with Triton's interpreter on (:mod:`forensics.share.repro_template`), and
check the ids the kernel wrote, and that it wrote nothing past its buffers' ends. A V2
capture's ``embedding`` case also holds its ``origin``: the record whose vLLM call wrote its ids
(:func:`origin_record`); its test runs that call on the origin's recorded inputs and checks the
ids it writes, so a fix to that call reaches the embedding's test (None: the capture holds no
such record, and the test says it checks the recorded ids). Where an input of that origin
(``last_sampled_tokens``) was stored a step before by another call the capture holds
(:func:`chain_record`: ``post_update``), the origin carries that record too (its ``chain``: the
record, the field and the slots); the test runs that call first and puts the values it stores
in place of the recorded ones for those slots, so a fix two calls back reaches the test too.
A case of that origin's site (``combine_tokens``) carries its own chain the same way, so a fix
to the call that stored its input reaches its test too.
The file imports only the standard library, torch, vllm and pytest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.errors import ConfigurationError
from forensics.escaping import terminal
from forensics.manifest_facts import runner_of

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from forensics.api_types import CaptureArg
    from forensics.records import Record

#: the deadline of each vLLM call of a generated repro (seconds), unless --deadline says
DEFAULT_DEADLINE = 300
#: the longest deadline a generated repro's vLLM call may be given (seconds)
MAX_DEADLINE = 3600
#: the data format the generated file reads (``FORMAT`` in its head)
DATA_FORMAT = 1


def _carried_site() -> str:
    """The site whose test derives its ids from its origin's vLLM call in a V2 capture: the
    sink (the embedding reads the ``input_ids`` ``combine_sampled_and_draft_tokens`` writes)."""
    from forensics.sites import SINK

    return SINK


def failing_records(capture: CaptureArg) -> tuple[list[tuple[Record, dict[str, Any]]],
                                                   dict[str, Any], str]:
    """The first record of each site the installed vLLM's real code leaves out of range, with
    its first finding, in the order the engine ran them (step, rank, pipeline order: an origin
    runs before the sites its ids reach, so it comes first, as does V2's ``post_update``,
    which stores a sampled id a step before ``combine_tokens`` writes it), the sites named as
    an origin first among records of one step; the capture's manifest ({} for records given
    in memory); and the line saying why none was chosen, where none is
    (:func:`nothing_to_reproduce`). The real code says only that an
    index left its range; where the ``upstream`` model names the tensor and element on the same
    record, that finding is the one returned (its ``real_code`` key: the real code's finding).

    Raises MissingDependencyError / UnsupportedVersionError without a supported vLLM.
    """
    import forensics
    from forensics.judge.findings import is_judged
    from forensics.present.tables import findings_table
    from forensics.sites import reproducible_sites, site_order
    from forensics.variants.vllm_adapters import require_vllm

    require_vllm()
    result = forensics.replay(capture, variants=["vllm", "upstream"])
    table = findings_table(result)
    table = table[(table["kind"] == "out_of_bounds") & table["site"].isin(reproducible_sites())]
    chosen = []
    # a finding it could not judge (a summary record's value) is no call that left its range
    ran = table[(table["variant"] == "vllm") & is_judged(table)]
    for _, rows in ran.groupby("site", sort=False):
        first = _plain(rows.sort_values(["step", "rank"]).iloc[0].to_dict())
        chosen.append((result.records[int(first["record"])],
                       _named(table, first) or first))
    origins = set(table["origin"].dropna()) if "origin" in table.columns else set()
    manifest = dict(getattr(result.capture, "manifest", None) or {})
    v2 = runner_of(manifest) == "v2"
    failing = {int(i) for i in table["record"]}
    for record, finding in chosen:
        if record.site == _carried_site() and (v2 or _kernel_site(finding.get("origin"))):
            origin = origin_record(result.records, record, finding.get("origin"), failing)
            finding["origin_record"] = origin
            if origin is not None:
                finding["chain_record"] = chain_record(result.records, origin, failing)
        elif record.site in origins and _kernel_site(record.site):  # V2's, manifest or not
            finding["chain_record"] = chain_record(result.records, record, failing)
    chosen.sort(key=lambda pair: (pair[0].step, pair[0].rank, pair[0].site not in origins,
                                  site_order(pair[0].site)))
    return chosen, manifest, "" if chosen else nothing_to_reproduce(capture, result)


def nothing_to_reproduce(capture: CaptureArg, result: Any) -> str:
    """The line of a capture in whose records the installed vLLM's code (``result``'s ``vllm``
    replay) finds nothing out of range: that it holds no record, or that the records judged
    hold none, naming what was not judged (:func:`not_judged_text`): never that the code
    leaves no index out of range in what it never ran."""
    name = terminal(getattr(capture, "path", capture))
    not_judged = not_judged_text(result)
    unjudged = f" (not judged: {not_judged})" if not_judged else ""
    if not len(result.records):
        return (f"'{name}' holds no record the installed vLLM's code could replay{unjudged}; "
                "nothing to reproduce")
    judged = " in the records it judged" if not_judged else ""
    return (f"the installed vLLM's code leaves no index out of range in '{name}'{judged}"
            f"{unjudged}; nothing to reproduce (a model-only finding is not reproducible on the "
            "real code)")


def not_judged_text(result: Any) -> str:
    """What the installed vLLM's replay (the ``vllm`` variant of ``result``) did not judge, in
    words: records whose call raised another error or that a deadline left unanswered, records
    of sites this install does not know, the ends of files cut short, records the probe never
    wrote (:data:`~forensics.store.unjudged.RECORDS`), summary records (which no code runs);
    "" when there are none."""
    from forensics.present.summary_findings import summary_records
    from forensics.store.unjudged import RECORDS, unjudged_of, unjudged_text

    capture, outcomes = getattr(result, "capture", None), result.outcomes
    errored = int(((outcomes["variant"] == "vllm") & (outcomes["status"] == "error")).sum())
    summaries = len(summary_records(result))
    parts = [f"{errored} record(s) whose call raised another error or was not answered"
             if errored else "", unjudged_text(unjudged_of(capture), RECORDS),
             f"{summaries} summary record(s): a least and a greatest value each, which no code "
             "runs" if summaries else ""]
    return "; ".join(part for part in parts if part)


def _kernel_site(name: Any) -> bool:
    """Whether ``name`` is a registered site whose vLLM code is a Triton kernel (V2's)."""
    from forensics.sites import SITES, get_site

    return isinstance(name, str) and name in SITES and get_site(name).kernel is not None


def origin_record(records: Sequence[Record], sink: Record, origin: Any,
                  failing: Collection[int] = ()) -> Record | None:
    """The record of site ``origin`` that wrote the ids ``sink`` (an embedding) reads: the
    latest one of that site at ``sink``'s rank and a step no later than ``sink``'s (of several
    at that step, a capture's duplicates, the first whose index is in ``failing``, whatever
    their order); None when the capture holds none (or no origin is named)."""
    if not isinstance(origin, str):
        return None
    before = [i for i, r in enumerate(records) if r.site == origin and r.rank == sink.rank
              and r.step <= sink.step]
    if not before:
        return None
    top = max(records[i].step for i in before)
    latest = [i for i in before if records[i].step == top]
    return records[next((i for i in latest if i in failing), latest[0])]


def chain_record(records: Sequence[Record], origin: Record, failing: Collection[int]
                 ) -> tuple[Record, str, list[int]] | None:
    """The record of the call that stored a per-slot input of ``origin`` (the embedding's
    origin) a step before: a reproducible Triton site listing that field among its outputs, the
    latest record at ``origin``'s rank and an earlier step (one of the same step runs after
    it), with the field and the slots of its ``idx_mapping`` whose stored values (the record's
    ``FIELD_after``) are the ones ``origin`` read; None when the capture holds no such record,
    or when that record's index is not in ``failing`` (the replay finds that call in range, so
    a fix leaves what it stores, the recorded values, as they are). Of several records at that
    step (a capture may hold duplicates), the first in ``failing`` that stored a value
    ``origin`` read, whatever their order in the capture."""
    from forensics.sites import reproducible_sites

    kernel_sites = [name for name in reproducible_sites()
                    if name != origin.site and _kernel_site(name)]
    for field, value in origin.fields.items():
        writers = [name for name in kernel_sites if field in _outputs(name)]
        before = [i for i, r in enumerate(records) if r.site in writers
                  and r.rank == origin.rank and r.step < origin.step and field in r.fields]
        if not before:
            continue
        latest = max(records[i].step for i in before)
        for at in (i for i in before if records[i].step == latest and i in failing):
            slots = _stored_slots(records[at], field, value)
            if slots:
                return records[at], field, slots
    return None


def _stored_slots(writer: Record, field: str, read: Any) -> list[int]:
    """The slots of ``writer``'s ``idx_mapping`` where the ``field`` it stored
    (``FIELD_after``) is the value ``read`` holds."""
    import numpy as np

    read = np.asarray(read).reshape(-1)
    stored = np.asarray(writer.fields.get(f"{field}_after", [])).reshape(-1)
    return sorted({int(s) for s in np.asarray(writer.fields.get("idx_mapping", []))
                   if 0 <= s < min(len(read), len(stored)) and read[s] == stored[s]})


def _outputs(name: str) -> tuple[str, ...]:
    """The fields site ``name``'s call writes (its ``Site.output_fields``)."""
    from forensics.sites import get_site

    return tuple(get_site(name).output_fields)


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A table row as a finding: plain Python values, empty cells as None."""
    from forensics.judge.findings import to_python

    return {key: to_python(value) for key, value in row.items()}


def _named(table: Any, real: dict[str, Any]) -> dict[str, Any] | None:
    """The ``upstream`` model's first finding on the record of ``real`` that names the tensor
    holding the bad index, with ``real`` under ``real_code``; None when there is none."""
    same = table[(table["variant"] == "upstream") & (table["record"] == real["record"])]
    if "index_tensor" not in same.columns:
        return None
    same = same[same["index_tensor"].notna()]
    if not len(same):
        return None
    return {**_plain(same.iloc[0].to_dict()), "real_code": real}




def script_text() -> str:
    """The generated pytest file: the same text for every capture (no capture input); the
    characters it refuses in a word it prints are those :mod:`forensics.escaping` escapes."""
    from forensics.escaping import unprinted_class
    from forensics.share.repro_template import HEAD
    from forensics.share.repro_template_tail import TAIL
    from forensics.sites import get_site, reproducible_sites
    from forensics.validate import int_range

    runners = []
    for name in reproducible_sites():
        assert name.isidentifier(), name  # a registered site's name
        _, body = get_site(name).repro or ("", "")
        runners.append(f"\n\ndef run_{name}(r):\n{body}")
    triton = sorted(name for name in reproducible_sites() if get_site(name).kernel is not None)
    runners.append("\n\n#: the sites whose vLLM code is a Triton kernel (run in Triton's "
                   "interpreter, each in its own process)\n"
                   f"TRITON_SITES = frozenset({tuple(triton)!r})\n")
    fields = {name: {spec.name: [spec.kind, spec.ndim, spec.required, list(int_range(spec))]
                     for spec in get_site(name).fields} for name in reproducible_sites()}
    functions = {name: (get_site(name).repro or ("", ""))[0] for name in reproducible_sites()}
    runners.append("#: the vLLM function each site's runner calls, named in every message\n"
                   f"FUNCTIONS = {functions!r}\n")
    runners.append("#: the site embedding the ids (run on them as recorded unless its case "
                   f"carries their origin)\nSINK = {_carried_site()!r}\n")
    runners.append("#: each site's record fields: [kind, dimensions of a tensor, required, the "
                   "range of an int (both ends in)]\n"
                   f"FIELDS = {fields!r}\n")
    return HEAD.replace("@UNPRINTED_CLASS@", unprinted_class()) + "".join(runners) + TAIL


def field_data(kind: str, value: Any) -> dict[str, Any]:
    """One record field as JSON data (``{"kind", "value"}``) of its schema ``kind``."""
    import numpy as np

    if kind == "tensor":
        array = np.asarray(value)
        return {"kind": kind, "value": {"dtype": array.dtype.name, "shape": list(array.shape),
                                        "values": array.reshape(-1).tolist()}}
    if kind == "int":
        return {"kind": kind, "value": int(value)}
    if kind == "index_map":
        return {"kind": kind, "value": {str(k): int(v) for k, v in value.items()}}
    if kind == "ragged":
        return {"kind": kind, "value": [[int(v) for v in row] for row in value]}
    return {"kind": kind, "value": [None if v is None else str(v) for v in value]}


def vocab_fact(record: Record, manifest: dict[str, Any]) -> int | None:
    """The vocabulary size the ids are checked against: the record's ``vocab_size``, else the
    manifest's ``model.vocab_size`` (:data:`~forensics.manifest_facts.VOCAB`, read with its
    checks); None when the capture holds neither as a positive int."""
    import numpy as np

    from forensics.manifest_facts import VOCAB, read_fact

    value = record.fields.get("vocab_size")
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
        return int(value)
    stated, _, _ = read_fact(manifest, VOCAB)
    return stated  # type: ignore[no-any-return]


def finding_data(finding: dict[str, Any]) -> dict[str, Any]:
    """What the replay found, as data: its words, and (where the model names the element
    holding the bad index) that tensor, element, value, bound and what it indexes."""
    from forensics.escaping import inert
    from forensics.present.finding_words import what_happened

    text = what_happened(finding)
    if "real_code" in finding:
        text = ("the installed vLLM's call leaves an index out of range; in the upstream "
                f"model, {text}")
    held = bool(finding.get("held")) and finding.get("index_tensor") is not None

    def number(key: str) -> int | None:
        value = finding.get(key)
        return None if value is None else int(value)

    return {"text": inert(text), "tensor": finding["index_tensor"] if held else None,
            "element": number("index_at") if held else None, "value": number("value"),
            "lower": number("lower"), "upper": number("upper"),
            "indexed": finding.get("indexed") if held else None}


def record_data(record: Record) -> dict[str, Any]:
    """A record as the data file holds it: its site, its vLLM function, step, rank and schema
    fields."""
    from forensics.sites import get_site

    site = get_site(record.site)
    kinds = {spec.name: spec.kind for spec in site.fields}
    function, _ = site.repro or ("", "")
    return {"site": site.name, "function": function, "step": int(record.step),
            "rank": int(record.rank),
            "record": {name: field_data(kinds[name], value)
                       for name, value in record.fields.items() if name in kinds}}


def case_data(record: Record, finding: dict[str, Any], manifest: dict[str, Any]
              ) -> dict[str, Any]:
    """One test case: the record's data (:func:`record_data`), the facts and the finding; for
    a V2 embedding (``finding`` holds ``origin_record``) also ``origin``: the data of the
    record whose vLLM call wrote its ids, None when the capture holds none this file can run,
    with its ``chain`` (:func:`chain_record`) where the capture holds one; a case of an
    origin's site (``finding`` holds ``chain_record``) carries its own ``chain`` likewise."""
    from forensics.sites import reproducible_sites

    case = {**record_data(record), "facts": {"vocab_size": vocab_fact(record, manifest)},
            "finding": finding_data(finding)}
    if "origin_record" in finding:
        origin = finding["origin_record"]
        case["origin"] = None if origin is None or origin.site not in reproducible_sites() \
            else record_data(origin)
        if case["origin"] is not None and finding.get("chain_record") is not None:
            case["origin"]["chain"] = chain_data(finding["chain_record"])
    elif finding.get("chain_record") is not None:
        case["chain"] = chain_data(finding["chain_record"])
    return case


def chain_data(chain: tuple[Record, str, list[int]]) -> dict[str, Any]:
    """A chain (:func:`chain_record`) as the data file holds it: the record's data, the field
    and the slots."""
    writer, field, slots = chain
    return {**record_data(writer), "field": field, "slots": slots}


def repro_data(chosen: list[tuple[Record, dict[str, Any]]], manifest: dict[str, Any],
               installed: str, deadline: int) -> dict[str, Any]:
    """The data file's object: the vLLM minor version that reproduced it, the deadline and the
    cases."""
    from forensics.manifest_facts import UNKNOWN, vllm_version

    captured, _ = vllm_version(manifest)
    return {"format": DATA_FORMAT,
            "vllm": {"needed": ".".join(installed.split(".")[:2]),
                     "capture": None if captured == UNKNOWN else captured},
            "deadline_s": int(deadline),
            "cases": [case_data(record, finding, manifest) for record, finding in chosen]}


def data_path(script: str | os.PathLike[str]) -> Path:
    """The data file beside the generated ``script`` (``NAME.py`` -> ``NAME.json``)."""
    return Path(script).with_suffix(".json")


def write_repro(capture: CaptureArg, out: str | os.PathLike[str], *,
                force: bool = False, deadline: int = DEFAULT_DEADLINE) -> Path:
    """Write the reproducer of ``capture`` at ``out`` and its data beside it (see the module
    docstring); ``deadline``: the seconds each vLLM call may run.

    Raises:
        ConfigurationError: ``out`` does not end in ``.py``, it or its data file exists
            without ``force`` or lies inside the capture's folder (with ``force`` too),
            ``deadline`` is outside [1, 3600] s, or the installed vLLM finds nothing out of
            range in the capture.
        MissingDependencyError / UnsupportedVersionError: no supported vLLM is installed.
    """
    from forensics.atomic import refuse_inside_captures, user_path, write_text_atomically
    from forensics.variants.vllm_adapters import require_vllm

    target = user_path(out)
    data = data_path(target)
    if target.suffix != ".py":
        raise ConfigurationError(f"'{terminal(target)}' does not end in .py; name the pytest file "
                                 "NAME.py (its data goes to NAME.json)")
    if not 1 <= deadline <= MAX_DEADLINE:
        raise ConfigurationError(f"--deadline {deadline}: give 1 to {MAX_DEADLINE} seconds")
    for path in (target, data):
        refuse_inside_captures(path, [capture])
        if path.exists() and not force:
            raise ConfigurationError(f"'{terminal(path)}' exists; pass --force to replace it")
    installed = require_vllm()
    chosen, manifest, nothing = failing_records(capture)
    if not chosen:
        raise ConfigurationError(nothing)
    text = json.dumps(repro_data(chosen, manifest, installed, deadline), ensure_ascii=True,
                      allow_nan=False)
    write_text_atomically(data, text + "\n")
    write_text_atomically(target, script_text())
    return target
