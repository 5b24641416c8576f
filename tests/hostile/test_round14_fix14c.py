"""Round 14, fix C: the generated repro checks every count and bound of its data file against
the range records are read with, and prints no number in full past ``MAX_DIGITS`` digits;
``redact`` maps only the fields that hold token ids (claims T74a-T74c)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forensics.errors import CaptureFormatError
from tests.hostile.test_round9_attack9c import _repro_module as imported_repro

ROOT = Path(__file__).resolve().parents[2]

# ------------------------------------- T74a: a count or bound outside its range is BadData


def _repro(folder: Path, record: dict[str, Any], site: str = "embedding",
           finding: dict[str, Any] | None = None) -> Any:
    """The generated file beside a data file of one ``site`` case holding ``record``."""
    case = {"site": site, "function": "f", "step": 0, "rank": 0, "record": record,
            "facts": {"vocab_size": None},
            "finding": finding or {"text": "", "tensor": None, "element": None, "value": None,
                                   "lower": None, "upper": None, "indexed": None}}
    return imported_repro(folder, {"format": 1, "vllm": {"needed": "0.33", "capture": None},
                                   "deadline_s": 5, "cases": [case]})


def _embedding(rows: int) -> dict[str, Any]:
    return {"input_ids": {"kind": "tensor", "value": {"dtype": "int64", "shape": [1],
                                                      "values": [0]}},
            "num_embeddings": {"kind": "int", "value": rows}}


@pytest.mark.parametrize("rows", [-2, -1])
def test_a_negative_embedding_row_count_is_the_data_files_fault(tmp_path: Path,
                                                                rows: int) -> None:
    """``num_embeddings`` -2 reached ``expand`` (torch's "numel: integer multiplication
    overflow"); -1 built a weight of one row (``expand`` keeps a -1 size), a test of nothing.
    Both are refused before the call, in one line naming the field and its range."""
    module = _repro(tmp_path, _embedding(rows))
    with pytest.raises(module.BadData) as caught:
        module.record(module.DATA["cases"][0])
    says = str(caught.value)
    assert f"record['num_embeddings']: {rows} is outside [0, 16777216]" in says, says
    assert "\n" not in says and says.startswith("test_repro.json: ")


def test_an_empty_weight_is_a_bound_the_capture_holds(tmp_path: Path) -> None:
    """0 rows is a bound a capture may hold (every id is outside it, as the replay says): it
    decodes, and the call on it fails on the id, as the engine's did."""
    module = _repro(tmp_path, _embedding(0))
    assert module.record(module.DATA["cases"][0])["num_embeddings"] == 0


def _sample(site: str) -> Any:
    """A valid record of ``site`` from the shipped captures."""
    import forensics

    path = {"post_update": "v2-negative-draft", "combine_tokens": "v2-negative-draft",
            "rejection_drafts": "v2-wrong-last-token"}.get(site, "clean")
    return next(r for r in forensics.load(ROOT / "data" / f"{path}.capture") if r.site == site)


def _int_fields() -> list[tuple[str, str]]:
    from forensics.sites import get_site, reproducible_sites

    return [(site, spec.name) for site in reproducible_sites()
            for spec in get_site(site).fields if spec.kind == "int"]


@pytest.mark.parametrize(("site", "name"), _int_fields())
def test_the_repro_and_the_reader_refuse_the_same_ints(tmp_path: Path, site: str,
                                                       name: str) -> None:
    """Each int field of a reproducible site has one range, declared in its schema
    (``limits``, capped at ``MAX_BOUND``): a record one past either end is refused when read,
    naming the field, and so is the repro's data file; both ends decode in the repro."""
    from forensics.validate import validate_record

    module = _repro(tmp_path, {})
    low, high = module.FIELDS[site][name][3]
    spec = module.FIELDS[site][name]
    for value in (low, high):
        assert module.decode({"kind": "int", "value": value}, "f", spec) == value
    for value in (low - 1, high + 1):
        with pytest.raises(module.BadData, match=f"is outside \\[{low}, {high}\\]"):
            module.decode({"kind": "int", "value": value}, "f", spec)
        if abs(value) >= 2**63:
            continue  # past int64: the reader refuses it as no int64 (round 14's T72a)
        record = _sample(site)
        record.fields[name] = value
        with pytest.raises(CaptureFormatError, match=repr(name)):
            validate_record(record, "r")
    assert low >= 0  # every int a call reads counts or sizes something


def test_a_stored_record_outside_its_range_is_refused_when_read(tmp_path: Path) -> None:
    """The columnar reader screens the ranges too: a record written unchecked with
    ``num_embeddings`` -1 is refused when the capture is read, naming the field."""
    import forensics
    from forensics.store.writer import CaptureWriter

    record = _sample("embedding")
    record.fields["num_embeddings"] = -1
    writer = CaptureWriter(tmp_path / "c.capture", {})
    writer.append(record, validated=True)
    writer.close()
    with pytest.raises(CaptureFormatError, match="'num_embeddings' must be >= 0, got -1"):
        list(forensics.load(tmp_path / "c.capture"))


# ------------------------------------------------ T74b: a message caps a number's digits

HUGE = -(10**4299) - 7  # 4,300 digits: the most Python's json reads


def test_a_forged_huge_number_is_printed_cut(tmp_path: Path) -> None:
    """The "outside [lo, hi]" line printed a forged number in full (4,300 digits); now its
    first and last ten digits and its count of digits."""
    module = _repro(tmp_path, _embedding(HUGE))
    with pytest.raises(module.BadData) as caught:
        module.record(module.DATA["cases"][0])
    says = str(caught.value)
    assert "record['num_embeddings']: -1000000000...0000000007 (4300 digits) is outside" in says
    assert len(says) < 200, len(says)


@pytest.mark.parametrize("key", ["element", "value", "lower", "upper"])
def test_a_findings_number_is_an_int64(tmp_path: Path, key: str) -> None:
    """A finding's number is printed by the failing test's message: past int64 (no capture
    holds one) it was printed in full; now the data file is refused, the number cut."""
    finding = {"text": "", "tensor": "input_ids", "element": 0, "value": 5, "lower": 0,
               "upper": 4, "indexed": None, key: 10**4299}
    with pytest.raises(Exception, match=r"\(4300 digits\) is outside") as caught:
        _repro(tmp_path, _embedding(4), finding=finding)
    assert type(caught.value).__name__ == "BadData" and len(str(caught.value)) < 200


def test_a_number_up_to_max_digits_prints_in_full(tmp_path: Path) -> None:
    module = _repro(tmp_path, {})
    assert module.number(-(10**39)) == "-1" + "0" * 39  # 40 digits
    assert module.number(10**40) == "1000000000...0000000000 (41 digits)"
    assert module.number(7) == "7"


# ------------------------------------- T74c: redact maps only the fields that are token ids

#: the SM70 probe's line, with a request number and a process's numbers the line may carry
PROBE = ("(EngineCore_DP0 pid=3000123) SM70-OUTPROBE: OUT-PATH out-of-range sampled ids "
         "[248320] (vocab_size=248320 num_sampled_ids=1 num_placeholders=5 first_placeholder=1 "
         "old_no_spec_end=23997 request_num=987654321 pid=3000123 uid=1000)\n")
#: the embedding's probe line: ids 5 (in range: permuted) to 250000 (past the rows: stays)
TEMB = "(EngineCore_DP0 pid=1) SM70-TEMB: rows=248320 input=(7,) dtype=torch.int64 min=5 " \
       "max=250000\n"


def _imported(folder: Path, text: str) -> tuple[Any, Any]:
    """The capture imported from a log of ``text`` and its redacted copy, loaded."""
    import forensics
    from forensics.importers import import_sources

    (folder / "e.log").write_text(text)
    import_sources([folder / "e.log"], folder / "o.capture")
    forensics.redact(folder / "o.capture", folder / "r.capture")
    return forensics.load(folder / "o.capture"), forensics.load(folder / "r.capture")


def test_a_summary_records_counts_and_line_stay_as_they_are(tmp_path: Path) -> None:
    """``num_sampled_ids=1`` became 86575 and the importer's ``line`` a random number (every
    integer of a token site's summary went through the permutation but its bound); a request
    number past the bound stayed. Now the counts, positions and line stay; an integer of a
    name nobody declared goes, listed as ``records.async_output.*``."""
    original, redacted = _imported(tmp_path, PROBE + TEMB)
    before, after = ([r.fields for r in capture] for capture in (original, redacted))
    kept = ("line", "num_sampled_ids", "num_placeholders", "first_placeholder",
            "old_no_spec_end", "vocab_size", "max")
    assert {k: after[0][k] for k in kept} == {k: before[0][k] for k in kept}, after[0]
    assert after[0]["line"] == 1 and after[0]["num_sampled_ids"] == 1
    assert not {"request_num", "pid", "uid"} & set(after[0])
    assert 987654321 not in after[0].values()
    assert "records.async_output.*" in redacted.manifest["redaction"]["dropped"]
    assert after[1]["num_tokens"] == 7 and after[1]["line"] == 2  # the embedding's
    assert after[1]["max"] == 250000 and after[1]["min"] != 5  # an id past the rows stays


def test_a_redacted_summary_replays_to_the_same_findings(tmp_path: Path) -> None:
    import forensics
    from forensics.present.tables import findings_table

    _imported(tmp_path, PROBE + TEMB)
    columns = ["site", "step", "kind", "tensor", "value", "lower", "upper"]
    tables = [findings_table(forensics.replay(tmp_path / name))[columns].to_dict("records")
              for name in ("o.capture", "r.capture")]
    assert tables[0] and tables[0] == tables[1]


def test_min_and_max_of_a_tensor_of_no_ids_are_no_ids(tmp_path: Path) -> None:
    """A summary of the embedding's ``positions`` (its ``tensor`` names them): its min and max
    are positions, not token ids, and stay; of its ``input_ids`` they are ids, permuted."""
    import forensics
    from forensics.records import Record
    from forensics.store.writer import CaptureWriter

    writer = CaptureWriter(tmp_path / "o.capture", {})
    for step, tensor in enumerate(("positions", "input_ids")):
        writer.append(Record("embedding", step, 0, {"min": 10, "max": 20, "tensor": tensor,
                                                    "num_embeddings": 1000}, summary=True))
    writer.close()
    forensics.redact(tmp_path / "o.capture", tmp_path / "r.capture")
    positions, ids = (r.fields for r in forensics.load(tmp_path / "r.capture"))
    assert (positions["min"], positions["max"]) == (10, 20)
    assert (ids["min"], ids["max"]) != (10, 20)
