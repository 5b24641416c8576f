"""Round 13 (T56a-d): an output is written through its folder held open, so a link another
user swaps in on the way once it is open is never followed (T56a); a report's diff names are
known to its notebook only, never registered (T56b); ``summary``'s Markdown names a diff as
a report does (T56c); a failed write names the output by its real path (T56d)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from forensics.atomic import shared_mode, write_atomically
from forensics.cli import main
from forensics.errors import CaptureFormatError, OutputError, UnknownVariantError
from forensics.escaping import shell_word
from forensics.variants import diffs_named, registry, shared_diffs
from forensics.variants.vllm_diff import shared_name
from tests.conftest import DATA

#: another user: the owner of the folder and of the link swapped in for it
STRANGER = 65534
INCIDENT = DATA / "incident-b-vocab-sentinel.capture"
DIFF = DATA / "patches" / "vocab-guard.diff"

Swap = Callable[[], Path]


@pytest.fixture
def strangers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path, Swap]]:
    """``(folder, where, swap)``: ``folder``, another user's, in a sticky folder every user
    may write; ``swap()`` does what that user may do at any moment: renames it aside (its
    new path is returned) and puts a link of theirs to ``where`` in its place. Root gives its
    folder and link away; a test user that cannot uses ``/tmp`` and passes for another user
    (as the T52b tests do)."""
    where = tmp_path / "elsewhere"
    where.mkdir()
    root = os.geteuid() == 0
    if root:
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o1777)
        folder = shared / "figs"
        folder.mkdir()
        os.chown(folder, STRANGER, STRANGER)
    else:
        folder = Path("/tmp") / f"forensics-test-{uuid.uuid4().hex}"
        folder.mkdir()
        monkeypatch.setattr(os, "geteuid", lambda: STRANGER)
    aside = folder.with_name(f"{folder.name}-aside")

    def swap() -> Path:
        folder.rename(aside)
        folder.symlink_to(where)
        if root:
            os.lchown(folder, STRANGER, STRANGER)
        return aside

    yield folder, where, swap
    if folder.is_symlink():
        folder.unlink()
    shutil.rmtree(aside if aside.exists() else folder, ignore_errors=True)


# ------------------------------------ T56a: what is checked is what is written, held open


@pytest.mark.parametrize("name", ["a.png", "deep/a.png"])
def test_a_link_swapped_in_while_a_file_is_written_is_not_followed(
        strangers: tuple[Path, Path, Swap], name: str) -> None:
    """The check of the way and the write were two walks of one path: another user who
    swapped their folder for a link while the file was written (a figure drawn, a report's
    notebook run) had the file follow the link. The folder is held open now: the file lands
    in the folder that was checked, wherever its owner moved it, never where the link
    points."""
    folder, where, swap = strangers
    moved: list[Path] = []

    def write(tmp: Path) -> None:
        assert stat.S_IMODE(os.stat(tmp).st_mode) == 0o600  # private until it is whole
        moved.append(swap())
        tmp.write_text("figure")

    write_atomically(folder / name, write, shared=True)
    assert list(where.iterdir()) == []
    written = moved[0] / name
    assert written.read_text() == "figure"
    assert stat.S_IMODE(written.stat().st_mode) == shared_mode()
    assert [p.name for p in written.parent.iterdir()] == ["a.png"]  # no temporary file left


def test_a_link_swapped_in_while_a_capture_is_written_is_not_followed(
        strangers: tuple[Path, Path, Swap]) -> None:
    """A capture is built beside its name and renamed into place, by path: a link swapped in
    for its folder while the records were written sent the rest of the build, and the
    rename, through it. It is built in its folder held open now."""
    from forensics.store.reader import load
    from forensics.store.writer import write_capture

    folder, where, swap = strangers
    records = list(load(DATA / "stale-prev-row.capture"))
    moved: list[Path] = []

    def slowly() -> Iterator[object]:
        yield records[0]
        moved.append(swap())
        yield from records[1:]

    write_capture(folder / "x.capture", slowly(), {"creator": "test"})  # type: ignore[arg-type]
    assert list(where.iterdir()) == []
    assert len(load(moved[0] / "x.capture")) == len(records)


def test_the_temporary_file_is_new_never_a_link_planted_at_its_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary file is made ``O_EXCL | O_NOFOLLOW`` in a private folder made by an
    exclusive ``mkdir`` (T84a): a link planted at the name that folder would take (a name
    guessed) is passed over, and what it names is left as it was."""
    import forensics.atomic as atomic

    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".a.txt.guessed.tmp").symlink_to(victim)
    names = iter(["guessed", "free", "file"])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda _n: next(names))
    atomic.write_text_atomically(tmp_path / "out" / "a.txt", "new")
    assert list(victim.iterdir()) == []
    assert (tmp_path / "out" / "a.txt").read_text() == "new"


# ---------------------------------- T56b: a report's diff names are its notebook's alone


def test_a_reports_diff_names_never_enter_the_registry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report of a diff variant registered the diff's shared name in the process's
    registry while its notebook ran (another thread's lookup found it, a name of another's
    report could replace it) and unregistered it after. The notebook is given the names
    (:func:`forensics.variants.diffs_named`): the registry is the same during and after,
    and another thread does not know the name."""
    import forensics.present.notebook_process as notebook_process
    from forensics.present.report import write_report

    before = registry.names()
    during: list[object] = []
    real = notebook_process.execute_in_child
    shown = shared_name(DIFF)

    def looked_up() -> None:
        during.append(registry.names())
        try:
            registry.create(shown)
        except (UnknownVariantError, CaptureFormatError):  # no such variant, no such diff
            during.append("unknown")

    def execute(*args: object, **kwargs: object) -> object:
        other = threading.Thread(target=looked_up)
        other.start()
        other.join()
        looked_up()  # this thread too: the parent knows nothing; the notebook's child does
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(notebook_process, "execute_in_child", execute)
    page = write_report(INCIDENT, tmp_path / "r.html",
                        variants=["upstream", f"vllm+{DIFF}"]).read_text()
    assert shown in page  # the notebook replayed the diff by its shared name
    assert during == [before, "unknown", before, "unknown"]
    assert registry.names() == before
    assert not hasattr(registry, "unregister")


def test_diff_names_are_known_in_their_context_only() -> None:
    """Inside :func:`diffs_named`, this thread builds the diff by its shared name, so named;
    another thread at the same moment, and this one after, do not know it."""
    shown, diffs = shared_diffs(["upstream", f"vllm+{DIFF}"])
    assert shown == ["upstream", shared_name(DIFF)]
    others: list[object] = []

    def other() -> None:
        others.append(registry.find(shown[1]))
        try:
            registry.create(shown[1])
        except (UnknownVariantError, CaptureFormatError):
            others.append("unknown")

    with diffs_named(diffs):
        variant = registry.create(shown[1])
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert variant.name == shown[1] and Path(variant.path) == DIFF  # type: ignore[attr-defined]
    assert others == [None, "unknown"]
    with pytest.raises(CaptureFormatError, match="does not exist"):
        registry.create(shown[1])


# ------------------------------------------- T56c: summary's Markdown names a diff so


def test_summary_markdown_names_a_diff_by_its_file_name_and_its_commands_by_its_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``summary --format markdown`` (the default, to paste into a bug thread) named a diff
    variant by its path everywhere (``vllm+/home/alice/...``): it names it as the report
    does (file name and digest); the reproduce commands keep the path, which runs, as one
    shell word."""
    folder = tmp_path / "home of alice's secret"
    folder.mkdir()
    diff = folder / "vocab-guard.diff"
    shutil.copy(DIFF, diff)
    variant = f"vllm+{diff}"
    assert main(["summary", str(INCIDENT), "--variant", "upstream", "--variant", variant]) == 0
    out = capsys.readouterr().out
    head, commands = out.split("### Reproduce", 1)
    assert "alice" not in head and str(tmp_path) not in head
    table = next(line for line in head.splitlines() if line.startswith("| site |"))
    assert table == f"| site | upstream | {shared_name(diff)} |"
    assert f"- **{shared_name(diff)}**:" in head
    assert f"--variant {shell_word(variant)}" in commands
    assert shell_word(variant) != variant  # the space and the quote are escaped
    assert registry.find(shared_name(diff)) is None


def test_summary_text_and_json_keep_the_path(capsys: pytest.CaptureFixture[str]) -> None:
    """The text write-up (CI logs) and JSON name the variant as it was given, as every
    terminal output does."""
    variant = f"vllm+{DIFF}"
    assert main(["summary", str(INCIDENT), "--variant", variant, "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert variant in text and shared_name(DIFF) not in text
    assert main(["summary", str(INCIDENT), "--variant", variant, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["verdicts"]) == [variant]
    assert all(shell_word(variant) in command for command in data["reproduce"])


# ------------------------------------------ T56d: a failed write names the real path


def test_a_failed_capture_write_names_the_real_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The capture is built through its open folder (``/proc/self/fd/N``); a failure names
    the file by the path the user knows, never by that name of the open folder."""
    import forensics.store.writer as writer
    from forensics.store.reader import load

    def full(tmp: Path, out: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))

    monkeypatch.setattr(writer, "install", full)
    out = tmp_path / "x.capture"
    with pytest.raises(OutputError) as caught:
        writer.write_capture(out, list(load(DATA / "stale-prev-row.capture"))[:2])
    message = str(caught.value)
    assert "/proc/" not in message, message
    assert f"cannot write capture '{out}'" in message
    assert f"(at '{tmp_path / '.x.capture.tmp-'}{os.getpid()}')" in message, message
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_capture_writer_names_its_folder_by_its_real_path(tmp_path: Path) -> None:
    """The writer of a new capture writes through the open folder and names the build by
    its real path in its messages (the simulator's ``writing N steps of ... failed``)."""
    from forensics.store.writer import new_capture

    with new_capture(tmp_path / "y.capture") as writer:
        assert writer.path.parent != tmp_path  # through the open folder, not by path
        assert writer.shown == tmp_path / f".y.capture.tmp-{os.getpid()}"
        assert writer.path.samefile(writer.shown)
