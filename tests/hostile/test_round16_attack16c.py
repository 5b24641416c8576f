"""Hostile input, round 16 (attack 16c): ``forensics kernels`` with hostile launch records, and
the probe's ``FORENSICS_KERNELS`` settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forensics.errors import ConfigurationError

# ------------------------------------------------ T89a: FORENSICS_KERNELS names no kernel

#: a kernel of the installed vLLM (0.33's block table)
SLOTS = ("vllm.v1.worker.gpu.block_table", "_compute_slot_mappings_kernel")


@pytest.mark.parametrize("value", ["1", "true", "yes", "_compute_slot_mapping_kernel",
                                   "vllm.v1.worker._compute_slot_mappings_kernel",
                                   "_compute_slot_mappings_kernel,_typo_kernel"])
def test_a_selection_naming_no_installed_kernel_is_refused(value: str) -> None:
    """``FORENSICS_KERNELS=1`` (``0`` turns it off), ``true``, a misspelt name: each glob was
    taken as given, matched no kernel, and the engine ran with the recorder recording nothing
    and nothing said of it. A glob that names none of the installed vLLM's kernels is refused
    in one line (before the probe starts anything: ``kernels.settings()``) naming the
    variable and the glob."""
    from forensics.kernels.coverage import installed_kernels
    from forensics.probe import kernels as K

    assert SLOTS in installed_kernels()
    with pytest.raises(ConfigurationError, match=r"FORENSICS_KERNELS=.*names none of the "
                                                 r"installed vLLM's \d+ Triton kernels"):
        K.settings({"FORENSICS_KERNELS": value})


@pytest.mark.parametrize("value", ["ALL", "All", "_compute_slot_mappings_kernel, ALL"])
def test_all_is_all_in_any_case(value: str) -> None:
    """``ALL`` was a glob that matched no kernel (``OFF``, ``NONE`` were read in any case)."""
    from forensics.probe import kernels as K

    assert K.selection({"FORENSICS_KERNELS": value}) == ("*",)


def test_a_module_qualified_name_as_coverage_lists_it_records_that_kernel() -> None:
    """``forensics kernels --coverage`` names a kernel ``module.name``; that name (or a glob
    of it) in ``FORENSICS_KERNELS`` matched the kernel's bare name only, so it recorded
    nothing: a glob holding a dot is matched against ``module.name``."""
    from forensics.probe import kernels as K

    globs = K.selection({"FORENSICS_KERNELS": f"{'.'.join(SLOTS)}, vllm.v1.sample.*"})
    assert globs is not None

    def jit(module: str, name: str) -> object:
        def fn(a_ptr: int) -> None:
            """A kernel's signature."""
        fn.__module__, fn.__name__ = module, name
        return type("JITFunction", (), {"fn": fn})()

    assert K.KernelMeta(jit(*SLOTS), globs).wanted
    assert K.KernelMeta(jit("vllm.v1.sample.ops.topk_topp_triton", "_topk_topp_kernel"),
                        globs).wanted
    assert not K.KernelMeta(jit("vllm.v1.worker.gpu.other", SLOTS[1]), globs).wanted
    assert K.selection({"FORENSICS_KERNELS": SLOTS[1]}) == (SLOTS[1],)  # a bare name: as before


# ------------------------------------ T89b: kernel_summary counts no probe writes

def _coverage_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str], summary: dict[str, Any]
                 ) -> tuple[int, str, str]:
    """``kernels --coverage``'s exit, stdout and stderr on one replayed launch and
    ``summary`` (the installed kernels: the launch's and ``_other``)."""
    from test_round4_kernels import KERNEL, MODULE, launch, write_capture

    from forensics.cli import main
    from forensics.kernels import sanitizer

    monkeypatch.setattr(sanitizer, "installed_kernels",
                        lambda: [(MODULE, KERNEL), (MODULE, "_other")])
    monkeypatch.setattr(sanitizer.Worker, "ask", lambda self, event, most=0.0: {
        "status": "replayed", "reason": "", "accesses": [], "overflows": [], "differs": []})
    root = write_capture(tmp_path / "c.capture",
                         [launch(), {"kind": "kernel_summary", "format": 1, **summary}])
    code = main(["kernels", str(root), "--coverage"])
    out, err = capsys.readouterr()
    return code, out, err


OTHER = "vllm.v1.worker.gpu.input_batch._other"


@pytest.mark.parametrize(("summary", "field"), [
    ({"kernels_seen": {}, "graph_launches": {OTHER: 3}}, "graph_launches"),   # never_launched
    ({"kernels_seen": {OTHER: 5}, "graph_launches": {OTHER: 10}}, "graph_launches"),  # 10 of 5
    ({"graph_only": [OTHER]}, "graph_only"),               # "launched 0 time(s) ..., some ..."
])
def test_a_summary_counting_graph_launches_no_probe_counts_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        summary: dict[str, Any], field: str) -> None:
    """``kernels_seen`` counts every launch the probe saw, those during a graph capture too:
    a summary of 3 graph launches of a kernel and none seen made its coverage row
    "never_launched"; 10 of 5 said "launched 5 time(s) ..., 10 of them while a CUDA graph was
    being captured"; ``graph_only`` with no count said "launched 0 time(s) ..., some while a
    CUDA graph was being captured". Such a summary is refused in one line naming the field."""
    code, out, err = _coverage_of(tmp_path, monkeypatch, capsys, summary)
    assert code == 2 and not out, (code, out)
    assert f"kernel_summary event 0: field '{field}'" in err and OTHER in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_a_summary_of_counts_a_probe_writes_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A kernel every launch of which was during a graph capture is ``graph_only``."""
    code, out, _ = _coverage_of(tmp_path, monkeypatch, capsys, {
        "kernels_seen": {OTHER: 3}, "graph_launches": {OTHER: 3}, "graph_only": [OTHER]})
    assert code == 0 and f"graph_only      {OTHER}: 0 recorded" in out, out


# ------------------------------------ T89c: one parameter, two values

@pytest.mark.parametrize(("change", "field"), [
    ({"constexprs": {"max_num_reqs": 1000}}, "scalars"),  # the contract: 4; the replay: 1000
    ({"scalars": {"max_num_reqs": 4, "idx_mapping_ptr": 0}}, "scalars"),
    ({"unrecorded": {"idx_mapping_ptr": "a list"}}, "unrecorded"),
    ({"args": ["idx_mapping_ptr", "max_num_reqs", "idx_mapping_ptr"]}, "args"),
])
def test_a_parameter_recorded_twice_is_refused(change: dict[str, Any], field: str) -> None:
    """A record of ``max_num_reqs`` as a scalar (4) and a constexpr (1000): the contract
    judged ``idx_mapping`` against the scalar while the replay ran the kernel with the
    constexpr (its arguments took the last part's), so a finding's bound was not the
    replay's. A parameter the record holds in two parts (tensors, constexprs, scalars,
    unrecorded), or ``args`` names twice, is refused in one line naming the field."""
    from test_round4_kernels import launch

    from forensics.errors import CaptureFormatError
    from forensics.kernels.format import check_launch

    with pytest.raises(CaptureFormatError) as raised:
        check_launch({**launch(), **change}, "capture 'k.capture' kernel_launch event 0")
    line = str(raised.value)
    assert line.startswith(f"capture 'k.capture' kernel_launch event 0: field '{field}'"), line
    assert len(line.splitlines()) == 1
    check_launch(launch(), "capture 'k.capture' kernel_launch event 0")  # each once: read



# ------------------------------------ T89d: combine_tokens' writes held to the budget

#: the site tests' record builders (``v2_records``)
SITES = Path(__file__).resolve().parent.parent / "sites"

def _refused_replay(root: Path, budget: str, monkeypatch: pytest.MonkeyPatch,
                    capsys: pytest.CaptureFixture[str]) -> tuple[str, int]:
    """``replay ROOT`` under the allocation budget ``budget``, refused (exit 2, nothing on
    stdout): its one line and the peak of memory traced while it ran."""
    import tracemalloc

    from forensics.cli import main

    monkeypatch.setenv("FORENSICS_MAX_ALLOC", budget)
    tracemalloc.start()
    try:
        code = main(["replay", str(root)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    out, err = capsys.readouterr()
    assert code == 2 and not out, (code, out)
    return err, peak


def test_combine_tokens_writes_are_held_to_the_budget_before_they_are_planned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A ``combine_tokens`` record of ``draft_tokens`` with 0 rows and 4,000,000 columns
    (no bytes: the kernel's block, the writes a row, follows the columns) and a row of 2**40
    logits made a plan of 4 million writes in Python lists, 23 s and 1.3 GB, before the
    findings' budget refused it. Its writes are counted first (vectorised) and held to the
    allocation budget (lowered here to 20 MB, 131,073 writes at 384 bytes each being past
    it; the check is the same at 1 GiB): one line naming the record and the count, and the
    replay allocates no more than the budget on the way."""

    import numpy as np

    monkeypatch.syspath_prepend(str(SITES))
    from v2_records import combine

    from forensics.store.writer import write_capture

    record = combine(draft_tokens=np.zeros((0, 100_000), np.int32),
                     cu_num_logits=np.array([0, 2**40, 2**40 + 1], np.int64))
    root = write_capture(tmp_path / "c.capture", [record], manifest={"notes": "x"})
    err, peak = _refused_replay(root, "20M", monkeypatch, capsys)
    assert "a combine_tokens record at step 0 rank 0: 'writes' is 131073" in err, err
    assert "draft_tokens" in err and len(err.strip().splitlines()) == 1, err
    assert peak < 20 << 20, peak


def test_combine_tokens_of_a_few_writes_is_replayed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A record of the engine's sizes is replayed as before."""
    monkeypatch.syspath_prepend(str(SITES))
    from v2_records import combine

    from forensics.cli import main
    from forensics.store.writer import write_capture

    root = write_capture(tmp_path / "c.capture", [combine()], manifest={"notes": "x"})
    assert main(["replay", str(root)]) in (0, 1)
    assert "writes" not in capsys.readouterr().err


# ------------------------------------ T89e: post_update's reads held to the budget

def _post_update_of(rows: int, width: int = 1, claim: int = 2**30) -> Any:
    """A ``post_update`` record of ``rows`` rows of ``width`` sampled ids each, each row
    claiming ``claim`` (2**30: each reads on to the buffer's end), all of slot 0."""
    import numpy as np
    from site_records import record
    from v2_records import VOCAB

    return record("post_update", idx_mapping=np.zeros(rows, np.int64),
                  num_computed_tokens=np.zeros(1, np.int32),
                  last_sampled_tokens=np.zeros(1, np.int32),
                  sampled_tokens=np.ones((rows, width), np.int32),
                  num_sampled=np.full(rows, claim, np.int32),
                  num_rejected=np.zeros(rows, np.int32), total_len=np.zeros(1, np.int32),
                  query_start_loc=np.arange(rows + 1, dtype=np.int32),
                  req_ids=[f"r{i}" for i in range(rows)], all_token_ids_width=2**40,
                  bin_counts_rows=0, bin_counts_width=VOCAB, vocab_size=VOCAB)


def test_post_update_reads_are_held_to_the_budget_before_they_are_planned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A row of ``post_update`` reads ``num_sampled`` ids from its start in the flat
    ``sampled_tokens``, on into the next rows': 600 rows of one id each claiming 2**30 (a
    15 KB capture) read 180,000 ids, 8 s and 1.45 GB, past the 1 GiB budget, exit 0. The
    reads a replay plans are counted first (vectorised) and held to the budget (8 KB each;
    lowered here to 50 MB): one line naming the record and the count, and the replay
    allocates no more than the budget on the way. Since T90a a row's reads past its own row
    are planned as at most 4 (those 200 rows of one id each plan under 1,000 and are replayed,
    see tests/hostile/test_round16_fix16d.py): 200 rows of 40 ids each, all read, plan 8,000."""

    from forensics.store.writer import write_capture

    monkeypatch.syspath_prepend(str(SITES))
    root = write_capture(tmp_path / "p.capture", [_post_update_of(200, 40, 40)],
                         manifest={"notes": "x"})
    err, peak = _refused_replay(root, "50M", monkeypatch, capsys)
    assert "a post_update record at step 0 rank 0: 'reads' is 8000" in err, err
    assert "num_sampled" in err and len(err.strip().splitlines()) == 1, err
    assert peak < 50 << 20, peak


def test_post_update_of_a_few_reads_is_replayed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A record of the engine's sizes is replayed as before (its reads within the budget)."""
    from forensics.cli import main
    from forensics.store.writer import write_capture

    monkeypatch.syspath_prepend(str(SITES))
    from v2_records import post

    root = write_capture(tmp_path / "p.capture", [post(), _post_update_of(8)],
                         manifest={"notes": "x"})
    assert main(["replay", str(root)]) in (0, 1)
    assert "'reads'" not in capsys.readouterr().err


# ------------------------------------ T89f: a finding of a replay on zeros says so

ACCESS = {"argument": "idx_mapping_ptr", "op": "load", "masked": False,
          "program_id": [0, 0, 0], "elements": [-1], "count": 1}
WRAP = {"operation": "mul", "program_id": [0, 0, 0], "exact": 2**31, "wrapped": -(2**31)}


def _kernels_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                  capsys: pytest.CaptureFixture[str], event: dict[str, Any]) -> str:
    """``kernels``' text of one launch, replayed by a stand-in whose answer is one
    out-of-bounds load and one int32 wrap."""
    from test_round4_kernels import KERNEL, MODULE, write_capture

    from forensics.cli import main
    from forensics.kernels import sanitizer

    monkeypatch.setattr(sanitizer, "installed_kernels", lambda: [(MODULE, KERNEL)])
    monkeypatch.setattr(sanitizer.Worker, "ask", lambda self, event, most=0.0: {
        "status": "replayed", "reason": "", "accesses": [dict(ACCESS)],
        "overflows": [dict(WRAP)], "differs": []})
    assert main(["kernels", str(write_capture(tmp_path / "k.capture", [event]))]) == 1
    return capsys.readouterr().out


def test_a_finding_of_a_replay_on_zeros_says_whether_live_made_it_is_unknown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A tensor recorded without its contents (``contents: none``: an integer storage past
    what one event line holds, floats past the budget) is zeros in the replay, and its values
    may choose a kernel's addresses, masks and operands: an out-of-bounds access or an int32
    wrap of that replay was said as the live launch's ("unmasked load of idx_mapping_ptr
    element(s) [-1]"). Each says the tensors that were zeros and that whether the live
    launch made it is unknown; a launch recorded whole says it as before."""
    from test_round4_kernels import launch

    event = launch()
    event["args"].append("table_ptr")
    event["tensors"]["table_ptr"] = {
        "dtype": "int32", "shape": [300000], "strides": [1], "offset": 0,
        "storage": 1200000, "contents": "none",
        "reason": "contents of 1200000 bytes, past what one event line holds"}
    text = _kernels_text(tmp_path, monkeypatch, capsys, event)
    access = next(line for line in text.splitlines() if line.startswith("kernel_out_of_b"))
    wrap = next(line for line in text.splitlines() if line.startswith("offset_overflow"))
    assert access.endswith("in a replay on zeros in place of the contents of table_ptr (not "
                           "recorded): whether the live launch made this access is unknown"), text
    assert wrap.endswith("whether the live launch made this wrap is unknown"), text
    whole = _kernels_text(tmp_path / "whole", monkeypatch, capsys, launch())
    assert "unknown" not in whole and "unmasked load of idx_mapping_ptr element(s) [-1]" \
        in whole, whole
