"""Hostile input, round 9 (T43a-T43e): defects round 8 found and left open.

- T43a: a suggested command line named a file holding a control character with ANSI-C quoting
  (``$'\\x1b'``), which ``dash`` (``/bin/sh`` on Debian) reads as ``$`` and a quoted text:
  pasted there, it named another file. Now ``"$(printf '\\033')"``, which every POSIX shell
  reads.
- T43b: a segment's schema metadata naming a key twice (Arrow's KeyValue list) was read as
  pyarrow's dict of it, one value kept and the other dropped: now one line naming the segment,
  the column and the key.
- T43c: ``open_many``'s UnfitCapture named a capture by its label (``unicode_path``), in which
  a name holding the text ``\\x1b`` reads as one holding ESC: now the path as every path is
  shown (``terminal``).
- T43d: a capture of no records and a crash event was said to hold values that "do not
  explain" the crash: now that no records were captured to judge it by.
- T43e: a capture path that is not a folder was named raw in the message the CLI escapes as a
  whole (``inert``): a name holding the text ``\\x1b`` read as one holding ESC.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ROOT / "data" / "clean.capture"
SEGMENT = "embedding.r0.w0.0000.arrows"
SHELLS = ("dash", "bash")

#: names a shell or a terminal acts on, bytes that are not UTF-8, printf's own characters
#: (``%``, ``\\``, ``'``) after a control character, line breaks inside and at the end
NAMES = ["esc\x1b[31mred", "new\nline", "not-utf8-\udcff\udc80", "c1\x85 \u202e%d\\n'q'",
         "\x07%%s\\0", "nonchar\ufdd0\U0001fffe", "tab\there", "ends-in-a-break\n",
         "\x1bbreaks\n\n", "\n", "-\x1b", "\udcffx$(touch PWNED)`id`"]


def _words(shell: str, line: str, cwd: Path) -> list[bytes]:
    """The words ``shell`` reads in ``line`` (printed, not run)."""
    done = subprocess.run([shell, "-c", f"set -- {line}; printf '%s\\0' \"$@\""], cwd=cwd,
                          capture_output=True, check=True,
                          env={**os.environ, "LC_ALL": "C.UTF-8"})
    return done.stdout.split(b"\0")[:-1]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("name", NAMES)
def test_a_shell_word_names_the_same_file_in_dash_and_bash(tmp_path: Path, shell: str,
                                                           name: str) -> None:
    from forensics.escaping import inert, shell_path

    assert shutil.which(shell), f"{shell} is needed (apt-get install {shell})"
    (tmp_path / name).write_bytes(b"")
    word = shell_path(name)
    (got,) = _words(shell, word, tmp_path)
    assert got == os.fsencode(("./" if name.startswith("-") else "") + name), ascii(word)
    test = subprocess.run([shell, "-c", f"test -f {word}"], cwd=tmp_path, check=False)
    assert test.returncode == 0, ascii(word)
    body = word.removesuffix("'" + name[len(name.rstrip("\n")):] + "'")
    assert inert(body) == body and "\n" not in body, ascii(word)  # only ending breaks raw
    assert not (tmp_path / "PWNED").exists()


def _rewritten(tmp_path: Path, name: str, schema_of: object) -> Path:
    """``clean.capture`` whose embedding segment's schema is ``schema_of(schema)``, its
    batches as they were (the index removed: the segment is rescanned)."""
    capture = tmp_path / name
    shutil.copytree(CLEAN, capture)
    path = capture / SEGMENT
    with pa.ipc.open_stream(path.read_bytes()) as reader:
        schema, batches = reader.schema, list(reader)
    bad = schema_of(schema)  # type: ignore[operator]
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, bad) as writer:
        for batch in batches:
            writer.write_batch(pa.RecordBatch.from_arrays(batch.columns, schema=bad))
    path.with_name(SEGMENT + ".idx").unlink()
    return capture


def _twice_in_schema(schema: pa.Schema) -> pa.Schema:
    own = schema.metadata[b"forensics"]
    other = json.dumps({**json.loads(own), "rank": 1}).encode()
    return schema.with_metadata(pa.KeyValueMetadata([(b"forensics", own),
                                                     (b"forensics", other)]))


def _twice_in_column(schema: pa.Schema) -> pa.Schema:
    field = schema.field("input_ids")
    kind = field.metadata[b"kind"]
    pairs = [*field.metadata.items(), (b"kind", b"ragged" if kind != b"ragged" else b"tensor")]
    index = schema.get_field_index("input_ids")
    return schema.set(index, field.with_metadata(pa.KeyValueMetadata(pairs)))


@pytest.mark.parametrize(("schema_of", "names"), [
    (_twice_in_schema, ["'forensics'"]), (_twice_in_column, ["'kind'", "'input_ids'"])])
def test_a_metadata_key_named_twice_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], schema_of: object,
        names: list[str]) -> None:
    from forensics.cli import main

    capture = _rewritten(tmp_path, "twice.capture", schema_of)
    assert main(["inspect", str(capture)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert SEGMENT in line and "twice" in line and "delete it" in line, line
    for name in names:
        assert name in line, line


def test_no_metadata_key_of_a_probe_segment_repeats() -> None:
    from forensics.store.ipc_header import repeated_metadata_key

    for path in CLEAN.glob("*.arrows"):
        message = pa.ipc.read_message(pa.py_buffer(path.read_bytes()))
        assert repeated_metadata_key(message.metadata.to_pybytes()) is None, path.name


def _unfit_pair(folder: Path, name: str) -> list[Path]:
    """A capture ``name`` whose ids are uint64 past int64, and one of signed ids beside it:
    the two cannot be read in one dataset."""
    from forensics.records import Record
    from forensics.store.writer import write_capture

    def record(ids: np.ndarray) -> Record:
        return Record("embedding", 0, 0, {"input_ids": ids, "num_embeddings": 4})

    folder.mkdir()
    return [write_capture(folder / name, [record(np.array([1, 2**63], dtype=np.uint64))]),
            write_capture(folder / "signed.capture", [record(np.array([1, -1]))])]


def test_an_unfit_capture_is_named_as_every_path_is(tmp_path: Path) -> None:
    """Two captures whose names escape alike in the label (the text ``\\x1b``, and ESC) are
    named apart, each as :func:`forensics.escaping.terminal` shows its path."""
    from forensics.escaping import terminal
    from forensics.fleet.dataset import UnfitCapture, open_many

    messages = []
    for number, name in enumerate(["a\\x1b\udcff.capture", "a\x1b\udcff.capture"]):
        paths = _unfit_pair(tmp_path / str(number), name)
        with pytest.raises(UnfitCapture) as caught:
            open_many(paths)
        assert f"capture '{terminal(os.path.abspath(paths[0]))}' column" in str(caught.value)
        messages.append(str(caught.value).replace(f"/{number}/", "/N/"))
    assert messages[0] != messages[1]


def test_a_crash_with_no_records_is_not_said_to_be_unexplained_by_values(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``summary``, ``replay`` and ``known`` of a capture of no records and a crash event:
    not explained, since nothing was captured to judge it by (never values that do not
    explain it)."""
    from forensics.cli import main
    from forensics.store.writer import write_capture

    capture = write_capture(tmp_path / "empty.capture", [], events=[
        {"kind": "engine_exception", "message": "IndexError: boom", "process": "a"}])
    for command in ("summary", "replay", "known"):
        main([command, str(capture)])
        out = " ".join(capsys.readouterr().out.split())
        assert "Not explained: the capture holds a crash, yet no records were captured" in out, \
            command
        assert "do not explain" not in out and "captured value out of range" not in out, command


def test_two_missing_captures_escaping_alike_are_named_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.cli import main

    lines = []
    for name in ["gone\\x1b.capture", "gone\x1b.capture"]:
        assert main(["inspect", str(tmp_path / name)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        lines.append(line)
    assert "gone\\\\x1b.capture" in lines[0] and "gone\\x1b.capture" in lines[1]
    assert lines[0] != lines[1]
