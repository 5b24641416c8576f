"""Round 8c (T41a): a key given twice in one JSON object of a capture is refused.

Python's parser keeps the last value of a key given twice, ``jq`` and a browser's viewer may
show the first: a capture's manifest, events line, expected verdicts or segment metadata that
names a key twice would show one value to its reader and another to us. Each is one line
naming the file (and the line for events), the key, escaped, and the fix.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from forensics.cli import main
from forensics.errors import CaptureFormatError
from forensics.store.arrow_codec import schema_info
from forensics.store.json_in import loads_finite, strict_json

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "data" / "incident-b-vocab-sentinel.capture"
#: a key that would change the terminal (ESC, a bidi override) were it printed as it is
HOSTILE_KEY = "note\x1b[31m\u202e"


def _copy(tmp_path: Path) -> Path:
    capture = tmp_path / "c.capture"
    shutil.copytree(INCIDENT, capture)
    return capture


def _twice(path: Path, key_and_value: str, after: str = "{") -> None:
    """Give ``path``'s first object (the one opened by ``after``) ``key_and_value`` first."""
    text = path.read_text(encoding="utf-8")
    assert after in text
    path.write_text(text.replace(after, f"{after}{key_and_value}, ", 1), encoding="utf-8")


def _one_line(argv: list[str], capsys: pytest.CaptureFixture[str], *words: str) -> str:
    assert main(argv) == 2
    out = capsys.readouterr()
    lines = (out.out + out.err).strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert "twice" in lines[0] and "keep one" in lines[0], lines
    assert all(w in lines[0] for w in words), lines
    return lines[0]


@pytest.mark.parametrize("key_and_value, after, key", [
    ('"format": 1', "{", "'format'"),
    ('"vocab_size": 1', '"model": {', "'vocab_size'"),  # nested: every object is checked
    ('"notes": "jq shows this"', "{", "'notes'"),
])
def test_a_manifest_key_given_twice_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], key_and_value: str, after: str,
        key: str) -> None:
    capture = _copy(tmp_path)
    _twice(capture / "manifest.json", key_and_value, after)
    _one_line(["inspect", str(capture)], capsys, "manifest.json", key)


def test_an_events_line_naming_a_key_twice_is_refused_naming_the_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = _copy(tmp_path)
    events = capture / "events-w0.jsonl"
    lines = events.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1] = lines[1].replace("{", '{"step": 3, ', 1)
    events.write_text("".join(lines), encoding="utf-8")
    _one_line(["inspect", str(capture)], capsys, "events-w0.jsonl", "line 2", "'step'")


def test_expected_verdicts_naming_a_key_twice_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = _copy(tmp_path)
    _twice(capture / "expected.json", '"crash_verdict": "unexplained"')
    _one_line(["check", str(capture)], capsys, "expected.json", "'crash_verdict'")
    assert not (capture / "expected.obtained.json").exists()


def test_the_repeated_key_is_shown_escaped(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    capture = _copy(tmp_path)
    escaped = HOSTILE_KEY.encode("unicode_escape").decode().replace("\\x1b", "\\\\x1b") \
        .replace("\\u202e", "\\\\u202e")
    _twice(capture / "manifest.json", f'"{escaped}": 1, "{escaped}": 2')
    line = _one_line(["inspect", str(capture)], capsys, "manifest.json")
    assert "\x1b" not in line and "\u202e" not in line, ascii(line)
    assert "\\x1b" in line and "u202e" in line, line


def test_segment_metadata_naming_a_key_twice_is_refused() -> None:
    schema = pa.schema([], metadata={b"forensics": b'{"format": 1, "site": "embedding", '
                                                   b'"site": "async_output"}'})
    with pytest.raises(CaptureFormatError, match=r"seg\.arrows: .*'site' is there twice"):
        schema_info(schema, "seg.arrows")


@pytest.mark.parametrize("loads", [strict_json, loads_finite])
def test_the_one_loader_takes_each_key_once_and_refuses_twice(loads: object) -> None:
    assert callable(loads)
    assert loads('{"a": {"b": 1, "c": [{"b": 2}]}, "b": 3}') == {"a": {"b": 1, "c": [{"b": 2}]},
                                                                 "b": 3}
    with pytest.raises(ValueError, match="'b' is there twice"):
        loads('{"a": [{"b": 1, "b": 1}]}')  # even with the same value


def test_every_bundled_capture_holds_each_key_once() -> None:
    """Nothing we write ourselves names a key twice: each bundled capture's JSON still loads."""
    files = [p for p in (ROOT / "data").rglob("*") if p.suffix in (".json", ".jsonl")]
    assert len(files) > 10
    for path in files:
        for line in (path.read_text(encoding="utf-8").splitlines() if path.suffix == ".jsonl"
                     else [path.read_text(encoding="utf-8")]):
            loads_finite(line)


def test_a_repro_data_file_naming_a_key_twice_is_bad_data(tmp_path: Path) -> None:
    """The generated repro's data file (attached to bug threads beside it): a key twice is one
    BadData line naming the key, before any case is read."""
    import importlib.util

    from forensics.share.repro import script_text

    (tmp_path / "test_repro.py").write_text(script_text())
    (tmp_path / "test_repro.json").write_text(
        '{"format": 1, "vllm": {"needed": "0.33", "capture": "0.33.0"}, "deadline_s": 60, '
        '"deadline_s": 3600, "cases": []}')
    spec = importlib.util.spec_from_file_location("repro_round8c_twice",
                                                  tmp_path / "test_repro.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(Exception) as refused:
        spec.loader.exec_module(module)
    assert type(refused.value).__name__ == "BadData", repr(refused.value)
    assert str(refused.value).startswith("test_repro.json: the JSON text: key 'deadline_s' is "
                                         "there twice"), refused.value


def test_a_catalogue_naming_a_key_twice_is_refused(tmp_path: Path) -> None:
    """The known-issue catalogue is TOML, whose parser already refuses a key given twice: one
    line naming the file (this holds before round 8c too; kept so the claim covers it)."""
    from forensics.known.schema import CATALOGUE_PATH, load_catalogue

    text = CATALOGUE_PATH.read_text(encoding="utf-8")
    assert "\nformat = 1\n" in text
    path = tmp_path / "catalogue.toml"
    path.write_text(text.replace("\nformat = 1\n", "\nformat = 1\nformat = 2\n", 1))
    with pytest.raises(CaptureFormatError, match=r"catalogue '.*catalogue\.toml': cannot be "
                                                 r"read as TOML \(Cannot overwrite a value"):
        load_catalogue(path)
