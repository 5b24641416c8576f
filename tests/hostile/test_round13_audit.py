"""Round 13's audit of allocations and waits (docs/budget-audit.md): the one unbounded input
it found, a diff named by ``--variant vllm+PATH.diff`` that a shared report or summary names
by its digest (:func:`forensics.variants.vllm_diff.shared_name`), read whole and unguarded
where building its variant reads it through the guarded reader (T60a, T60b)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from forensics.errors import CaptureFormatError, UnsafeInputError
from forensics.store import guarded
from forensics.variants import shared_diffs
from forensics.variants.vllm_diff import read_diff, shared_name

#: the most seconds a test waits for a call that must not block (never reached when it holds)
PATIENCE = 120.0
DIFF_TEXT = "--- a/vllm/x.py\n+++ b/vllm/x.py\n@@ -1 +1 @@\n-a\n+b\n"


def _oversized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A diff one line longer than the diff cap, shrunk for the test to the diff's own size."""
    diff = tmp_path / "big.diff"
    diff.write_text(DIFF_TEXT * 2, encoding="utf-8")
    monkeypatch.setitem(guarded.LIMITS, "diff file", len(DIFF_TEXT))
    return diff


def test_a_diff_past_its_cap_is_not_read_to_be_named(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """T60a: naming a diff reads it under the diff file's cap, as building its variant does:
    one past it is refused with the cap named, and a shared output keeps the name it was
    given (building the variant then says why), instead of reading gigabytes to digest them."""
    diff = _oversized(tmp_path, monkeypatch)
    with pytest.raises(CaptureFormatError, match=r"diff file .*big\.diff.* at most \d+"):
        read_diff(diff)  # the variant's own reader refuses it ...
    with pytest.raises(CaptureFormatError, match=r"diff file .*big\.diff.* at most \d+"):
        shared_name(diff)  # ... and so does naming it
    given = f"vllm+{diff}"
    assert shared_diffs(["upstream", given]) == (["upstream", given], {})


def test_a_diff_within_its_cap_is_still_named_by_its_digest(tmp_path: Path) -> None:
    """T60a: the guard changes no name: a readable diff is named by file name and digest."""
    diff = tmp_path / "fix.diff"
    diff.write_text(DIFF_TEXT, encoding="utf-8")
    shown, diffs = shared_diffs([f"vllm+{diff}"])
    assert shown[0].startswith("vllm+fix.diff@") and len(shown[0]) == len("vllm+fix.diff@") + 8
    assert diffs == {shown[0]: str(diff)}


def test_a_fifo_named_as_a_diff_does_not_block_the_naming(tmp_path: Path) -> None:
    """T60b: a FIFO given as the diff (no writer: opening it to read would wait forever) is
    refused at open, without waiting; the shared output keeps the name it was given."""
    fifo = tmp_path / "stuck.diff"
    os.mkfifo(fifo)
    answers: list[object] = []
    thread = threading.Thread(target=lambda: answers.append(shared_diffs([f"vllm+{fifo}"])),
                              daemon=True)
    thread.start()
    thread.join(PATIENCE)
    try:
        assert not thread.is_alive(), "naming a FIFO diff blocked"
        assert answers == [([f"vllm+{fifo}"], {})]
    finally:
        if thread.is_alive():  # let a blocked open end: a writer comes and goes
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    with pytest.raises(UnsafeInputError):
        shared_name(fifo)  # never blocks: the guarded open refuses what is not a plain file
