"""Hostile input, round 16 (fix16c): what the round's other helpers found but did not fix:
``shrink``'s one overall deadline (T87a), the repro script's deadline (T87b), a simulated
capture's notes that say what the run injected (T87c), records of more fields than any site
declares (T87d), ``schema`` naming a site twice (T87e), a triage's pieces from a forged index
(T87f)."""

from __future__ import annotations

from pathlib import Path

import pytest
from share_cases import private_capture

import forensics
from forensics.cli import main
from forensics.share.evidence import differences, evidence_of
from forensics.share.shrinking import shrink

# ------------------------------------------------------------------ T87a: shrink's deadline


def test_shrink_stops_at_its_overall_deadline_and_says_it_may_not_be_minimal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each of shrink's replays had its own overall clock (6 hours): a shrink of N replays had
    none. One ``--deadline`` now bounds them all; when it comes the search stops and writes the
    smallest capture found so far, which keeps the evidence, and says it may not be minimal
    (in its output and its manifest), never claiming minimality."""
    src = private_capture(tmp_path / "src.capture", "stale-prev-row", 3, 6)
    out = tmp_path / "small.capture"
    code = main(["shrink", str(src), "-o", str(out), "--deadline", "0.001"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "note: the search stopped at the overall deadline of 0.001 s" in printed
    assert "may not be minimal" in printed
    entry = forensics.load(out).manifest["shrink"]
    assert entry["records_kept"] == entry["records_before"]  # only the whole was established
    assert "may not be minimal" in entry["stopped"]
    assert not differences(evidence_of(forensics.replay(src), crash=True),
                           evidence_of(forensics.replay(out), crash=True))


def test_shrink_api_reports_the_stop_and_a_full_search_reports_none(tmp_path: Path) -> None:
    """The API says it stopped (``complete`` false, ``stopped`` the reason); with the default
    deadline the same capture is shrunk and says nothing of a deadline."""
    src = private_capture(tmp_path / "src.capture", "stale-prev-row", 3, 6)
    cut = shrink(src, tmp_path / "cut.capture", deadline=0.001)
    assert not cut.complete and "overall deadline of 0.001 s" in cut.stopped
    whole = shrink(src, tmp_path / "whole.capture")
    assert whole.stopped == "" and whole.records_kept < cut.records_kept


def test_shrink_refuses_a_deadline_out_of_range(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``--deadline`` is read as replay's is: one line, exit 2."""
    src = private_capture(tmp_path / "src.capture", "stale-prev-row", 3, 6)
    assert main(["shrink", str(src), "-o", str(tmp_path / "o.capture"),
                 "--deadline", "nan"]) == 2
    err = capsys.readouterr().err
    assert "--deadline 'nan' is not a number of seconds" in err and len(err.splitlines()) == 1


# ------------------------------------------------------------------ T87b: the repro's deadline


def _hanging_repro(tmp_path: Path) -> Path:
    """A generated repro of a V2 combine case whose data file gives each call 1 s, beside a
    stand-in vLLM whose kernel never returns."""
    from test_repro_v2 import KERNELS, _data, _first_cases

    from forensics.share.repro import script_text

    site = tmp_path / "site" / "vllm" / "v1" / "worker" / "gpu"
    site.mkdir(parents=True)
    (tmp_path / "site" / "vllm" / "__init__.py").write_text("__version__ = '0.33.0'\n")
    for folder in (site.parent.parent, site.parent, site):
        (folder / "__init__.py").write_text("")
    hang = "    _interpreted()\n    while True:\n        pass\n"
    (site / "input_batch.py").write_text(KERNELS.replace("    _interpreted()\n", hang, 1))
    case = _first_cases("v2-negative-draft.capture", ("combine_tokens",))["combine_tokens"]
    (tmp_path / "test_repro.py").write_text(script_text())
    (tmp_path / "test_repro.json").write_text(__import__("json").dumps(
        {**_data([case]), "deadline_s": 1}))
    return tmp_path / "test_repro.py"


def test_a_repro_case_process_ends_itself_at_its_deadline(tmp_path: Path) -> None:
    """``python REPRO.py --case N`` ran vLLM's V2 kernel in its own process with no deadline:
    a kernel that never returns hung it. It now ends at the data file's ``deadline_s`` with one
    line naming the function and the record, exit 124 (a hang here ends at the guard's 240 s:
    no timing is asserted)."""
    import subprocess
    import sys

    script = _hanging_repro(tmp_path)
    run = subprocess.run([sys.executable, str(script), "--case", "0"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=240,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                              "PYTHONPATH": str(tmp_path / "site"), "TRITON_INTERPRET": "1",
                              "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == 124, run.stderr[-3000:]
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("timed out after 1 s in vllm.v1.worker.gpu.input_batch."
                           "combine_sampled_and_draft_tokens on the capture's step-"), last
    assert "forensics repro --deadline" in last


def test_the_repro_test_reads_a_case_process_cut_at_its_deadline_as_timed_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test reads the case process's own cut (exit 124, its outcome ``timed_out``) as the
    deadline it is, not as an unexplained exit."""
    import importlib.util
    import subprocess

    script = _hanging_repro(tmp_path)
    spec = importlib.util.spec_from_file_location("repro_t87b", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cut = subprocess.CompletedProcess([], 124, module.OUTCOME + '{"timed_out": 1}\n', "x")
    monkeypatch.setattr(module.subprocess, "run", lambda *a, **k: cut)
    with pytest.raises(module.Deadline):
        module.run_in_interpreter(0, 1)


# ------------------------------------------------------------------ T87c: simulate's notes


def _manifest(path: Path) -> dict:
    return __import__("json").loads((path / "manifest.json").read_text())


def test_a_simulated_capture_whose_faults_never_fired_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``simulate vocab-sentinel --steps 3`` wrote the notes "synthetic run: rejected slots carry
    vocab_size; async_output writes it" before the run, while no sentinel was drawn in its 3
    steps (``summary``: no violation). The manifest is now written after the run: the notes say
    no fault fired, and ``simulation.injected`` counts each fault."""
    out = tmp_path / "v.capture"
    assert main(["simulate", "vocab-sentinel", "-o", str(out), "--steps", "3"]) == 0
    manifest = _manifest(out)
    assert manifest["simulation"]["injected"] == {"vocab_sentinel": 0}
    assert manifest["notes"].startswith("synthetic run: no fault fired in its 3 steps")
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    assert "no fault fired" in capsys.readouterr().out


def test_a_simulated_capture_names_the_faults_that_fired_and_how_often(tmp_path: Path) -> None:
    """A run long enough to draw its fault says which fired and how many times."""
    out = tmp_path / "v.capture"
    assert main(["simulate", "vocab-sentinel", "-o", str(out), "--steps", "40"]) == 0
    manifest = _manifest(out)
    count = manifest["simulation"]["injected"]["vocab_sentinel"]
    assert count >= 1
    assert manifest["notes"].endswith(f"; faults injected: vocab_sentinel {count} time"
                                      + "s" * (count != 1))
    first = forensics.replay(out).first_finding("upstream")
    assert first is not None and first["value"] == 32000


def test_a_simulated_v2_capture_says_no_fault_fired_when_none_did(tmp_path: Path) -> None:
    """A V2 run of one step (every request new: no draft to make negative) says so too."""
    out = tmp_path / "v2.capture"
    assert main(["simulate", "v2-negative-draft", "-o", str(out), "--steps", "1"]) == 0
    manifest = _manifest(out)
    assert manifest["simulation"]["injected"] == {"negative_draft": 0}
    assert "no fault fired in its 1 step " in manifest["notes"]


# ------------------------------------------------------------------ T87d: records of many names


def _many_keys(count: int) -> dict[str, str]:
    return {"site": "embedding", "step": "1", **{f"k{i}": "0" for i in range(count)}}


def test_a_safetensors_of_many_metadata_keys_is_refused_before_any_is_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``__metadata__`` of 1.37 million keys (16 MB) took 15 s and 405 MB before "unknown
    field": each value went through its own JSON parse (its error message built first). A
    record holds no more names than the largest site declares (with site, step, rank and
    summary): past them the file is refused in one line naming it, the count and the cap,
    before any value is parsed (the header is the one JSON text read). 100 keys: 20,000 are now
    refused before the header is parsed, by its count of items (T93a)."""
    import json
    import struct

    from test_round4_importers import refused

    from forensics.importers import safetensors_

    parsed: list[int] = []
    real = safetensors_.strict_json
    monkeypatch.setattr(safetensors_, "strict_json",
                        lambda text: parsed.append(1) or real(text))
    text = json.dumps({"__metadata__": _many_keys(100)}).encode()
    source = tmp_path / "many.safetensors"
    source.write_bytes(struct.pack("<Q", len(text)) + text)
    # the cap: the largest site's 19 fields, and site, step, rank, summary
    err = refused(source, tmp_path, capsys, "a record of 102 field names",
                  "past the 23 any site declares")
    assert parsed == [1], err


def test_a_pt_dict_of_many_keys_is_refused_before_any_value_is_converted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``.pt`` dict of 900,000 keys took 7 s of CPU before "unknown field"; it is now refused
    naming the record, the file, the count and the cap, before a value is converted (and
    since T93b before torch loads it, from its pickle's first 1,000 keys)."""
    import torch
    from test_round4_importers import refused

    from forensics.importers import pt

    def converted(*args: object) -> None:
        raise AssertionError("a value was converted")

    monkeypatch.setattr(pt, "_leaf", converted)
    source = tmp_path / "many.pt"
    torch.save({"site": "embedding", "step": 1,
                **{f"k{i}": i for i in range(5_000)}}, source)
    refused(source, tmp_path, capsys, "many.pt': its pickle sets keys 1000 times",
            "where torch.save puts record 0 (the object saved)", "past the 23 names")


def test_an_npz_metadata_of_many_keys_is_refused_naming_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The ``.npz`` importer's ``__metadata__`` object is held to the same cap (since T93c
    counted as it is parsed: refused at its 23rd key beside one member)."""
    import json

    import numpy as np
    from test_round4_importers import refused

    source = tmp_path / "many.npz"
    np.savez(source, __metadata__=np.array(json.dumps({**_many_keys(3_000), "step": 1})),
             input_ids=np.zeros(1, np.int64))
    refused(source, tmp_path, capsys, "'", "member '__metadata__.npy' holds more than 22 keys",
            "past the 23 names any site declares with the file's 1 other members")


# ------------------------------------------------------------------ T87e: schema's sites once


@pytest.mark.parametrize("form", [[], ["--json"], ["--markdown"]])
def test_schema_prints_a_site_named_twice_once(form: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``forensics schema embedding embedding`` printed the embedding block twice; each site
    is printed once, in the order first named."""
    assert main(["schema", *form, "embedding", "post_update", "embedding"]) == 0
    once = capsys.readouterr().out
    assert main(["schema", *form, "embedding", "post_update"]) == 0
    assert once == capsys.readouterr().out


# ------------------------------------------------------------------ T87f: a triage's pieces


@pytest.mark.parametrize(("forge", "claims", "holds"), [
    ("shift", "the entry claims 300 record(s) of steps 1000..1299",
     "holds 300 record(s) of steps 0..299"),
    ("cut", "the entry claims 295 record(s) of steps 600..899",
     "holds 300 record(s) of steps 600..899")])
def test_a_triage_split_into_pieces_by_a_forged_index_is_an_error_row_with_the_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], forge: str, claims: str,
        holds: str) -> None:
    """The triage's planner cuts a capture into step ranges by its ``.idx`` index, which
    ``inspect`` checks (T83b) but the planner does not: a forged index (every entry's steps
    shifted by 1000, or one entry's count cut by 5) gave an error row (never a verdict) saying
    only "batch N does not match its index entry". The row now says what the entry claims,
    what the segment holds, and the fix (delete the index to rescan), as ``inspect`` does."""
    import json

    import numpy as np
    from test_round3_caps import post

    from forensics.store.index import ENTRY, MAGIC
    from forensics.store.writer import new_capture

    capture = tmp_path / f"{forge}.capture"
    with new_capture(capture, {}) as writer:
        writer.extend([post(s) for s in range(1500)], flush_every=300)
    segment = next(capture.glob("*.arrows"))
    index = segment.with_name(segment.name + ".idx")
    entries = np.fromfile(index, dtype=ENTRY, offset=len(MAGIC))
    if forge == "shift":
        entries["step_min"] += 1000
        entries["step_max"] += 1000
    else:
        entries[2]["rows"] -= 5
    index.write_bytes(MAGIC + entries.tobytes())
    assert main(["triage", str(capture), "--split-records", "1000", "--format", "json",
                 "--workers", "1"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["conclusion"] == "unreadable" and row["verdicts"] == {}, row
    assert row["error"].startswith(f"segment '{segment.name}' of '{capture.name}': batch "), row
    assert f"{claims}, but the segment {holds} there; delete '{index.name}' to rescan" \
        in row["error"], row
