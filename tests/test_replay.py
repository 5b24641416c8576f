"""replay(): inputs it accepts, variants (registered, user callables), outcomes and results."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from incident_records import VOCAB, clean_step

import forensics
from forensics.errors import CaptureFormatError, ConfigurationError, UnknownVariantError
from forensics.outcome import Outcome
from forensics.records import Record
from forensics.share.evidence import EXPECTED_KEYS, evidence_of
from forensics.sites import pipeline_key
from forensics.variants import registry
from forensics.variants.models import PatchedVariant, UpstreamVariant


def test_model_variants_are_registered() -> None:
    assert isinstance(registry.create("upstream"), UpstreamVariant)
    assert isinstance(registry.create("patched"), PatchedVariant)


def test_every_site_gets_a_verdict_for_every_variant_and_records_are_sorted() -> None:
    records = list(reversed(clean_step(1, ["a"]) + clean_step(0, ["a"])))
    result = forensics.replay(records)
    assert [pipeline_key(r) for r in result.records] == sorted(pipeline_key(r) for r in records)
    assert set(result.verdicts) == {"upstream", "patched"}
    assert all(list(v) == ["batch_change", "prepare_input_ids", "async_output", "embedding"]
               for v in result.verdicts.values())


def test_user_callables_and_their_exceptions() -> None:
    def boom(record):
        raise RuntimeError("kaput")

    def bad_index(record):
        raise IndexError("index 9 is out of bounds for dimension 0 with size 4")

    records = clean_step(0, ["a"])[:1]
    result = forensics.replay(records, variants={"boom": boom, "idx": bad_index,
                                                 "fine": lambda r: {}})
    assert result.outcomes["status"].tolist() == ["error", "index_error", "ok"]
    assert result.outcomes["message"].tolist()[0] == "RuntimeError: kaput"
    assert result.verdicts == {"boom": {"batch_change": "error"},
                               "idx": {"batch_change": "violation"},
                               "fine": {"batch_change": "ok"}}
    found = result.findings.iloc[0]
    assert (found["variant"], found["value"], found["upper"]) == ("idx", 9, 4)


class _Batches:
    """A variant with a ``run_many`` that fails on every batch (and a ``run`` counting calls)."""

    name = "batches"

    def __init__(self, answer: str) -> None:
        self.answer, self.single = answer, 0

    def run(self, record: Record) -> Outcome:
        self.single += 1
        return Outcome("ok")

    def run_many(self, site: str, records: list[Record]) -> list[Outcome]:
        if self.answer == "raise":
            raise RuntimeError("batch kaput")
        return [Outcome("ok")]


@pytest.mark.parametrize(("answer", "why"), [
    ("raise", "RuntimeError: batch kaput"),
    ("short", "it returned 1 outcomes for 2 records")])
def test_a_failed_batch_is_reported_naming_it_not_run_again(answer: str, why: str) -> None:
    variant = _Batches(answer)
    records = clean_step(3, ["a"])[:1] + clean_step(5, ["a"])[:1]
    result = forensics.replay(records, variants=[variant])
    assert variant.single == 0
    assert result.outcomes["status"].tolist() == ["error", "error"]
    assert set(result.outcomes["message"]) == {
        f"batches.run_many failed on the batch of 2 batch_change records of steps 3-5: {why}"}


def test_the_source_is_built_once_from_a_capture_or_records(make_capture) -> None:
    from forensics.replaying import Source
    from forensics.store.reader import load

    path = make_capture("clean", clean_step(0, ["a", "b"]))
    by_path, loaded = Source.of(path), load(path)
    assert by_path.name == str(path) and by_path.capture is not None
    assert Source.of(loaded).capture is loaded and Source.of(loaded).has_site("embedding")
    records = Source.of(list(reversed(clean_step(0, ["a"]))))
    assert records.capture is None and records.name == "<records>"
    assert [r.site for r in records.records] == [r.site for r in clean_step(0, ["a"])]
    assert records.has_site("embedding") and not records.has_site("nope")
    with pytest.raises(CaptureFormatError, match="got int"):
        Source.of(3)


def test_user_callable_gets_a_private_copy() -> None:
    def edit(record):
        record.fields["input_ids"][:] = 0
        return Outcome("ok")

    records = [Record("embedding", 0, 0, {"input_ids": np.array([VOCAB]),
                                          "num_embeddings": VOCAB})]
    result = forensics.replay(records, variants={"edit": edit})
    assert result.records[0]["input_ids"].tolist() == [VOCAB]
    assert result.verdicts["edit"]["embedding"] == "violation"


def test_summary_records_are_not_replayed_but_judged_for_every_variant() -> None:
    records = [Record("embedding", 0, 0, {"min": 0, "max": VOCAB, "num_embeddings": VOCAB},
                      summary=True)]
    result = forensics.replay(records)
    assert result.outcomes.empty
    assert result.outcome_counts["upstream"] == {"ok": 0, "index_error": 0, "error": 0}
    assert result.findings["variant"].tolist() == ["upstream", "patched"]
    # a site of summary records only: judged for the baseline, unjudged for a patch
    assert result.verdicts["upstream"] == {"embedding": "violation"}
    assert result.verdicts["patched"] == {"embedding": "unjudged"}


def test_origin_uses_upstream_even_when_it_is_not_replayed() -> None:
    out = Record("async_output", 0, 0, {
        "req_ids": ["a"], "prev_req_id_to_index": {"a": 0},
        "sampled_token_ids_cpu": np.array([[VOCAB, -1]], np.int32),
        "output_token_ids": [[1, -1, -1]], "vocab_size": VOCAB})
    emb = Record("embedding", 1, 0, {"input_ids": np.array([VOCAB]), "num_embeddings": VOCAB})
    result = forensics.replay([out, emb], variants=["patched"])
    sink = result.findings.iloc[0]
    assert (sink["origin"], sink["resolved"]) == ("async_output", True)


def test_capture_paths_are_loaded(make_capture) -> None:
    path = make_capture("clean", clean_step(0, ["a", "b"]))
    result = forensics.replay(path)
    assert result.source == str(path) and len(result.records) == 4
    assert json.loads(json.dumps(result.to_json()))["records"] == 4


def test_bad_inputs_raise_forensics_errors() -> None:
    with pytest.raises(CaptureFormatError):
        forensics.replay([{"site": "embedding"}])
    with pytest.raises(CaptureFormatError, match="num_embeddings"):
        forensics.replay([Record("embedding", 0, 0, {"input_ids": np.array([1])})])
    with pytest.raises(UnknownVariantError):
        forensics.replay(clean_step(0, ["a"]), variants=["nope"])
    with pytest.raises(ConfigurationError):
        forensics.replay(clean_step(0, ["a"]), variants=["upstream", "upstream"])


def test_expected_object_has_the_documented_shape() -> None:
    result = forensics.replay(clean_step(0, ["a"]))
    expected = evidence_of(result, EXPECTED_KEYS).to_json()
    assert expected["format"] == 1 and set(expected) == {"format", "verdicts", "first_finding"}
    assert expected["first_finding"] == {"upstream": None, "patched": None}


def test_tables() -> None:
    from forensics.present.tables import (
        SUMMARY_COLUMNS,
        findings_table,
        first_violation,
        summary_by_site,
    )

    records = clean_step(0, ["a"])
    records[3].fields["input_ids"] = np.array([1, 2, 3, 4, VOCAB])
    result = forensics.replay(records)
    assert list(summary_by_site(result).columns) == list(SUMMARY_COLUMNS)
    assert len(summary_by_site(result)) == 8
    assert findings_table(result, "patched", "embedding")["value"].tolist() == [VOCAB]
    assert first_violation(result)["value"] == VOCAB
    assert first_violation(forensics.replay(clean_step(0, ["a"]))) is None


def test_bounds_table_holds_the_checked_ranges() -> None:
    """ReplayResult.bounds: one row per variant, record and checked tensor, with the bound."""
    import numpy as np

    from forensics.judge.findings import BOUNDS_COLUMNS
    from forensics.records import Record
    from forensics.replaying import replay

    records = [Record("embedding", 3, 0, {"input_ids": np.array([5, 9, 12], dtype=np.int32),
                                          "num_embeddings": 10})]
    result = replay(records)
    assert list(result.bounds.columns) == list(BOUNDS_COLUMNS)
    row = result.bounds[result.bounds["variant"] == "upstream"].iloc[0]
    assert (row["min"], row["max"], row["lower"], row["upper"]) == (5, 12, 0, 10)
    assert row["tensor"] == "input_ids" and row["step"] == 3


@pytest.mark.parametrize("table", ["outcomes", "bounds"])
def test_large_tables_are_built_once_when_first_read_and_can_be_replaced(table: str) -> None:
    """The outcomes and bounds tables are built from what the replay kept on first read,
    then kept: a second read is the same table, equal to another replay's; assigning one
    replaces it (notebooks add rows)."""
    from forensics.replaying import replay

    path = Path(__file__).parents[1] / "data" / "stale-prev-row.capture"
    result = replay(path)
    first = getattr(result, table)
    assert len(first) and getattr(result, table) is first
    again = getattr(replay(path), table)
    assert again is not first and again.equals(first)
    setattr(result, table, first.iloc[:3])
    assert len(getattr(result, table)) == 3


def test_ids_past_int64_are_a_format_error_naming_the_field() -> None:
    """A uint64 id past int64 fits no checked range: one clear error, not a retry loop."""
    record = Record("embedding", 1, 0, {"input_ids": np.array([1, 2**63 + 5], dtype=np.uint64),
                                        "num_embeddings": 10})
    with pytest.raises(CaptureFormatError, match="'input_ids' holds values past int64"):
        forensics.replay([record])


def test_a_v2_sampled_id_past_int64_is_a_format_error_naming_the_field() -> None:
    """V2's ``post_update`` reads its sampled ids as int64 too: a uint64 id past int64 is one
    clear error (it was an OverflowError, an internal error, in the model)."""
    from pathlib import Path

    capture = Path(__file__).parents[1] / "data" / "v2-vocab-sample.capture"
    record = next(r for r in forensics.load(capture) if r.site == "post_update")
    sampled = np.asarray(record["sampled_tokens"]).astype(np.uint64)
    sampled[0, 0] = 2**64 - 1
    record.fields["sampled_tokens"] = sampled
    with pytest.raises(CaptureFormatError, match="'sampled_tokens' holds values past int64"):
        forensics.replay([record])


@pytest.mark.parametrize(("site", "field"), [("post_update", "vocab_size"),
                                              ("post_update", "all_token_ids_width"),
                                              ("combine_tokens", "vocab_size")])
def test_an_int_field_past_int64_is_a_format_error_naming_it(site: str, field: str) -> None:
    """In-memory records (a capture cannot store them) with an int field past int64: one
    clear error naming the field (V2's models raised OverflowError, an internal error)."""
    from pathlib import Path

    capture = Path(__file__).parents[1] / "data" / "v2-vocab-sample.capture"
    record = next(r for r in forensics.load(capture) if r.site == site)
    record.fields[field] = 2**64
    with pytest.raises(CaptureFormatError, match=f"'{field}' must be an integer int64 holds"):
        forensics.replay([record])


@pytest.mark.parametrize("name", ["incident-b-vocab-sentinel", "stale-prev-row"])
def test_threaded_replay_is_the_serial_replay(name, monkeypatch) -> None:
    """Worker threads (chunks read, run and judged ahead of the main thread) give the serial
    replay's result, order included."""
    from pathlib import Path

    import forensics.replaying as replaying

    path = Path(__file__).parents[1] / "data" / f"{name}.capture"
    threaded = forensics.replay(path)
    monkeypatch.setattr(replaying, "WORKERS", 0)
    serial = forensics.replay(path)
    for table in ("findings", "bounds", "outcomes", "index"):
        assert getattr(threaded, table).equals(getattr(serial, table)), table
    assert threaded.verdicts == serial.verdicts and len(threaded.bounds)

