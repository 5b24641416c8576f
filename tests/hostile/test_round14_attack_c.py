"""Round 14, attacker C: the generated repro, `known`, `report`, `redact`, `check` against a
hostile capture author and a hostile local user (claims T72a-T72f)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.test_round9_attack9c import _repro_module as imported_repro

# ------------------------------------------------- T72a: the repro's numbers past int64


def _repro_module(folder: Path, record: dict[str, Any], site: str = "embedding") -> Any:
    """The generated file beside a data file of one ``site`` case holding ``record``."""
    case = {"site": site, "function": "f", "step": 0, "rank": 0, "record": record,
            "facts": {"vocab_size": None},
            "finding": {"text": "", "tensor": None, "element": None, "value": None,
                        "lower": None, "upper": None, "indexed": None}}
    return imported_repro(folder, {"format": 1, "vllm": {"needed": "0.33", "capture": None},
                                   "deadline_s": 5, "cases": [case]})


def _ids(shape: list[int], values: list[int]) -> dict[str, Any]:
    return {"kind": "tensor", "value": {"dtype": "int64", "shape": shape, "values": values}}


@pytest.mark.parametrize(("site", "record", "says"), [
    ("async_output", {"sampled_token_ids_cpu": _ids([0, 2**63], [])},
     "record['sampled_token_ids_cpu'].shape: 9223372036854775808 is outside "
     "[0, 9223372036854775807]"),
    ("embedding", {"input_ids": _ids([1], [0]), "num_embeddings": {"kind": "int",
                                                                   "value": 2**64}},
     "record['num_embeddings']: 18446744073709551616 is outside"),
    ("async_output", {"output_tail": {"kind": "ragged", "value": [[2**63]]}},
     "record['output_tail']: 9223372036854775808 is outside"),
    ("batch_change", {"prev_req_id_to_index": {"kind": "index_map", "value": {"a": -2**63 - 1}}},
     "record['prev_req_id_to_index']: -9223372036854775809 is outside"),
])
def test_a_repro_number_past_int64_is_the_data_files_fault_in_one_line(
        tmp_path: Path, site: str, record: dict[str, Any], says: str) -> None:
    """A forged data file's shape or number past int64 (no capture holds one) was handed to
    torch, which failed with a TypeError and pages of C++ frames; now BadData names it."""
    module = _repro_module(tmp_path, record, site)
    with pytest.raises(module.BadData) as caught:
        module.record(module.DATA["cases"][0])
    assert says in str(caught.value) and "\n" not in str(caught.value), caught.value
    assert str(caught.value).startswith("test_repro.json: ")


def test_a_repro_number_within_int64_still_decodes(tmp_path: Path) -> None:
    """The bound is int64's, not less: an empty tensor of a 2**63 - 1 wide shape and a rows
    count of 2**63 - 1 decode as they are."""
    module = _repro_module(tmp_path, {"sampled_token_ids_cpu": _ids([0, 2**63 - 1], []),
                                      "vocab_size": {"kind": "int", "value": 2**63 - 1}},
                           "async_output")
    record = module.DATA["cases"][0]["record"]
    assert list(module.decode(record["sampled_token_ids_cpu"], "t").shape) == [0, 2**63 - 1]
    assert module.decode(record["vocab_size"], "v") == 2**63 - 1


# ------------------------------------------- T72b: known's event words stand as words

LOGS = Path(__file__).resolve().parents[1] / "data"


def _known_ids(log_text: str, folder: Path) -> set[str]:
    """The catalogue entries that match the capture imported from an engine log."""
    import forensics
    from forensics.importers import import_sources
    from forensics.known import answer

    (folder / "engine.log").write_text(log_text)
    import_sources([folder / "engine.log"], folder / "i.capture", force=True)
    return {match.entry.id for match in answer(forensics.replay(folder / "i.capture")).matches}


def test_a_word_inside_a_user_path_matches_no_known_issue(tmp_path: Path) -> None:
    """A crash whose traceback runs under /home/kdavis held 'kda' as letters of the user's
    name: the GDN/KDA race matched ("event crash_dump mentioning 'kda'"); the same crash under
    /usr/lib matches nothing, and so does it now; a GDN kernel's own name still matches."""
    log = (LOGS / "vllm_dump_no_placeholder.log").read_text()
    assert "/usr/lib/python3.12" in log
    (tmp_path / "home").mkdir()
    assert "gdn-accepted-count-race" not in _known_ids(
        log.replace("/usr/lib/python3.12", "/home/kdavis/venv/lib/python3.12"), tmp_path / "home")
    (tmp_path / "kernel").mkdir()
    assert "gdn-accepted-count-race" in _known_ids(
        log.replace("/usr/lib/python3.12", "/usr/lib/python3.12/site-packages/vllm/"
                    "model_executor/layers/fla/ops/kda"), tmp_path / "kernel")


@pytest.mark.parametrize(("text", "word", "stands"), [
    ("/home/kdavis/x.py", "kda", False), ("KDAVIS", "kda", False), ("LGDN", "gdn", False),
    ("chatcmpl-xgdnq", "gdn", False), ("\u212ada", "kda", False),
    ("ops/kda.py", "kda", True), ("gdn_attn.py", "gdn", True),
    ("GDNAttentionMetadata", "gdn", True), ("fusedGdn", "gdn", True),
    ("causal_conv1d_fn", "causal_conv1d", True), ("a Logits Processor raised", "logits processor",
                                                  True)])
def test_an_event_word_stands_as_a_word_or_an_identifiers_part(text: str, word: str,
                                                              stands: bool) -> None:
    from forensics.known.matching import mentions

    assert mentions(text, word) is stands


# ----------------------------------------- T72c: redact drops a summary record's pid

PROBE_LINE = ("(EngineCore_DP0 pid=3000123) SM70-OUTPROBE: OUT-PATH out-of-range sampled ids "
              "[248320] (vocab_size=248320 num_sampled_ids=1 pid=3000123 uid=1000 "
              "port=29500)\n")


def test_a_summary_records_pid_past_the_token_bound_leaves_with_redaction(
        tmp_path: Path) -> None:
    """A probe line's ``pid=N`` pair is a summary record's integer field: past the token
    bound (Linux pids reach 4194304, vocabularies 248320) redaction kept it as it was; now
    it goes, as a pid of the manifest or an event does, and the manifest names it dropped."""
    import forensics
    from forensics.importers import import_sources

    (tmp_path / "engine.log").write_text(PROBE_LINE)
    import_sources([tmp_path / "engine.log"], tmp_path / "o.capture")
    assert next(iter(forensics.load(tmp_path / "o.capture"))).fields["pid"] == 3000123
    forensics.redact(tmp_path / "o.capture", tmp_path / "r.capture")
    redacted = forensics.load(tmp_path / "r.capture")
    fields = next(iter(redacted)).fields
    assert not {"pid", "uid", "port"} & set(fields) and 3000123 not in fields.values(), fields
    assert fields["max"] == 248320  # the evidence stays
    assert {"records.async_output.pid", "records.async_output.uid",
            "records.async_output.port"} <= set(redacted.manifest["redaction"]["dropped"])
    raw = b"".join(path.read_bytes() for path in (tmp_path / "r.capture").rglob("*")
                   if path.is_file())
    assert b"3000123" not in raw


# ------------------------------- T72d: check refuses a first finding's key no finding holds

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("first", [{"note": None}, {"Kind": None, "site": "async_output"}])
def test_a_first_finding_key_no_finding_holds_is_refused(
        tmp_path: Path, first: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """``{"note": null}`` as upstream's first finding is compared on a key no finding holds
    (None == None): ``check`` said "matches expected.json" whatever the first finding was, as
    the empty object refused in round 13 did (and a misspelt key, ``Kind``, was never
    compared). It is one line naming the field and the keys that are compared."""
    import shutil

    from forensics.cli import main

    capture = tmp_path / "c.capture"
    shutil.copytree(ROOT / "data" / "incident-b-vocab-sentinel.capture", capture)
    path = capture / "expected.json"
    expected = json.loads(path.read_text())
    expected["first_finding"]["upstream"] = first
    path.write_text(json.dumps(expected))
    assert main(["check", str(capture)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, (out, err)
    key = next(k for k in first if k not in ("site",))
    assert f"expected.json: field 'first_finding.upstream.{key}' is no key of a finding" in err
    assert "site, step, rank, row, element, tensor, kind, value, lower, upper, origin" in err
    assert not (capture / "expected.obtained.json").exists()


# ------------------------- T72e: the report of a capture of no records states its crash


def test_the_report_of_a_crash_dump_alone_states_the_crash_and_its_known_issues(
        tmp_path: Path) -> None:
    """An imported crash dump (no records, one crash event): ``known`` and ``summary`` say
    "Not explained" and match two known issues; its report said only "nothing to replay or
    judge", and was the one report written private (0600). It holds the same answer and
    gets the mode reports get."""
    import html
    import stat

    from forensics.atomic import shared_mode
    from forensics.importers import import_sources
    from forensics.present.report import write_report

    capture = tmp_path / "dump.capture"
    import_sources([LOGS / "vllm_dump_all_placeholder.log"], capture)
    page = write_report(capture, tmp_path / "dump.html")
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert "holds no records" in text and "nothing to replay or judge" not in text
    assert "Not explained: the capture holds a crash, yet no records were captured" in text
    assert "Known issue all-placeholder-drafts-race" in text, text
    assert "8 of 8 spec-decode token(s) -1" in text
    assert stat.S_IMODE(page.stat().st_mode) == shared_mode()


# ------------------------- T72f: redaction keeps the clamp's evidence (token 0 stays)


def _kinds(capture: Path) -> list[tuple[str, str, str, int, int]]:
    """Every finding of ``capture``'s replay: variant, site, kind, step, row."""
    import forensics

    table = forensics.findings_table(forensics.replay(capture))
    return sorted(zip(table["variant"], table["site"], table["kind"],
                      table["step"].astype(int), table["row"].astype(int), strict=True))


def test_redaction_keeps_every_finding_of_a_clamped_placeholder(tmp_path: Path) -> None:
    """vLLM 0.33.0 clamps a leaked -1 to token 0 before the embedding: the original capture
    shows 18 ``clamped_placeholder`` findings. Redaction permuted the embedding's 0 into
    another id, which the replay read as 9 ``unwritten_input`` findings (input nobody wrote: a
    race) and no clamp; the first findings, all the check compared, were the same. Token 0
    stays, as the clamp writes it, and every finding is the original's."""
    import forensics

    source = ROOT / "data" / "placeholder-leak.capture"
    result = forensics.redact(source, tmp_path / "shared.capture")
    assert _kinds(result.path) == _kinds(source)
    kinds = [kind for _, _, kind, _, _ in _kinds(result.path)]
    assert kinds.count("clamped_placeholder") == 18 and "unwritten_input" not in kinds
    assert result.token_domain == 32000
    moved = forensics.load(result.path).manifest["redaction"]["token_ids"]
    assert moved.startswith("ids in [1, 32000) mapped") and "ids <= 0" in moved


def test_the_token_table_keeps_0_and_cycles_the_rest() -> None:
    import numpy as np

    from forensics.share.redaction import token_table

    table = token_table(1000, b"k" * 32)
    assert table[0] == 0 and sorted(table.tolist()) == list(range(1000))
    assert not np.any(table[1:] == np.arange(1, 1000))
    seen, x = set(), 1
    while x not in seen:
        seen.add(x)
        x = int(table[x])
    assert len(seen) == 999
