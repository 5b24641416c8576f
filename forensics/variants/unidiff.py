"""A small unified-diff parser and applier in pure Python (no ``patch`` binary, no vLLM).

Used by :mod:`forensics.variants.vllm_diff` to patch private copies of vLLM modules. Hunks must
match exactly (no fuzz); a hunk may apply at an offset from the line its header states, the
nearest matching position winning, as ``patch`` does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from forensics.errors import PatchApplyError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\ No newline at end of file"


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
        """Context and removed lines: what the hunk expects to find."""
        return [line[1:] for line in self.lines if line[0] in " -"]

    def new_lines(self) -> list[str]:
        """Context and added lines: what the hunk leaves in place."""
        return [line[1:] for line in self.lines if line[0] in " +"]


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


def parse_diff(text: str, source: str = "<diff>") -> list[FilePatch]:
    """Parse a unified diff into its file patches, in order.

    Raises:
        PatchApplyError: naming ``source`` when the text has no file patch, a hunk outside a file,
            or a hunk whose line counts disagree with its header.
    """
    patches: list[FilePatch] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            patches.append(FilePatch(_strip_path(line[4:]), _strip_path(lines[i + 1][4:])))
            i += 2
            continue
        match = _HUNK.match(line)
        if match:
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


def _read_hunk(lines: list[str], i: int, match: re.Match[str], number: int, source: str,
               path: str) -> tuple[Hunk, int]:
    old_len = int(match.group(2)) if match.group(2) is not None else 1
    new_len = int(match.group(4)) if match.group(4) is not None else 1
    hunk = Hunk(number, int(match.group(1)), old_len, int(match.group(3)), new_len)
    i += 1
    old_seen = new_seen = 0
    while i < len(lines) and (old_seen < old_len or new_seen < new_len):
        line = lines[i]
        if line == _NO_NEWLINE:
            i += 1
            continue
        if line == "":
            line = " "  # an empty context line whose leading space was stripped
        kind = line[0]
        if kind not in " -+":
            break
        old_seen += kind in " -"
        new_seen += kind in " +"
        hunk.lines.append(line)
        i += 1
    while i < len(lines) and lines[i] == _NO_NEWLINE:
        i += 1
    if (old_seen, new_seen) != (old_len, new_len):
        raise PatchApplyError(
            f"{source}: hunk {number} of {path} does not parse: its header says -{old_len} "
            f"+{new_len} lines, the body has -{old_seen} +{new_seen}; fix the diff")
    return hunk, i


def apply_hunks(text: str, patch: FilePatch, source: str = "<diff>") -> str:
    """Apply ``patch`` to ``text`` (the target file's contents); return the patched text.

    Raises:
        PatchApplyError: naming ``source``, the target file and the hunk number that does not
            match the text.
    """
    lines = text.splitlines(keepends=True)
    ends_with_newline = text.endswith("\n")
    body = [line.rstrip("\r\n") for line in lines]
    offset = 0
    for hunk in patch.hunks:
        at = _locate(body, hunk, offset)
        if at is None:
            raise PatchApplyError(
                f"{source}: hunk {hunk.number} of {patch.path} does not apply (expected at line "
                f"{hunk.old_start}: {hunk.old_lines()[:1]!r}...); the diff is not against this "
                f"file's version")
        old, new = hunk.old_lines(), hunk.new_lines()
        body[at:at + len(old)] = new
        offset += at - _expected_at(hunk, offset) + len(new) - len(old)
    result = "\n".join(body)
    return result + "\n" if body and ends_with_newline else result


def _expected_at(hunk: Hunk, offset: int) -> int:
    # A pure insertion (-l,0) goes after line l; other hunks start at line l.
    return hunk.old_start + offset - (1 if hunk.old_len else 0)


def _locate(body: list[str], hunk: Hunk, offset: int) -> int | None:
    old = hunk.old_lines()
    guess = max(_expected_at(hunk, offset), 0)
    if not old:
        return min(guess, len(body))
    for delta in range(len(body) + 1):
        for at in (guess - delta, guess + delta):
            if 0 <= at <= len(body) - len(old) and body[at:at + len(old)] == old:
                return at
    return None
