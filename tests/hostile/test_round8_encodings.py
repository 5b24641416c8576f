"""Hostile input, round 8 (T39s): a log in UTF-16 or UTF-32 WITHOUT a byte-order mark (some
Windows tools write UTF-16 so: ASCII text with a NUL after every byte, or before it for
big-endian) was read as UTF-8: its lines held NULs between their letters, none matched, and
`forensics import` wrote its device-side assert as "0 events". Its first 4 KiB now name its
likely encoding, and it is refused as a marked one is (T38d). A UTF-8 log is never refused:
the bundled vLLM logs, non-ASCII text, and binary-ish content (random bytes, runs of NULs,
small integers) all read as before."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from forensics.cli import main
from forensics.errors import CaptureFormatError
from forensics.importers.logs import text_lines
from forensics.importers.wide import PREFIX_BYTES, wide_encoding

#: the engine logs the tests keep (tests/data), real vLLM output
LOGS = sorted((Path(__file__).resolve().parents[1] / "data").glob("*.log"))
VLLM_LOG = next(log for log in LOGS if log.name == "vllm_gdn_illegal_access.log")
CRASH = ("INFO 12-05 10:00:00 engine.py:1] started\n"
         "ERROR 12-05 10:00:01 engine.py:2] Traceback (most recent call last):\n"
         '  File "x.py", line 1, in f\n'
         "RuntimeError: CUDA error: device-side assert triggered\n")


def _import(log: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path]:
    out = log.with_suffix(".capture")
    status = main(["import", str(log), "-o", str(out)])
    return status, capsys.readouterr().err.strip(), out


@pytest.mark.parametrize("codec,named", [("utf-16-le", "UTF-16LE"), ("utf-16-be", "UTF-16BE"),
                                         ("utf-32-le", "UTF-32LE"), ("utf-32-be", "UTF-32BE")])
@pytest.mark.parametrize("text", ["crash", "vllm"])
def test_a_wide_log_without_a_mark_is_refused_naming_its_encoding(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], codec: str, named: str,
        text: str) -> None:
    log = tmp_path / "windows.log"
    log.write_bytes((CRASH if text == "crash" else VLLM_LOG.read_text("utf-8")).encode(codec))
    status, err, out = _import(log, capsys)
    assert status == 2, err
    assert len(err.splitlines()) == 1, err
    assert "windows.log" in err and f"looks like {named} text without a byte-order mark" in err
    assert f"iconv -f {named} -t UTF-8" in err
    assert not out.exists()


def test_a_short_wide_log_is_refused_and_a_long_one_read_only_in_its_prefix(
        tmp_path: Path) -> None:
    """Two lines of UTF-16 are enough; 8 MiB of it are judged on their first 4 KiB."""
    short, long = tmp_path / "short.log", tmp_path / "long.log"
    short.write_bytes("ok\nbad\n".encode("utf-16-le"))
    long.write_bytes((CRASH * 40_000).encode("utf-16-le"))
    for log in (short, long):
        with pytest.raises(CaptureFormatError, match="UTF-16LE text") as caught:
            next(text_lines(log))
    assert f"first {PREFIX_BYTES} bytes" in str(caught.value)


@pytest.mark.parametrize("log", LOGS, ids=[log.name for log in LOGS])
def test_a_real_vllm_log_is_never_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          log: Path) -> None:
    copy = tmp_path / log.name
    copy.write_bytes(log.read_bytes())
    assert wide_encoding(log.read_bytes()[:PREFIX_BYTES]) is None
    status, err, out = _import(copy, capsys)
    assert status == 0 and "UTF-" not in err and out.exists(), err


def _binary(kind: str) -> bytes:
    rng = np.random.default_rng(7)
    text = (VLLM_LOG.read_bytes() * 4)[:PREFIX_BYTES]
    return {
        "random bytes": rng.integers(0, 256, 2 * PREFIX_BYTES, dtype=np.uint8).tobytes(),
        "NULs only": bytes(2 * PREFIX_BYTES),
        "a hole of NULs, then text": bytes(PREFIX_BYTES // 2) + text,
        "text, then a hole of NULs": text[:PREFIX_BYTES // 2] + bytes(PREFIX_BYTES),
        "small int16s": rng.integers(0, 256, PREFIX_BYTES).astype("<i2").tobytes(),
        "small big-endian int16s": rng.integers(0, 256, PREFIX_BYTES).astype(">i2").tobytes(),
        "small int32s": rng.integers(0, 256, PREFIX_BYTES).astype("<i4").tobytes(),
        "text with a NUL every 8 bytes": b"".join(text[i:i + 7] + b"\0"
                                                  for i in range(0, len(text), 7)),
        "non-ASCII UTF-8": ("設備側のアサート: ü, é, ß — 🙂\n" * 200).encode(),
    }[kind]


@pytest.mark.parametrize("kind", ["random bytes", "NULs only", "a hole of NULs, then text",
                                  "text, then a hole of NULs", "small int16s",
                                  "small big-endian int16s", "small int32s",
                                  "text with a NUL every 8 bytes", "non-ASCII UTF-8"])
def test_binary_ish_content_is_not_taken_for_wide_text(tmp_path: Path, kind: str) -> None:
    data = _binary(kind)
    assert wide_encoding(data[:PREFIX_BYTES]) is None
    log = tmp_path / "odd.log"
    log.write_bytes(data)
    lines = [line for line in re.split(rb"\r\n|\r|\n", data) if line]
    assert len(list(text_lines(log))) == len(lines)  # every line read as UTF-8, none refused
