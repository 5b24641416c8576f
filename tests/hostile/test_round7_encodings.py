"""Hostile input, round 7 (T38d): a log in UTF-16 or UTF-32 (PowerShell's ``>`` writes UTF-16
with a byte-order mark) was read as UTF-8: none of its lines matched, and `forensics import`
wrote a capture of its device-side assert as "0 events". It is refused in one line naming the
log, its encoding and the conversion; a UTF-8 log's byte-order mark is dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.test_round7_compressed import _run

CRASH = ("INFO 12-05 10:00:00 engine.py:1] started\n"
         "ERROR 12-05 10:00:01 engine.py:2] Traceback (most recent call last):\n"
         '  File "x.py", line 1, in f\n'
         "RuntimeError: CUDA error: device-side assert triggered\n")


@pytest.mark.parametrize("codec,named", [("utf-16", "UTF-16LE"), ("utf-32", "UTF-32LE"),
                                         ("utf-16-be", "UTF-16BE")])
def test_a_wide_log_is_refused_naming_its_encoding(tmp_path: Path, codec: str,
                                                   named: str) -> None:
    log = tmp_path / "powershell.log"
    data = CRASH.encode(codec)
    log.write_bytes(b"\xfe\xff" + data if codec == "utf-16-be" else data)
    out = tmp_path / "out.capture"
    status, err, _ = _run("import", str(log), "-o", str(out))
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "powershell.log" in lines[0] and f"is {named} text" in lines[0]
    assert f"iconv -f {named[:-2]} -t UTF-8" in lines[0]
    assert not out.exists()


def test_a_utf8_byte_order_mark_changes_nothing(tmp_path: Path) -> None:
    import forensics

    plain, marked = tmp_path / "plain.log", tmp_path / "marked.log"
    plain.write_text(CRASH)
    marked.write_bytes(b"\xef\xbb\xbf" + CRASH.encode())
    for log in (plain, marked):
        status, err, _ = _run("import", str(log), "-o", str(log.with_suffix(".capture")))
        assert status == 0, err
    events = [forensics.load(tmp_path / f"{name}.capture").events for name in ("plain", "marked")]
    assert [e["kind"] for e in events[0]] == ["cuda_error"]
    assert [{k: v for k, v in e.items() if k != "source"} for e in events[1]] == \
        [{k: v for k, v in e.items() if k != "source"} for e in events[0]]
