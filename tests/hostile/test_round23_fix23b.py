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
    ("utf-16-le", "\u4e2d\u6587\n", 202, "UTF-16 text of unknown byte order",
     "UTF-16LE -t UTF-8, or -f UTF-16BE -t UTF-8)"),
])
def test_the_byte_order_of_appended_wide_text_is_named_or_said_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: str, lead: str,
        line: int, named: str, iconv: str) -> None:
    """A crash dump appended in UTF-16LE after an empty wide line (``\\n\\0``): the lines after
    it start with that line feed's NUL and read as big endian, and the refusal named it
    UTF-16BE (``iconv -f UTF-16BE`` makes garbage of it). After an empty line the byte order
    cannot be told (UTF-8's blank line then UTF-16BE is the same bytes): the line says so and
    names both conversions, as after a first wide line of CJK text alone (no NUL, and no
    UTF-8); after UTF-8 text each order is named as before."""
    from forensics.cli import main

    log = tmp_path / "mixed.log"
    log.write_bytes(b"INFO 12-07 10:00:00 starting the engine\n" * 200 +
                    (lead + DUMP.read_text(encoding="utf-8")).encode(encoding))
    assert main(["import", str(log), "-o", str(tmp_path / "m.capture")]) == 2
    err = capsys.readouterr().err
    assert f"mixed.log' line {line} looks like {named} (" in err, err
    assert err.strip().endswith(f"(iconv -f {iconv}") and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m.capture").exists()


# ----------------------------- T139b: a launch's path is compiled or interpreter, nothing else


def _refusal(change: dict[str, Any]) -> str:
    """The one line ``check_launch`` refuses round 4's launch with ``change`` in."""
    from test_round4_kernels import launch

    from forensics.errors import CaptureFormatError
    from forensics.kernels.format import check_launch

    with pytest.raises(CaptureFormatError) as raised:
        check_launch({**launch(), **change}, "capture 'k.capture' kernel_launch event 0")
    return str(raised.value)


@pytest.mark.parametrize("path", ["rm -rf /", "", None, 1, "Compiled"])
def test_a_launch_path_other_than_compiled_or_interpreter_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], path: Any) -> None:
    """The format says a launch ran ``compiled`` or in the ``interpreter``; any text of at
    most 300 characters was read. ``kernels`` refuses another in one line naming the file,
    the field and the fix; both paths (and none: ``compiled``) are read."""
    from test_round4_kernels import launch, write_capture

    from forensics.cli import main
    from forensics.kernels.format import check_launch

    line = _refusal({"path": path})
    assert line == ("capture 'k.capture' kernel_launch event 0: field 'path' must be "
                    "'compiled' or 'interpreter' (how the launch ran); fix or delete the event "
                    "line"), line
    capture = write_capture(tmp_path / "k.capture", [{**launch(), "path": path}])
    assert main(["kernels", str(capture)]) == 2
    out, err = capsys.readouterr()
    assert not out and "events-h-1.jsonl' line 1, kernel_launch event 0: field 'path'" in err
    assert len(err.strip().splitlines()) == 1, err
    for read in ("compiled", "interpreter"):
        assert check_launch({**launch(), "path": read}, "k").path == read
    event = launch()
    del event["path"]
    assert check_launch(event, "k").path == "compiled"


# --------------------------- T139c: a bool where the contracts read an int parameter is refused


@pytest.mark.parametrize(("part", "name", "value"), [
    ("scalars", "max_num_reqs", True), ("scalars", "cp_rank", False),
    ("constexprs", "CP_SIZE", True), ("constexprs", "CP_INTERLEAVE", True)])
def test_a_bool_for_an_int_parameter_is_refused(part: str, name: str, value: bool) -> None:
    """``"max_num_reqs": true`` was read (Python's bool is an int): the replay ran the kernel
    with 1 and the contract held no slot to it, without a word. A bool where the contracts
    read an int is refused in one line naming the field and the fix; an int there, and a bool
    for another parameter, are read."""
    from test_round4_kernels import launch

    from forensics.kernels.format import check_launch

    parts = {"scalars": {}, "constexprs": {}, part: {name: value}}
    args = [*launch()["args"], name] if name != "max_num_reqs" else launch()["args"]
    line = _refusal({**parts, "args": args})
    assert line == (f"capture 'k.capture' kernel_launch event 0: field '{part}' holds {name!r} "
                    f"as {str(value).lower()}, a bool: the kernel's parameter is an int; fix or "
                    "delete the event line"), line
    assert check_launch({**launch(), **parts, part: {name: 4}, "args": args}, "k")
    assert check_launch({**launch(), "scalars": {"max_num_reqs": 4, "HAS_X": True},
                         "args": [*launch()["args"], "HAS_X"]}, "k")


def test_the_plain_int_helper_refuses_bools() -> None:
    """One helper tells a capture's JSON integer from a bool (the kernel format's ints, the
    contracts' bounds and rank)."""
    from forensics.digits import plain_int

    assert [plain_int(v) for v in (0, 2**70, -1, True, False, 1.0, "1", None)] == [
        True, True, True, False, False, False, False, False]


# ------------------------------- T139d: a tensor file holding no record is refused, not imported


def _empty_files(folder: Path) -> list[tuple[Path, str]]:
    """Tensor files of no record, each with what the refusal says it holds."""
    import struct

    import numpy as np
    import torch

    made = []
    for name, value, held in (("list.pt", [], "an empty list"), ("tuple.pt", (), "an empty tuple"),
                              ("dict.pt", {}, "an empty dict")):
        torch.save(value, folder / name)
        made.append((folder / name, held))
    np.savez(folder / "none.npz")
    made.append((folder / "none.npz", "no member"))
    for name, header in (("none.safetensors", b"{}"),
                         ("meta.safetensors", b'{"__metadata__": {}}')):
        (folder / name).write_bytes(struct.pack("<Q", len(header)) + header)
        made.append((folder / name, "no tensor and no metadata"))
    return made


def test_a_tensor_file_of_no_record_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``.pt`` of an empty list imported as "0 records (none), 0 events", exit 0; an empty
    ``.npz`` or ``.safetensors`` said its record 0 had no ``site``. Each now says it holds no
    record, nothing to import, in one line naming the file and the fix (exit 2)."""
    from forensics.cli import main

    for path, held in _empty_files(tmp_path):
        out = tmp_path / f"{path.name}.capture"
        assert main(["import", str(path), "-o", str(out)]) == 2, path
        printed, err = capsys.readouterr()
        assert not printed and not out.exists(), (path, printed)
        assert err.strip() == (
            f"forensics import: error: '{path}' holds no record ({held}): nothing to "
            "import; save one record (its 'site', 'step' and the site's fields)"), err


# --------------------------- T139e: two threads inside owner_read_write leave the umask as found


def test_two_threads_lifting_the_umask_leave_it_as_they_found_it() -> None:
    """Thread A enters ``owner_read_write`` (umask ``0477`` lifted to ``0077``), thread B
    enters, A leaves (it put back ``0477``), B leaves: B put back what it found, the lifted
    ``0077``, and every file made later kept its owner's bits against the user's umask.
    The threads share one lift now: the last to leave puts back ``0477``; one thread inside
    twice too."""
    from forensics.modes import owner_read_write

    steps = [threading.Event() for _ in range(3)]

    def first() -> None:
        with owner_read_write():
            steps[0].set()
            steps[1].wait()
        steps[2].set()

    def second() -> None:
        steps[0].wait()
        with owner_read_write():
            steps[1].set()
            steps[2].wait()
            inside.append(os.umask(0o077))
            os.umask(inside[-1])

    inside: list[int] = []
    before = os.umask(0o477)
    try:
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with owner_read_write(), owner_read_write():
            pass
        after = os.umask(0o022)
    finally:
        os.umask(before)
    assert inside == [0o077] and after == 0o477, ([oct(m) for m in inside], oct(after))
