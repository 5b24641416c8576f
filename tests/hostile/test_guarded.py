"""The guarded reader: what it refuses, and its line reader against a plain split."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from forensics.errors import CaptureFormatError, UnsafeInputError
from forensics.importers import logs
from forensics.store import guarded
from forensics.store.guarded import iter_lines, open_guarded, read_bytes


def split_lines(data: bytes, max_line: int) -> list[tuple[int, bytes, bool, bool]]:
    """What iter_lines must yield, from bytes.split (a line past ``max_line`` cut, and said
    to be)."""
    parts = data.split(b"\n")
    last = parts.pop()
    out = [(i + 1, line[:max_line], True, len(line) > max_line)
           for i, line in enumerate(parts) if line]
    if last:
        out.append((len(parts) + 1, last[:max_line], False, len(last) > max_line))
    return out


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=60).map(lambda b: b.replace(b"\x00", b"\n")),
       chunk=st.integers(1, 9), max_line=st.integers(1, 7))
def test_iter_lines_equals_a_plain_split(tmp_path_factory: pytest.TempPathFactory,
                                         data: bytes, chunk: int, max_line: int) -> None:
    path = tmp_path_factory.mktemp("lines") / "f"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(guarded, "CHUNK", chunk)  # pieces that split lines anywhere
        assert list(iter_lines(path, "log", max_line=max_line)) == split_lines(data, max_line)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f")  # opening it for reading would block without O_NONBLOCK
    with pytest.raises(UnsafeInputError, match="not a regular file"):
        open_guarded(tmp_path / "f", "events file")


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused(target: str) -> None:
    with pytest.raises(UnsafeInputError, match="not a regular file"):
        read_bytes(Path(target), "log")


def test_a_link_out_of_the_capture_is_refused_and_one_inside_followed(tmp_path: Path) -> None:
    root = tmp_path / "c.capture"
    root.mkdir()
    (tmp_path / "secret").write_text("x")
    (root / "out").symlink_to(tmp_path / "secret")
    (root / "real").write_text("inside")
    (root / "in").symlink_to("real")
    with pytest.raises(UnsafeInputError, match="outside the capture"):
        read_bytes(root / "out", "manifest", root)
    assert read_bytes(root / "in", "manifest", root) == b"inside"


def test_a_file_over_its_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    with open(path, "wb") as handle:
        handle.truncate(guarded.LIMITS["manifest"] + 1)
    with pytest.raises(CaptureFormatError, match=f"at most {guarded.LIMITS['manifest']}"):
        read_bytes(path, "manifest")
    small = tmp_path / "small"
    small.write_bytes(b"x" * 11)
    with pytest.raises(CaptureFormatError, match="larger than the 10 bytes"):
        read_bytes(small, "manifest", limit=10)


OLD_ASSERT = re.compile(r"(?:(?P<file>[\w./-]+\.cu):(?P<line>\d+):\s*)?(?P<func>\w+)?.*?"
                        r"Assertion\s+[`'\"]?(?P<cond>.+?)[`'\"]?\s+failed")
TOKENS = ["Indexing.cu:1515: ", "a/b.cu:7:", "Assertion", " ", "  ", "   ", "`", "'", "failed",
          "srcIndex < n", "fn", ".", "x", ":", "[0,0,0]", "\t"]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.lists(st.sampled_from(TOKENS), max_size=12))
def test_the_linear_assert_parser_reads_lines_as_the_old_pattern_did(tokens: list[str]
                                                                      ) -> None:
    """On short lines (where the old, backtracking pattern was fast) with one "Assertion" after
    the line's first word and a condition that is not only quotes and blanks, both agree.
    (Elsewhere the old pattern's picks were accidents of backtracking: "Assertion" taken as
    the function name, a condition of one space.)"""
    text = "".join(tokens)
    at = text.find("Assertion")
    assume(text.count("Assertion") == 1 and at > 0 and not re.match(r"\w", text[at - 1]))
    old = OLD_ASSERT.search(text)
    assume(old is None or old["cond"].strip(" \t`'\""))
    new = logs._assertion(text)
    if old is None:
        assert new is None, text
        return
    assert new is not None, text
    assert new["detail"] == old["cond"].strip(), text
    assert new["function"] == old["func"], text
    assert new["location"] == (f"{old['file']}:{old['line']}" if old["file"] else None), text


def test_a_diff_variant_reads_its_diff_through_the_guards(tmp_path: Path) -> None:
    """``--variant vllm+PATH.diff``: a FIFO is refused at once, a diff over its cap before it
    is read, non-UTF-8 bytes with the file's name; each message says what to give instead."""
    from forensics.variants.vllm_diff import read_diff

    fifo = tmp_path / "fifo.diff"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeInputError, match="fifo.diff.*vllm\\+PATH.diff"):
        read_diff(fifo)
    big = tmp_path / "big.diff"
    with big.open("wb") as f:
        f.truncate(guarded.LIMITS["diff file"] + 1)
    with pytest.raises(CaptureFormatError, match="big.diff.*at most"):
        read_diff(big)
    latin = tmp_path / "latin.diff"
    latin.write_bytes(b"--- a/x\n+++ b/x\n\xff\n")
    with pytest.raises(CaptureFormatError, match="latin.diff.*not UTF-8"):
        read_diff(latin)
    good = tmp_path / "good.diff"
    good.write_text("--- a/x\n+++ b/x\n")
    assert read_diff(good) == "--- a/x\n+++ b/x\n"
