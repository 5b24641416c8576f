"""Round 13 (issue 38): the model facts a capture's manifest states (``model.vocab_size``,
``num_speculative_tokens``, ...) are read with their declared type and range
(:data:`forensics.manifest_facts.MODEL`) by every reader: ``inspect``, the conclusion, the
known-issue evidence, the kernel contracts and the repro's data. A value of the wrong type or out
of range is "unknown" and named as refused, never shown as a fact (``vocabulary: on`` for
``true``, ``speculative tokens: -3``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from forensics.cli import main

ROOT = Path(__file__).resolve().parents[2]
STALE = ROOT / "data" / "stale-prev-row.capture"
#: (model key, a value of the wrong type or out of range, its label in the facts)
WRONG = [("vocab_size", True, "vocabulary"), ("vocab_size", [1, 2], "vocabulary"),
         ("vocab_size", 10**400, "vocabulary"), ("vocab_size", 3.2e4, "vocabulary"),
         ("vocab_size", "x" * 5000, "vocabulary"), ("num_embeddings", -5, "embedding rows"),
         ("num_speculative_tokens", -3, "speculative tokens"),
         ("tensor_parallel_size", 0, "tensor parallel"),
         ("async_scheduling", "yes", "async scheduling"), ("name", {"a": 1}, "model")]


def _capture(tmp_path: Path, key: str, value: Any) -> Path:
    """A copy of the bundled stale-row capture whose manifest's ``model[key]`` is ``value``."""
    folder = tmp_path / "m.capture"
    shutil.copytree(STALE, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.setdefault("model", {})[key] = value
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.mark.parametrize(("key", "value", "label"), WRONG)
def test_inspect_shows_a_wrong_model_fact_unknown_and_names_it_refused(
        key: str, value: Any, label: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``inspect`` printed ``vocabulary: on`` for ``true``, ``vocabulary: 1, 2`` for a list and
    ``speculative tokens: -3``: claims of the wrong type shown as facts."""
    assert main(["inspect", str(_capture(tmp_path, key, value))]) == 0
    out = capsys.readouterr().out
    assert f"  {label}: unknown\n" in out, out
    assert f"refused: manifest field model.{key} is not " in out, out
    assert len(max(out.splitlines(), key=len)) < 400, out


def test_the_conclusion_names_a_refused_model_fact(tmp_path: Path) -> None:
    """The conclusion's facts sentence says the vocabulary is unknown and why, not ``on``."""
    from forensics.present.capture_facts import facts_sentence, summary_facts
    from forensics.store.reader import load

    capture = load(_capture(tmp_path, "vocab_size", True))
    sentence = facts_sentence(summary_facts(capture.summary()))
    assert "vocabulary unknown;" in sentence and "vocabulary on" not in sentence, sentence
    assert "Manifest field model.vocab_size is not a vocabulary size (1 to " in sentence


@pytest.mark.parametrize(("key", "value", "label"), WRONG)
def test_the_known_issue_evidence_leaves_a_wrong_model_fact_out(
        key: str, value: Any, label: str) -> None:
    """A signature's fact clause never matches a refused value (``true`` was a vocabulary of
    1 to ``Evidence.id_bounds``)."""
    from forensics.known.evidence import facts_of

    facts = facts_of({"model": {key: value}, "runner": {"x": 1}})
    assert key not in facts and "runner" not in facts, facts
    assert facts_of({"model": {"vocab_size": 32000}, "runner": "V2"}) == {
        "vocab_size": 32000, "runner": "v2"}


def test_a_crash_dumps_config_states_only_facts_that_fit() -> None:
    """A dump's ``num_speculative_tokens`` of -1 or of 10**30 is no fact; 4 is."""
    from forensics.known.evidence import dump_facts

    event = {"kind": "crash_dump", "config": {"num_speculative_tokens": -1,
                                              "tensor_parallel_size": 10**30}}
    assert dump_facts([event]) == {}
    event["config"] = {"num_speculative_tokens": 4, "tensor_parallel_size": 2}
    assert dump_facts([event]) == {"num_speculative_tokens": 4, "tensor_parallel_size": 2}


@pytest.mark.parametrize("vocab", [True, -5, 2**40, "32000"])
def test_a_refused_vocabulary_is_no_bound_for_a_kernel_contract(vocab: Any) -> None:
    """The kernel contract's token-id bound comes from the declared fact: a vocabulary the
    manifest holds wrong judges nothing (``2**40`` once let every id pass)."""
    from forensics.manifest_facts import VOCAB, read_fact

    value, field, problem = read_fact({"model": {"vocab_size": vocab}}, VOCAB)
    assert value is None and field == "model.vocab_size" and problem.startswith("is not "), \
        (value, problem)
    assert read_fact({"model": {"vocab_size": 32000}}, VOCAB) == (32000, "model.vocab_size", "")


def test_the_repro_takes_no_refused_vocabulary_from_the_manifest() -> None:
    """``vocab_fact`` falls back on the manifest's vocabulary only when it fits."""
    from forensics.share.repro import vocab_fact

    class _Record:
        fields: dict[str, Any] = {}

    assert vocab_fact(_Record(), {"model": {"vocab_size": 2**40}}) is None  # type: ignore[arg-type]
    assert vocab_fact(_Record(), {"model": {"vocab_size": 32000}}) == 32000  # type: ignore[arg-type]


def _wrapped_shape(capture: Path) -> None:
    """Give the embedding segment's first ``input_ids`` no values and the shape 2**32 x 2**32,
    whose int64 product wraps to 0, its size (the sidecar index goes: it is rebuilt)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    seg = next(capture.glob("embedding*.arrows"))
    table = ipc.open_stream(seg.read_bytes()).read_all()
    columns = {"input_ids": [], "input_ids.shape": [2**32, 2**32]}
    for name, first in columns.items():
        values = table.column(name).to_pylist()
        values[0] = first
        at = table.schema.get_field_index(name)
        field = table.schema.field(at)
        table = table.set_column(at, field, pa.array(values, field.type))
    with ipc.new_stream(seg, table.schema) as writer:
        writer.write_table(table)
    for index in capture.glob("embedding*.idx"):
        index.unlink()


def test_a_tensor_shape_whose_product_wraps_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A stored tensor of no values whose shape is 2**32 x 2**32 (the int64 product wraps to
    0) passed the bulk check and raised numpy's ValueError in the reshape: an internal error.
    It is the capture's error, one line naming the segment, the row and the field."""
    capture = tmp_path / "wrap.capture"
    shutil.copytree(ROOT / "data" / "clean.capture", capture)
    _wrapped_shape(capture)
    assert main(["replay", str(capture)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "internal error" not in err, err
    assert "embedding.r0.w0.0000.arrows" in err and "input_ids" in err and "row 0" in err, err


@pytest.mark.parametrize("crashed", [False, True])
def test_known_signatures_are_not_judged_from_the_fix_alone(
        crashed: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``replay --variant patched`` alone of the stale-row capture (a known issue, with or
    without a crash event) said "No known signature matches: a reason to file a new issue" (or
    "... the capture shows no failure to report"): the signatures describe the engine's code's
    findings, and that code was not replayed. It says they were not judged; with upstream the
    known issue is named."""
    capture = tmp_path / "s.capture"
    shutil.copytree(STALE, capture)
    if crashed:
        (capture / "events-w0.jsonl").write_text(json.dumps(
            {"kind": "cuda_assert", "message": "Assertion failed", "rank": 0, "step": 10}) + "\n")
    main(["replay", str(capture), "--variant", "patched"])
    alone = " ".join(capsys.readouterr().out.split())
    assert "No known signature matches" not in alone, alone
    assert "Known signatures not judged: they describe the findings of the engine's code " \
           "(upstream or vllm), and none of its variants was replayed" in alone, alone
    main(["replay", str(capture), "--variant", "upstream", "--variant", "patched"])
    both = " ".join(capsys.readouterr().out.split())
    assert "Known issue stale-prev-positions-row" in both and "signatures not judged" not in both


def test_the_writeup_drafts_no_new_issue_from_the_fix_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``summary --format markdown --variant patched`` of a known issue drafted a new vLLM
    issue ("No known signature matches: a reason to file a new issue; a draft follows") when
    the capture holds a crash."""
    capture = tmp_path / "s.capture"
    shutil.copytree(STALE, capture)
    (capture / "events-w0.jsonl").write_text(json.dumps(
        {"kind": "cuda_assert", "message": "Assertion failed", "rank": 0, "step": 10}) + "\n")
    main(["summary", str(capture), "--format", "markdown", "--variant", "patched"])
    out = capsys.readouterr().out
    assert "a draft follows" not in out and "Draft: a new vLLM issue" not in out, out
    assert "Known signatures not judged" in " ".join(out.split()), out


@pytest.mark.parametrize(("setting", "refused"), [
    ("model.vocab_size=0", "model.vocab_size is not a vocabulary size (1 to 2147483647)"),
    ("model.tensor_parallel_size=99999999999", "model.tensor_parallel_size is not a count"),
    ("versions.vllm=latest", "versions.vllm is not a string naming a version"),
    ("model.async_scheduling=maybe", "model.async_scheduling is not true or false"),
    ("host=" + "h" * 300, "host is not a string of at most 256 characters")])
def test_import_set_refuses_a_fact_its_readers_would_refuse(setting: str, refused: str) -> None:
    """``import --set`` took ``model.vocab_size=0`` or a vLLM version ``latest``, which every
    reader then refused as unknown: it checks each value by the fact declared once
    (:mod:`forensics.manifest_facts`), in one line naming the field and why."""
    from forensics.errors import ConfigurationError
    from forensics.importers.facts import parse_settings

    with pytest.raises(ConfigurationError) as raised:
        parse_settings([setting])
    assert refused in str(raised.value) and "\n" not in str(raised.value), raised.value
    assert parse_settings(["model.vocab_size=32000", "versions.vllm=0.32.0", "notes=" + "n" * 300,
                           "model.async_scheduling=on"]) == {
        "model.vocab_size": 32000, "versions.vllm": "0.32.0", "notes": "n" * 300,
        "model.async_scheduling": True}


@pytest.mark.parametrize(("host", "shown"), [("node-7", "node-7"), ("h" * 300, "unknown")])
def test_the_probes_host_is_read_alike_by_triage_the_conclusion_and_open_many(
        host: str, shown: str, tmp_path: Path) -> None:
    """The probe states its host as ``process.host``: triage read it (at most 256 characters),
    ``open_many`` with its own limit (255), and the conclusion not at all (it read a top-level
    ``host`` only, which only ``import --set`` writes). One declared fact now, read alike."""
    from forensics.fleet.dataset import open_many
    from forensics.fleet.facts import manifest_facts
    from forensics.present.capture_facts import summary_facts
    from forensics.store.reader import load

    capture = tmp_path / "h.capture"
    shutil.copytree(STALE, capture)
    manifest = json.loads((capture / "manifest.json").read_text())
    manifest["process"] = {"host": host, "pid": 0}
    (capture / "manifest.json").write_text(json.dumps(manifest))
    facts, _ = manifest_facts(manifest)
    assert facts["host"] == shown and facts["pid"] is None
    assert summary_facts(load(capture).summary())["host"] == shown
    table = open_many([capture])["embedding"].to_table()
    hosts, pids = set(table.column("host").to_pylist()), set(table.column("pid").to_pylist())
    assert hosts == {None if shown == "unknown" else host} and pids == {None}, (hosts, pids)
