"""Hostile input, round 9 (T49a-T49d): a capture-derived value named raw in an error message.

:func:`forensics.errors.one_line` makes a message one line by collapsing each run of raw
whitespace into one space and escaping what remains (``inert``, which leaves backslashes as
they are: the values in a message are escaped when it is composed). A value put raw into a
message (a capture's or source's path, a segment's file name, an events file's) therefore read
with a line break as a space, and with the text ``\\x1b`` as ESC. Each family now escapes the
value (``escaping.terminal``) where the message is composed:

- T49a: the store: a segment (``Segment.where``), the manifest, the events file, a guarded file;
- T49b: the importers: a source's path in every message (``where_of`` and each raise);
- T49c: the kernel launches of a capture (``launches_of``), a fleet row's ``error``, a diff's
  path (``patched_sources``), ``expected.json``'s path and a variant name read from it;
- T49d: an OSError's file name in :func:`one_line`.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ROOT / "data" / "clean.capture"
SEGMENT = "embedding.r0.w0.0000.arrows"
#: two names that read alike when whitespace collapses or a backslash is not escaped
PAIRS = [("a b", "a\nb"), ("a\tb", "a b"), ("esc\x1b[31m", "esc\\x1b[31m")]
#: what never stands raw in a one-line message
RAW = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _message(action: Callable[[], object]) -> str:
    """The one-line message of the error ``action`` raises."""
    from forensics.errors import one_line

    with pytest.raises(Exception) as caught:  # noqa: PT011  (each family raises its own type)
        action()
    return one_line(caught.value)


def _apart(first: str, second: str, marker: str) -> None:
    """Two messages of two names (files in one folder, so only the names differ): each one
    line of inert text naming the thing (``marker``), and not alike."""
    for text in (first, second):
        assert marker in text and not RAW.search(text), text
    assert first != second, first


def _damage_segment(capture: Path) -> str:
    (capture / SEGMENT).write_bytes(b"not an Arrow stream")
    return f"segment '{SEGMENT}' of"


def _damage_manifest(capture: Path) -> str:
    (capture / "manifest.json").write_text('{"format": "one"}')
    return "'format' must be a positive integer"


def _damage_events(capture: Path) -> str:
    (capture / "events-p1.jsonl").write_text("{not json}\n")
    return "events file '"


#: a file of a capture made bad, and what the message about it says
DAMAGES = [_damage_segment, _damage_manifest, _damage_events]


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize(("one", "other"), PAIRS)
def test_a_bad_file_of_captures_named_alike_is_named_apart(
        tmp_path: Path, one: str, other: str, damage: Callable[[Path], str]) -> None:
    from forensics.store.reader import load

    messages, marker = [], ""
    for name in (one, other):
        capture = tmp_path / f"{name}.capture"
        shutil.copytree(CLEAN, capture)
        marker = damage(capture)
        messages.append(_message(lambda capture=capture: load(capture)))
    _apart(*messages, marker)


def _npz_message(tmp_path: Path, name: str) -> str:
    from forensics.importers import read_source

    source = tmp_path / f"{name}.npz"
    source.write_bytes(b"not a zip archive")
    return _message(lambda: read_source(source))


def _record_message(tmp_path: Path, name: str) -> str:
    from forensics.importers import read_source

    source = tmp_path / f"{name}.safetensors"
    header = json.dumps({"__metadata__": {"step": "1"}}).encode()
    source.write_bytes(struct.pack("<Q", len(header)) + header)
    return _message(lambda: read_source(source))


@pytest.mark.parametrize(("one", "other"), PAIRS)
def test_sources_named_alike_are_named_apart(tmp_path: Path, one: str, other: str) -> None:
    _apart(_npz_message(tmp_path, one), _npz_message(tmp_path, other),
           "is not a readable npz archive")
    _apart(_record_message(tmp_path, one), _record_message(tmp_path, other),
           "record 0 in '")  # importers.common.where_of


@pytest.mark.parametrize(("one", "other"), PAIRS)
def test_kernel_launches_of_captures_named_alike_are_named_apart(one: str, other: str) -> None:
    from forensics.kernels.format import KIND, launches_of

    def launches(name: str) -> str:
        return _message(lambda: launches_of([{"kind": KIND, "format": 0}], f"{name}.capture"))

    _apart(launches(one), launches(other), "kernel_launch event 0: field 'format'")


def _row_error(tmp_path: Path, name: str) -> str:
    import pyarrow as pa

    from forensics.fleet.piece import replay_piece

    capture = tmp_path / f"{name}.capture"
    shutil.copytree(CLEAN, capture)
    for segment in capture.glob("*.arrows*"):
        segment.unlink()
    row = pa.ipc.open_stream(replay_piece(str(capture))).read_all().to_pylist()[0]
    return str(row["error"])


@pytest.mark.parametrize(("one", "other"), PAIRS)
def test_fleet_rows_of_captures_named_alike_are_named_apart(tmp_path: Path, one: str,
                                                             other: str) -> None:
    _apart(_row_error(tmp_path, one), _row_error(tmp_path, other),
           "holds no records: nothing to replay")


@pytest.mark.parametrize(("one", "other"), PAIRS)
def test_an_os_error_names_files_named_alike_apart(one: str, other: str) -> None:
    from forensics.errors import one_line

    def line(name: str) -> str:
        return one_line(FileNotFoundError(2, "No such file or directory", name))

    _apart(line(one), line(other), "No such file or directory; check the path")


def _diff_message(tmp_path: Path, name: str) -> str:
    from forensics.variants.vllm_diff import patched_sources

    diff = tmp_path / f"{name}.diff"
    diff.write_text("not a unified diff\n")
    return _message(lambda: patched_sources(diff))


@pytest.mark.parametrize(("one", "other"), PAIRS)
def test_diffs_named_alike_are_named_apart(tmp_path: Path, one: str, other: str) -> None:
    _apart(_diff_message(tmp_path, one), _diff_message(tmp_path, other),
           ".diff: no unified-diff hunks found")


def _expected_message(tmp_path: Path, name: str) -> str:
    from forensics.share.expectations import read_expected

    capture = tmp_path / f"{name}.capture"
    shutil.copytree(CLEAN, capture)
    (capture / "expected.json").unlink()
    return _message(lambda: read_expected(capture))


@pytest.mark.parametrize(("one", "other"), PAIRS)
def test_expected_results_of_captures_named_alike_are_named_apart(tmp_path: Path, one: str,
                                                                   other: str) -> None:
    from forensics.share.evidence import check_json

    _apart(_expected_message(tmp_path, one), _expected_message(tmp_path, other),
           "expected.json: no expected results")

    def variant(name: str) -> str:  # a variant's name read from the file (evidence.shortened)
        return _message(lambda: check_json({"verdicts": {name: "x"}}, tmp_path / "e.json"))

    _apart(variant(one), variant(other), "must map each site to a verdict string")
