"""A small unified-diff parser and applier in pure Python (no ``patch`` binary, no vLLM).

Used by :mod:`forensics.variants.vllm_diff` to patch private copies of vLLM modules. Hunks must
match exactly (no fuzz); a hunk may apply at an offset from the line its header states, the
nearest matching position winning, as ``patch`` does. A diff holds at most :data:`MAX_HUNKS`
hunks, and applying it takes at most :data:`SEARCH_BUDGET` line comparisons (a hunk whose header
names lines far from where it applies costs a scan of the file): past either, it is refused in
one line instead of searched for minutes. Binary patches, renames, copies, created and deleted
files are refused, never silently skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from forensics.errors import PatchApplyError
from forensics.escaping import terminal

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\ No newline at end of file"
#: the most hunks one diff may hold
MAX_HUNKS = 10_000
#: the most line comparisons (lines split included) applying one diff may take
SEARCH_BUDGET = 4_000_000
#: the most digits a hunk header's line number or count may have
_MAX_DIGITS = 18
#: git's extended headers of changes this applier cannot make, by how they begin
_UNSUPPORTED = ("GIT binary patch", "Binary files ", "rename from ", "rename to ", "copy from ",
                "copy to ", "new file mode", "deleted file mode")


@dataclass
class Hunk:
    """One ``@@`` block: ``lines`` keep their first character (' ', '-' or '+')."""

    number: int
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: list[str] = field(default_factory=list)

    def old_lines(self) -> list[str]:
        """Context and removed lines: what the hunk expects to find (a line's CR dropped)."""
        return [line[1:].removesuffix("\r") for line in self.lines if line[0] in " -"]

    def new_lines(self) -> list[str]:
        """Context and added lines: what the hunk leaves in place (a line's CR dropped)."""
        return [line[1:].removesuffix("\r") for line in self.lines if line[0] in " +"]


@dataclass
class FilePatch:
    """The hunks of one file; ``path`` is the target with its ``a/`` / ``b/`` prefix removed."""

    old_path: str
    new_path: str
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        """The path the patch modifies (the new path unless it is ``/dev/null``)."""
        return self.old_path if self.new_path == "/dev/null" else self.new_path


def _strip_path(raw: str) -> str:
    path = raw.split("\t", 1)[0].strip()
    if path.startswith(("a/", "b/")):
        path = path[2:]
    return path


def text_lines(text: str) -> list[str]:
    """The lines of ``text`` as ``patch`` and ``git apply`` split them: at each newline only
    (``str.splitlines`` also splits at a form feed, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028
    and U+2029, so a diff line holding one broke its hunk, and one could hide a file header
    that a reader of the diff sees as part of a line); a CR before the newline is kept."""
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def parse_diff(text: str, source: str = "<diff>") -> list[FilePatch]:
    """Parse a unified diff into its file patches, in order (lines as :func:`text_lines`).

    Raises:
        PatchApplyError: naming ``source`` when the text has no file patch, a hunk outside a file,
            or a hunk whose line counts disagree with its header.
    """
    patches: list[FilePatch] = []
    lines = text_lines(text)
    i = hunks = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            patches.append(FilePatch(_strip_path(line[4:]), _strip_path(lines[i + 1][4:])))
            i += 2
            continue
        if line.startswith(_UNSUPPORTED):
            raise PatchApplyError(f"{source}: line {i + 1} ({line[:40]!r}...) is a binary patch, "
                                  f"rename, copy, new or deleted file, which cannot be "
                                  f"replayed; only in-place changes of text files can")
        match = _HUNK.match(line)
        if match:
            _check_header(match, i, source)
            hunks += 1
            if hunks > MAX_HUNKS:
                raise PatchApplyError(f"{source}: line {i + 1}: more than {MAX_HUNKS} hunks; "
                                      f"split the diff")
            if not patches:
                raise PatchApplyError(f"{source}: line {i + 1}: hunk before any '---'/'+++' "
                                      f"file header; fix the diff")
            current = patches[-1]
            hunk, i = _read_hunk(lines, i, match, len(current.hunks) + 1, source, current.path)
            current.hunks.append(hunk)
            continue
        i += 1
    if not patches or not any(p.hunks for p in patches):
        raise PatchApplyError(f"{source}: no unified-diff hunks found; expected '--- a/PATH', "
                              f"'+++ b/PATH' and '@@ -l,s +l,s @@' blocks")
    return patches


def _check_header(match: re.Match[str], i: int, source: str) -> None:
    """Refuse a hunk header whose line number or count has more than :data:`_MAX_DIGITS` digits."""
    for number in match.groups():
        if number is not None and len(number) > _MAX_DIGITS:
            raise PatchApplyError(f"{source}: line {i + 1}: a hunk header number of "
                                  f"{len(number)} digits (at most {_MAX_DIGITS}); fix the diff")


def _read_hunk(lines: list[str], i: int, match: re.Match[str], number: int, source: str,
               path: str) -> tuple[Hunk, int]:
    old_len = int(match.group(2)) if match.group(2) is not None else 1
    new_len = int(match.group(4)) if match.group(4) is not None else 1
    hunk = Hunk(number, int(match.group(1)), old_len, int(match.group(3)), new_len)
    i += 1
    old_seen = new_seen = 0
    while i < len(lines) and (old_seen < old_len or new_seen < new_len):
        line = lines[i]
        if line.removesuffix("\r") == _NO_NEWLINE:
            i += 1
            continue
        if line in ("", "\r"):
            line = " "  # an empty context line whose leading space was stripped
        kind = line[0]
        if kind not in " -+":
            break
        old_seen += kind in " -"
        new_seen += kind in " +"
        hunk.lines.append(line)
        i += 1
    while i < len(lines) and lines[i].removesuffix("\r") == _NO_NEWLINE:
        i += 1
    if (old_seen, new_seen) != (old_len, new_len):
        raise PatchApplyError(
            f"{source}: hunk {number} of {terminal(path)} does not parse: its header says "
            f"-{old_len} +{new_len} lines, the body has -{old_seen} +{new_seen}; fix the diff")
    return hunk, i


class Work:
    """The line comparisons left to applying one diff (:data:`SEARCH_BUDGET` at the start)."""

    def __init__(self, source: str = "<diff>") -> None:
        self.source = source
        self.budget = SEARCH_BUDGET
        self.left = self.budget

    def spend(self, lines: int, patch: FilePatch, hunk: Hunk | None = None) -> None:
        """Take ``lines`` comparisons from what is left; refuse the diff once none is left.

        Raises:
            PatchApplyError: naming the diff, the file and the hunk being placed.
        """
        self.left -= lines
        if self.left < 0:
            target = terminal(patch.path)
            where = f"hunk {hunk.number} of {target}" if hunk else f"patch of {target}"
            raise PatchApplyError(
                f"{self.source}: applying the diff takes more than {self.budget} line "
                f"comparisons (at {where}: its hunks lie far from the lines their headers name, "
                f"or it patches one file many times); make the diff against this file's version")


def apply_hunks(text: str, patch: FilePatch, source: str = "<diff>",
                work: Work | None = None) -> str:
    """Apply ``patch`` to ``text`` (the target file's contents); return the patched text.

    ``work``: the comparisons left to the whole diff (a fresh :class:`Work` when None).

    Raises:
        PatchApplyError: naming ``source``, the target file and the hunk number that does not
            match the text, or the diff's comparisons past :data:`SEARCH_BUDGET`.
    """
    work = work if work is not None else Work(source)
    lines = text_lines(text)
    work.spend(len(lines) + 1, patch)
    body = [line.removesuffix("\r") for line in lines]  # compared without a CRLF's CR
    ends = [line[len(kept):] for line, kept in zip(lines, body, strict=True)]
    offset = 0
    for hunk in patch.hunks:
        at = _locate(body, hunk, offset, partial(work.spend, patch=patch, hunk=hunk))
        if at is None:
            raise PatchApplyError(
                f"{source}: hunk {hunk.number} of {terminal(patch.path)} does not apply "
                f"(expected at line {hunk.old_start}: {hunk.old_lines()[:1]!r}...); the diff is "
                "not against this file's version")
        old, new = hunk.old_lines(), hunk.new_lines()
        end = ends[at] if at < len(ends) else (ends[-1] if ends else "")  # the file's own CR
        body[at:at + len(old)] = new
        ends[at:at + len(old)] = [end] * len(new)
        offset += at - _expected_at(hunk, offset) + len(new) - len(old)
    result = "\n".join(line + end for line, end in zip(body, ends, strict=True))
    return result + "\n" if body and text.endswith("\n") else result


def _expected_at(hunk: Hunk, offset: int) -> int:
    # A pure insertion (-l,0) goes after line l; other hunks start at line l.
    return hunk.old_start + offset - (1 if hunk.old_len else 0)


def _locate(body: list[str], hunk: Hunk, offset: int,
            spend: Callable[[int], None]) -> int | None:
    """The matching position nearest the hunk's expected line, each comparison ``spend``-ed."""
    old = hunk.old_lines()
    guess = max(_expected_at(hunk, offset), 0)
    if not old:
        return min(guess, len(body))
    first, size, last = old[0], len(old), len(body) - len(old)
    guess = min(guess, max(last, 0))  # a header past the end still searches the whole file
    for delta in range(len(body) + 1):
        if guess - delta < 0 and guess + delta > last:
            break
        spend(2)
        for at in (guess - delta, guess + delta):
            if 0 <= at <= last and body[at] == first:
                spend(size)
                if body[at:at + size] == old:
                    return at
    return None
