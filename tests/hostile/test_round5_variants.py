"""Hostile input, round 5: replaying (issue 38's standard, claim T30v of docs/threat-model.md).

A diff passed as ``vllm+PATH.diff`` names only files of the installed vllm package by their
module's own spelling (no way out of the tree, no link out, no second name for one module),
refuses what it cannot apply (binary patches, renames, copies) instead of skipping it, and is
applied within a bound on its work (a header number of thousands of digits, hunks far from their
headers' lines, one file patched over and over). The diff tests use a fake installed tree
(``vllm_root`` pointed at a temporary folder), so vLLM is never imported here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.errors import PatchApplyError
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
