"""Hostile input, round 23 (fix 23b): what round 22 found and left in the importers, the kernel
records and the umask's lift."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: a crash dump's lines, appended after the UTF-8 log in another encoding
DUMP = Path(__file__).parents[1] / "data" / "vllm_dump_some_placeholder.log"

# --------------------- T139a: the byte order of wide text after an empty wide line is not guessed


@pytest.mark.parametrize(("encoding", "lead", "line", "named", "iconv"), [
    ("utf-16-le", "", 201, "UTF-16LE text", "UTF-16LE -t UTF-8)"),
    ("utf-16-be", "", 201, "UTF-16BE text", "UTF-16BE -t UTF-8)"),
    ("utf-16-le", "\n", 202, "UTF-16 text of unknown byte order",
     "UTF-16LE -t UTF-8, or -f UTF-16BE -t UTF-8)"),
    ("utf-16-be", "\n", 202, "UTF-16 text of unknown byte order",
     "UTF-16LE -t UTF-8, or -f UTF-16BE -t UTF-8)"),
    ("utf-32-le", "\n", 202, "UTF-32 text of unknown byte order",
     "UTF-32LE -t UTF-8, or -f UTF-32BE -t UTF-8)"),
])
def test_the_byte_order_of_appended_wide_text_is_named_or_said_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: str, lead: str,
        line: int, named: str, iconv: str) -> None:
    """A crash dump appended in UTF-16LE after an empty wide line (``\\n\\0``): the lines after
    it start with that line feed's NUL and read as big endian, and the refusal named it
    UTF-16BE (``iconv -f UTF-16BE`` makes garbage of it). After an empty line the byte order
    cannot be told (UTF-8's blank line then UTF-16BE is the same bytes): the line says so and
    names both conversions; after UTF-8 text each order is named as before."""
    from forensics.cli import main

    log = tmp_path / "mixed.log"
    log.write_bytes(b"INFO 12-07 10:00:00 starting the engine\n" * 200 +
                    (lead + DUMP.read_text(encoding="utf-8")).encode(encoding))
    assert main(["import", str(log), "-o", str(tmp_path / "m.capture")]) == 2
    err = capsys.readouterr().err
    assert f"mixed.log' line {line} looks like {named} (" in err, err
    assert err.strip().endswith(f"(iconv -f {iconv}") and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m.capture").exists()
