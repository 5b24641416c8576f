"""Hostile input, round 5: replaying (issue 38's standard, claim T30v of docs/threat-model.md).

A diff passed as ``vllm+PATH.diff`` names only files of the installed vllm package by their
module's own spelling (no way out of the tree, no link out, no second name for one module),
refuses what it cannot apply (binary patches, renames, copies) instead of skipping it, and is
applied within a bound on its work (a header number of thousands of digits, hunks far from their
headers' lines, one file patched over and over). The diff tests use a fake installed tree
(``vllm_root`` pointed at a temporary folder), so vLLM is never imported here.
"""

from __future__ import annotations

import contextlib
import copy
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from forensics.cli import main
from forensics.errors import CaptureFormatError, PatchApplyError
from forensics.records import Record
from forensics.store.writer import write_capture
from forensics.validate import validate_record
from forensics.variants import unidiff, vllm_diff
from forensics.variants.vllm_diff import PatchedVllmVariant

#: the lines of the fake installed module every diff test patches
MODULE_LINES = [f"value_{i} = {i}" for i in range(2_000)]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake installed vllm (``site/vllm/mod.py``) that the diff variant patches."""
    root = tmp_path / "site"
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    (root / "vllm" / "mod.py").write_text("\n".join(MODULE_LINES) + "\n")
    monkeypatch.setattr(vllm_diff, "vllm_root", lambda: root)
    return root


def write_diff(folder: Path, path: str, body: str, name: str = "p.diff") -> Path:
    """A one-file diff of ``path`` holding ``body`` (its hunks), written to ``folder``."""
    diff = folder / name
    diff.write_text(f"--- a/{path}\n+++ b/{path}\n{body}")
    return diff


def one_change(line: int) -> str:
    """A hunk that changes module line ``line`` (1-based) to ``changed = 1``."""
    return f"@@ -{line} +{line} @@\n-{MODULE_LINES[line - 1]}\n+changed = 1\n"


@pytest.mark.parametrize("spelling", [
    "vllm/../../victim.py",             # out of the tree by '..'
    "vllm/./../../victim.py",
    "vllm//../../victim.py",
    "/tmp/../{tmp}/victim.py",           # an absolute path
    "vllm/mod.x.py",                    # a file that would be imported as another module
    "vllm/mod-1.py",
    "vllm/class.py",
])
def test_a_diff_path_out_of_the_tree_or_of_another_spelling_is_refused(
        site: Path, tmp_path: Path, spelling: str) -> None:
    """No path of a diff but a module's own (``vllm/a/b.py``, plain names) reaches a file."""
    victim = tmp_path / "victim.py"
    victim.write_text("x = 1\n")
    for extra in ("mod.x.py", "mod-1.py", "class.py"):
        (site / "vllm" / extra).write_text("x = 1\n")
    path = spelling.format(tmp=str(tmp_path).lstrip("/"))
    diff = write_diff(tmp_path, path, "@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    with pytest.raises(PatchApplyError, match="not a module of the installed vllm package"):
        PatchedVllmVariant(diff)
    assert victim.read_text() == "x = 1\n"


def test_a_module_that_is_a_link_out_of_the_tree_is_refused(site: Path, tmp_path: Path) -> None:
    """A file of the installed tree that links out of it is not patched (its text not read)."""
    victim = tmp_path / "victim.py"
    victim.write_text("x = 1\n")
    (site / "vllm" / "linked.py").symlink_to(victim)
    diff = write_diff(tmp_path, "vllm/linked.py", "@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    with pytest.raises(PatchApplyError, match="link out of it"):
        PatchedVllmVariant(diff)


def test_a_diff_path_no_file_can_have_is_one_line() -> None:
    """A diff named with a NUL in it (by the API or a pytest option) is refused naming it, not
    an internal ValueError."""
    from forensics.variants.vllm_diff import read_diff

    with pytest.raises(CaptureFormatError, match="cannot be a path"):
        read_diff("p\x00.diff")


def test_a_plain_diff_of_the_fake_tree_applies(site: Path, tmp_path: Path) -> None:
    """The fake tree is patched by an ordinary diff (the refusals above are not of everything)."""
    variant = PatchedVllmVariant(write_diff(tmp_path, "vllm/mod.py", one_change(7)))
    assert variant.kernel_patch.modules == ("vllm.mod",)
    assert variant.kernel_patch.sources[0][1].splitlines()[6] == "changed = 1"


def test_a_hunk_header_of_thousands_of_digits_is_one_line(site: Path, tmp_path: Path) -> None:
    """A line number past int's digit limit is refused naming the diff, not a ValueError."""
    diff = write_diff(tmp_path, "vllm/mod.py", f"@@ -{'9' * 5000} +1 @@\n value_0 = 0\n")
    with pytest.raises(PatchApplyError, match=r"p\.diff: line 3: .*5000 digits"):
        PatchedVllmVariant(diff)


@pytest.mark.parametrize("header", [
    "GIT binary patch\nliteral 3\nHcmV?d00001\n",
    "Binary files a/vllm/mod.py and b/vllm/mod.py differ\n",
    "diff --git a/vllm/mod.py b/vllm/other.py\nsimilarity index 100%\nrename from vllm/mod.py\n"
    "rename to vllm/other.py\n",
    "diff --git a/vllm/mod.py b/vllm/copy.py\ncopy from vllm/mod.py\ncopy to vllm/copy.py\n",
])
def test_a_change_the_applier_cannot_make_is_refused_not_skipped(
        site: Path, tmp_path: Path, header: str) -> None:
    """A binary patch, rename or copy beside a text hunk is refused: the replay would run
    without it while being named after the diff."""
    diff = tmp_path / "p.diff"
    diff.write_text(f"{header}--- a/vllm/mod.py\n+++ b/vllm/mod.py\n{one_change(3)}")
    with pytest.raises(PatchApplyError, match=r"line \d+ .*cannot be replayed"):
        PatchedVllmVariant(diff)


def test_hunks_far_from_their_headers_are_refused_within_the_budget(
        site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Context hunks that apply alternately at the file's start and end, each header naming
    the other end, cost a scan of the file each: the diff is refused once the work passes the
    budget (a 64 MiB diff of them scanned for hours before)."""
    monkeypatch.setattr(unidiff, "SEARCH_BUDGET", 200_000)
    start, end = MODULE_LINES[:3], MODULE_LINES[-3:]
    hunks = "".join("@@ -1,3 +1,3 @@\n" + "".join(f" {line}\n" for line in end)
                    + f"@@ -{len(MODULE_LINES) - 2},3 +{len(MODULE_LINES) - 2},3 @@\n"
                    + "".join(f" {line}\n" for line in start) for _ in range(200))
    diff = write_diff(tmp_path, "vllm/mod.py", hunks)
    with pytest.raises(PatchApplyError, match=r"more than 200000 line comparisons \(at hunk \d+ "
                                              r"of vllm/mod\.py"):
        PatchedVllmVariant(diff)


def test_hunks_near_their_headers_apply_within_the_same_budget(
        site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As many hunks at small offsets from their headers apply under that budget."""
    monkeypatch.setattr(unidiff, "SEARCH_BUDGET", 200_000)
    hunks = "".join(one_change(line).replace(f"-{line} +{line}", f"-{line + 5} +{line + 5}")
                    for line in range(10, 1_990, 5))
    variant = PatchedVllmVariant(write_diff(tmp_path, "vllm/mod.py", hunks))
    assert variant.kernel_patch.sources[0][1].count("changed = 1") == len(range(10, 1_990, 5))


def test_one_file_patched_over_and_over_is_refused_within_the_budget(
        site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each patch of a file splits it anew: thousands of one-hunk patches of one file are
    refused by the same budget."""
    monkeypatch.setattr(unidiff, "SEARCH_BUDGET", 200_000)
    patch = "--- a/vllm/mod.py\n+++ b/vllm/mod.py\n@@ -1 +1 @@\n value_0 = 0\n"
    diff = tmp_path / "p.diff"
    diff.write_text(patch * 1_000)
    with pytest.raises(PatchApplyError, match=r"at patch of vllm/mod\.py"):
        PatchedVllmVariant(diff)


def test_more_hunks_than_the_cap_are_refused_while_parsing(tmp_path: Path) -> None:
    """A diff of more than MAX_HUNKS hunks is refused naming the line, before any is applied."""
    hunk = "@@ -1 +1 @@\n value_0 = 0\n"
    text = "--- a/vllm/mod.py\n+++ b/vllm/mod.py\n" + hunk * (unidiff.MAX_HUNKS + 1)
    with pytest.raises(PatchApplyError, match=f"more than {unidiff.MAX_HUNKS} hunks"):
        unidiff.parse_diff(text, "p.diff")


# --- records whose values overflow int64 arithmetic or have an unsigned dtype -------------------


def site_record(site: str, **fields: Any) -> Record:
    """The tiny simulated record of ``site`` (test_record_counts'), ``fields`` replaced."""
    from test_record_counts import site_records

    record = copy.copy(site_records()[site])
    record.fields = {**record.fields, **fields}
    return record


def replay_cli(tmp_path: Path, record: Record, name: str = "h.capture") -> tuple[int, str, str]:
    """``forensics replay`` of a capture holding ``record`` as written (no validation on the
    way in, as a hostile author's bytes): exit code, stdout, stderr."""
    capture = write_capture(tmp_path / name, [record], validated=True)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["replay", str(capture)])
    return code, out.getvalue(), err.getvalue()


def refused(code: int, err: str, field: str) -> bool:
    """Whether the command ended in exit 2 with one line naming ``field``, not a bug report."""
    return (code == 2 and len(err.strip().splitlines()) == 1 and field in err
            and "internal error" not in err)


def draft_record(cu: list[int], drafts: list[int]) -> Record:
    """A ``prepare_input_ids`` record of three rows with ``cu_num_tokens`` and
    ``num_draft_tokens`` replaced."""
    return site_record("prepare_input_ids", cu_num_tokens=np.array(cu, np.int64),
                       num_draft_tokens=np.array(drafts, np.int64))


@pytest.mark.parametrize(("cu", "drafts"), [
    ([5, 10, 15], [2**63 - 1, 0, 0]),                        # 1 + drafts wraps to int64's min
    ([2**63 - 1, -(2**63) + 1, -(2**63) + 6], [2**63 - 2, 0, 0]),  # a step that wraps to 2
])
def test_a_draft_count_past_its_tokens_by_overflow_is_refused(
        tmp_path: Path, cu: list[int], drafts: list[int]) -> None:
    """``cu_num_tokens`` must give each row 1 + its drafts: a check that wrapped in int64 let
    2**63 - 1 drafts through to ``np.repeat`` (an internal error, or an allocation sized by the
    claim); now the record is refused, by its check and by the batch screen alike."""
    record = draft_record(cu, drafts)
    with pytest.raises(CaptureFormatError, match="cu_num_tokens"):
        validate_record(copy.copy(record), "record 0 in 'h.capture'")
    code, _, err = replay_cli(tmp_path, record)
    assert refused(code, err, "cu_num_tokens"), (code, err)


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
def test_an_unsigned_batch_change_tensor_replays_as_its_values(tmp_path: Path,
                                                               dtype: type) -> None:
    """``batch_change``'s torch model on unsigned tensors (torch compares none wider than a
    byte) gives the outcome of the same values as int64, not NotImplementedError."""
    from forensics.replaying import replay

    base = site_record("batch_change")
    values = {name: base[name].astype(np.int64) for name in
              ("prev_positions", "valid_sampled_token_count", "num_computed_tokens")}
    values["prev_positions"][-1] = 7  # a stale row: a finding to agree on
    signed = site_record("batch_change", **values)
    unsigned = site_record("batch_change", **{k: v.astype(dtype) for k, v in values.items()})
    assert replay([unsigned]).verdicts == replay([signed]).verdicts == {
        "upstream": {"batch_change": "violation"}, "patched": {"batch_change": "ok"}}


def test_an_unsigned_value_past_int64_is_refused_naming_its_field(tmp_path: Path) -> None:
    """An unsigned ``prev_positions`` of 2**64 - 1 (``batch_change``) or ``num_sampled``
    (``post_update``, which once summed it into ``total_len``: OverflowError) is refused in one
    line naming the field."""
    big = site_record("batch_change", prev_positions=np.full(3, 2**64 - 1, np.uint64))
    code, _, err = replay_cli(tmp_path, big, "b.capture")
    assert refused(code, err, "prev_positions"), (code, err)
    sampled = site_record("post_update", num_sampled=np.full(3, 2**64 - 1, np.uint64))
    code, _, err = replay_cli(tmp_path, sampled, "p.capture")
    assert refused(code, err, "num_sampled"), (code, err)


@pytest.mark.parametrize("qsl", [
    [-(2**63)] * 4,
    [2**63 - 1, -(2**63) + 1, 2**63 - 1, -(2**63) + 1],
    [1, 2**63 - 1, 1, 2**63 - 1],
])
def test_combine_tokens_positions_at_int64s_ends_wrap_and_are_judged(
        tmp_path: Path, qsl: list[int]) -> None:
    """``query_start_loc`` at int64's ends: the kernel's positions wrap in int64 and are judged
    against ``input_ids`` (the model once raised OverflowError, and a finding at 2**63 - 1 broke
    the findings table); the replay ends in exit 0, no warning line."""
    record = site_record("combine_tokens", query_start_loc=np.array(qsl, np.int64))
    code, out, err = replay_cli(tmp_path, record)
    assert code == 0 and err == "", (code, err)
    assert "violation" in out


def test_a_finding_at_int64s_end_keeps_its_value() -> None:
    """A finding whose value is 2**63 - 1 beside findings with no value is that value in the
    table (it went through float64 once: TypeError)."""
    from forensics.judge.findings import _frame

    rows = [{"variant": "upstream", "site": "embedding", "kind": "out_of_bounds", "step": 0,
             "rank": 0, "record": i, "value": value} for i, value in enumerate((2**63 - 1, None))]
    frame = _frame(rows, [])
    assert 2**63 - 1 in frame["value"].tolist() and int(frame["value"].isna().sum()) == 1


# --- simulate with hostile settings -------------------------------------------------------------


@pytest.mark.parametrize(("scenario", "settings", "named"), [
    ("clean", ["--seed", "-1"], "seed"),
    ("v2-clean", ["--seed", "-5"], "seed"),
    ("clean", ["--vocab", str(2**70)], "vocab"),
    ("v2-clean", ["--vocab", str(2**63 - 1)], "vocab"),
    ("clean", ["--batch", str(10**12)], "batch"),
    ("v2-clean", ["--spec-tokens", str(10**12)], "--spec-tokens"),
])
def test_simulate_refuses_a_setting_past_its_range_before_it_runs(
        tmp_path: Path, scenario: str, settings: list[str], named: str) -> None:
    """A negative seed, a vocabulary past 2**24 or a step past 2**16 tokens is refused in one
    line naming the setting, before anything is drawn (once: an internal error after a
    simulation, or gigabytes asked for)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["simulate", scenario, "-o", str(tmp_path / "s.capture"), *settings])
    assert refused(code, err.getvalue(), named), (code, err.getvalue())
    assert not (tmp_path / "s.capture").exists()
