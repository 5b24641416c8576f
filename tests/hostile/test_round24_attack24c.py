"""Round 24 of hostile input, attack 24c: sentences a capture can make false (a wrong sentence
is worse than none)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile.test_round2 import check_said, run_cli

# ------------------------------ T150a: redact states no fact of this machine as the engine's


def test_redact_does_not_give_an_unknown_version_this_machine_s(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log imported alone names no version, no creator and no time ("unknown"): its
    redacted copy named the installed vLLM and torch, this machine's Python and the time of
    the redaction ("Capture: vllm 0.33.0; torch 2.14.0; created <now>"), which its summary
    stated as the engine's, while its own ``dropped`` listed ``versions.vllm``."""
    source, out = tmp_path / "s.capture", tmp_path / "r.capture"
    log = tmp_path / "engine.log"
    log.write_text("SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=5 max=1000 step=3\n"
                   "RuntimeError: CUDA error: device-side assert triggered\n")
    code, _, err = run_cli(capsys, "import", log, "-o", source)
    assert code == 0, err
    code, text, err = run_cli(capsys, "redact", source, "-o", out, "--variant", "upstream")
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["versions"] == {"forensics": "unknown", "python": "unknown",
                                    "torch": "unknown", "vllm": "unknown"}, manifest
    assert manifest["created"] == "unknown" and manifest["creator"] == "unknown", manifest
    assert "versions.vllm" not in text, text
    code, out_text, _ = run_cli(capsys, "summary", out, "--variant", "upstream")
    assert code == 0
    assert "vllm: `unknown`" in out_text and "0.33.0`" not in out_text, out_text


def test_redact_does_not_put_this_machine_s_version_in_place_of_a_build_tag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A version of a local build (``0.32.0+cpu``, vLLM's CPU build; ``2.13.0+cpu``, its
    torch) is dropped, as a build tag may be private: its place was taken by the installed
    version (``0.33.0``, ``2.14.0``), another release than the engine's. It is unknown."""
    import shutil

    source, out = tmp_path / "s.capture", tmp_path / "r.capture"
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "clean.capture", source)
    (source / "expected.json").unlink()
    path = source / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["versions"] = {"vllm": "0.32.0+cpu", "torch": "2.13.0+cpu", "python": "3.11.7"}
    path.write_text(json.dumps(manifest))
    code, text, err = run_cli(capsys, "redact", source, "-o", out, "--variant", "upstream")
    assert code == 0, err
    versions = json.loads((out / "manifest.json").read_text())["versions"]
    assert versions == {"vllm": "unknown", "torch": "unknown", "python": "3.11.7",
                        "forensics": "unknown"}, versions
    assert "versions.vllm" in text and "versions.torch" in text, text


# ------------------------------ T150b: a summary record's value is no read inside an allocation


def _mixed_dump(tmp_path: Path) -> Path:
    """A ``.pt`` of an embedding record of tensors and a summary record out of range."""
    import torch

    dump = tmp_path / "d.pt"
    torch.save([{"site": "embedding", "step": 13, "num_embeddings": 1000,
                 "input_ids": torch.tensor([11, 42, 7], dtype=torch.int64)},
                {"site": "embedding", "step": 14, "summary": True, "min": -1, "max": 9,
                 "num_embeddings": 1000}], dump)
    return dump


def test_a_summary_value_beside_tensors_is_not_said_to_be_a_read_inside_an_allocation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A site of tensor records and summary records (a dump holding both): patched cannot
    judge the summary record's -1, and the conclusion said "patched cannot see 1 of the 1
    upstream out-of-bounds findings (a read inside an allocation raises nothing and patched
    shows no accesses): only the models see ..." of a model, for a value nothing replays. It
    says the finding is a summary record's."""
    capture = tmp_path / "d.capture"
    code, _, err = run_cli(capsys, "import", _mixed_dump(tmp_path), "-o", capture)
    assert code == 0, err
    check_said(capsys, ("summary", capture),
               "patched cannot judge 1 upstream out-of-bounds finding(s) of summary records at "
               "embedding (a log's or a dump's min/max, no tensors: nothing there is replayed); "
               "only the recorded values against their bound (upstream) stand there.",
               ("inside an allocation", "only the models"), fold=False)


def test_the_next_step_of_summary_records_names_them_not_reads_inside_an_allocation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The report's and the triage notebook's next steps said of a log's summary values
    "patched cannot see 3 of the upstream findings (accesss inside an allocation): only the
    models judge them", of a model, with a word misspelt. They say what they are."""
    import forensics

    log = tmp_path / "engine.log"
    log.write_text("SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=5 max=1000 step=3\n")
    capture = tmp_path / "l.capture"
    code, _, err = run_cli(capsys, "import", log, "-o", capture)
    assert code == 0, err
    code, _, err = run_cli(capsys, "import", _mixed_dump(tmp_path), "-o", tmp_path / "d.capture")
    assert code == 0, err
    for path in (capture, tmp_path / "d.capture"):
        steps = " ".join(forensics.next_steps(forensics.conclude(
            forensics.replay(path, ["upstream", "patched"]))))
        assert "allocation" not in steps and "only the models" not in steps, steps
        assert ("patched cannot judge 1 of the upstream findings (the least and greatest "
                "values of summary records: nothing there is replayed), so this replay does "
                "not say whether patched is affected there.") in steps, steps


def test_an_access_of_a_site_not_known_is_said_in_the_plural_as_accesses() -> None:
    """"accesss inside an allocation": the plural of the word said of a site not known."""
    from forensics.present.unseen_access import accesses_text

    assert accesses_text([], plural=True) == "accesses"
    assert accesses_text(["read", "access"], plural=True) == "reads or accesses"


# ------------------------------ T150c: repro reproduces no value the installed vLLM never ran


def test_repro_takes_no_summary_record_for_a_failing_call_of_the_installed_vllm(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log's probe lines are summary records, which the installed vLLM's code never runs
    (its verdict ``unjudged``): ``repro`` took the first for "the installed vLLM's call leaves
    an index out of range" and wrote a test of a call without its ids. There is nothing to
    reproduce, and the line says the summary records were not judged."""
    log = tmp_path / "engine.log"
    log.write_text("SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=5 max=1000 step=3\n")
    capture = tmp_path / "l.capture"
    code, _, err = run_cli(capsys, "import", log, "-o", capture)
    assert code == 0, err
    code, out, err = run_cli(capsys, "repro", capture, "-o", tmp_path / "test_repro.py")
    assert code == 2, out
    assert not (tmp_path / "test_repro.json").exists()
    assert ("in the records it judged (not judged: 1 summary record(s): a least and a greatest "
            "value each, which no code runs); nothing to reproduce") in err, err


# ------------------------------ T150d: an id equal to padded rows is no vocab_size sentinel


@pytest.mark.parametrize("vocab", ["32000", "32064"])
def test_an_id_equal_to_the_embedding_rows_past_a_known_vocabulary_is_no_sentinel(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], vocab: str) -> None:
    """An embedding of 32064 rows (a vocabulary of 32000, padded) read at id 32064: the
    finding called it "the vocab_size sentinel" and `known` matched vocab-size-sentinel-counted
    (a sentinel equal to the vocabulary's size, 32000). It is past the end; an id equal to a
    vocabulary of the rows' size is the sentinel as before."""
    import torch

    dump = tmp_path / "d.pt"
    torch.save([{"site": "embedding", "step": 13, "num_embeddings": 32064,
                 "input_ids": torch.tensor([11, 32064, 7], dtype=torch.int64)}], dump)
    capture = tmp_path / "d.capture"
    code, _, err = run_cli(capsys, "import", dump, "-o", capture, "--set",
                           f"model.vocab_size={vocab}")
    assert code == 0, err
    code, out, _ = run_cli(capsys, "summary", capture, "--format", "text")
    assert code == 0
    sentinel = vocab == "32064"
    assert ("`input_ids[1] = 32064` is outside the embedding rows (32064 rows): the vocab_size "
            "sentinel" in out) is sentinel, out
    assert ("known issues: vocab-size-sentinel-counted" in out) is sentinel, out


def test_the_histogram_draws_the_sentinel_at_the_vocabulary_the_manifest_names(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The histogram guessed the vocabulary from the embedding's rows: of 32064 rows and
    ``model.vocab_size`` 32000 it drew "vocab_size = 32064: rejection sentinel". The vocabulary
    the manifest names is drawn; without one, the guess as before."""
    import torch

    import forensics
    from forensics.present.scene.histogram import histogram_data

    dump = tmp_path / "d.pt"
    torch.save([{"site": "embedding", "step": 13, "num_embeddings": 32064,
                 "input_ids": torch.tensor([11, 32064, 7], dtype=torch.int64)}], dump)
    for vocab, drawn in (("32000", 32000), ("", 32064)):
        capture = tmp_path / f"d{vocab}.capture"
        given = ["--set", f"model.vocab_size={vocab}"] if vocab else []
        code, _, err = run_cli(capsys, "import", dump, "-o", capture, *given)
        assert code == 0, err
        data = histogram_data(forensics.replay(capture, ["upstream"]), "embedding", "upstream")
        labels = [label for _, label, _ in data.sentinels]
        assert f"vocab_size = {drawn}: rejection sentinel" in labels, labels
        assert len(labels) == 2, labels


# ------------------------------ T150f: a redacted summary record's least is not above its greatest


def test_redact_keeps_a_summary_record_s_least_value_at_most_its_greatest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A summary record's ``min`` and ``max`` in the vocabulary went through the permutation
    one by one: ``min = 5, max = 900`` became ``min = 672, max = 608``, a least value above
    the greatest, which no tensor has. Each pair keeps its order (the smaller id is ``min``)."""
    import forensics

    log = tmp_path / "engine.log"
    log.write_text("".join(f"SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min={5 + s} "
                           f"max={900 - s} step={s}\n" for s in range(40)))
    source, out = tmp_path / "s.capture", tmp_path / "r.capture"
    code, _, err = run_cli(capsys, "import", log, "-o", source)
    assert code == 0, err
    code, _, err = run_cli(capsys, "redact", source, "-o", out, "--variant", "upstream")
    assert code == 0, err
    frame = forensics.load(out).to_frame("embedding")
    pairs = list(zip(frame["min"].tolist(), frame["max"].tolist(), strict=True))
    assert len(pairs) == 40 and all(low <= high for low, high in pairs), pairs
    assert {low for low, _ in pairs} != {5 + s for s in range(40)}  # still permuted
