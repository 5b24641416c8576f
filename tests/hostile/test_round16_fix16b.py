"""Round 16's second fixes (fix16b) of what round 15's attackers found and left (issue 38): a
temporary output file another user could swap for a link (T84a), an address Markdown
autolinks (T84b), a forged rank that left the real one's row clean (T84c), a truncation
between the stitch's check and its copy (T84d): the claims T84a-T84d of docs/threat-model.md."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from forensics.atomic import write_atomically, write_text_atomically
from forensics.errors import OutputError

#: another user: the one who swaps a file for a link in a folder all may write
STRANGER = 65534


# ----------------------- T84a: the temporary file is made where no other user can reach it


@pytest.fixture
def open_folder_of_all() -> Iterator[Path]:
    """A folder every user may write, without the sticky bit (``0777``), on a way every user
    may walk (``/tmp``): T52c's "the user's own path" of a group that writes it."""
    folder = Path(tempfile.mkdtemp(prefix="forensics-t84a-", dir="/tmp"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


#: what the other user runs: each file they may reach in the folder (in a subfolder only where
#: others may list and enter it, ``o+rx``) removed and made a link to the victim
SWAP = ('find "$1" \\( -type d ! -perm -o=rx -prune \\) -o -type f -print 2>/dev/null | '
        'while IFS= read -r f; do rm -f "$f" && ln -s "$2" "$f"; done')


def _another_user_swaps(folder: Path, victim: Path) -> None:
    """Another process swaps every file it may reach in ``folder`` for a link to ``victim``:
    as the user ``nobody`` where the test runs as root (the kernel then says what it may
    reach), else as this user, reaching only what the folders' "others" bits open."""
    def become_stranger() -> None:
        if os.geteuid() == 0:
            os.setgid(STRANGER)
            os.setuid(STRANGER)

    subprocess.run(["/bin/sh", "-c", SWAP, "sh", str(folder), str(victim)], check=True,
                   preexec_fn=become_stranger)


def _drawn(swap: Callable[[], None]) -> Callable[[Path], object]:
    """A writer (as matplotlib's ``savefig``): it draws (meanwhile ``swap()``), then opens the
    name it was given and writes the figure."""
    def write(tmp: Path) -> None:
        swap()
        with open(tmp, "wb") as f:
            f.write(b"\x89PNG figure")
    return write


def test_another_user_cannot_swap_the_temporary_file_for_a_link(
        open_folder_of_all: Path, tmp_path: Path) -> None:
    """The writer was handed the temporary file's name in the output's folder: in a folder
    other users may write without the sticky bit, one of them swapped it for a link to a file
    of the user's while the figure was drawn, and the figure was written into that file (and
    the link renamed into place). The file is made in a private folder (``0700``) made in the
    output's folder: no one else can reach its name; the victim is untouched, the figure is
    the output, and the private folder is gone."""
    victim = tmp_path / "victim"
    victim.write_text("mine")
    target = open_folder_of_all / "fig.png"
    write_atomically(target, _drawn(lambda: _another_user_swaps(open_folder_of_all, victim)),
                     shared=True)
    assert victim.read_bytes() == b"mine"
    assert not target.is_symlink() and target.read_bytes() == b"\x89PNG figure"
    assert os.listdir(open_folder_of_all) == ["fig.png"]


def _fails(tmp: Path) -> None:
    """A writer that leaves a file of its own beside the one it was given, then fails."""
    (tmp.parent / "partial.cache").write_text("x")
    tmp.write_text("half")
    raise RuntimeError("no figure")


def _interrupted(tmp: Path) -> None:
    """A writer interrupted (``Ctrl-C``) halfway."""
    tmp.write_text("half")
    raise KeyboardInterrupt


@pytest.mark.parametrize(("write", "error"), [(_fails, RuntimeError),
                                              (_interrupted, KeyboardInterrupt)])
def test_a_failed_write_leaves_nothing_behind(
        open_folder_of_all: Path, write: Callable[[Path], None], error: type) -> None:
    """A writer that fails (or is interrupted) leaves neither its file nor the private
    folder, nor what else it wrote there; an output already there is kept as it was."""
    target = open_folder_of_all / "fig.png"
    target.write_text("old")
    with pytest.raises(error):
        write_atomically(target, write)
    assert os.listdir(open_folder_of_all) == ["fig.png"] and target.read_text() == "old"


def test_the_private_folder_is_private_and_named_for_its_output(tmp_path: Path) -> None:
    """While the writer writes, its file lies in a folder ``.NAME.HEX.tmp`` of this user's,
    ``0700`` whatever the umask, beside the output; the file itself is no one else's to read
    (``0600``, less what the umask takes)."""
    seen: list[tuple[str, int, int]] = []

    def write(tmp: Path) -> None:
        (folder,) = [p for p in tmp_path.iterdir() if p.name.startswith(".out.txt.")]
        seen.append((folder.name, folder.stat().st_mode & 0o7777, os.stat(tmp).st_mode & 0o777))
        tmp.write_text("new")

    old = os.umask(0o777)
    try:
        write_atomically(tmp_path / "out.txt", write)
    finally:
        os.umask(old)
    ((name, folder_mode, file_mode),) = seen
    assert re.fullmatch(r"\.out\.txt\.[0-9a-f]{8}\.tmp", name) and folder_mode == 0o700
    assert file_mode & 0o077 == 0 and (tmp_path / "out.txt").read_text() == "new"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_a_folder_put_in_place_of_the_private_one_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user who renames the new private folder aside and puts a folder of theirs (or
    one open to all) at its name before it is opened: that folder is refused, in one line
    naming the output, and nothing is written into it."""
    import forensics.atomic as atomic

    real_mkdir = os.mkdir

    def made_then_swapped(name: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real_mkdir(name, mode, dir_fd=dir_fd)
        os.rename(name, "aside", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        real_mkdir(name, 0o777, dir_fd=dir_fd)
        os.chmod(name, 0o777, dir_fd=dir_fd)

    monkeypatch.setattr(atomic.os, "mkdir", made_then_swapped)
    with pytest.raises(OutputError, match="replaced by another user's") as caught:
        write_text_atomically(tmp_path / "out.txt", "new")
    assert str(tmp_path / "out.txt") in str(caught.value)
    assert not (tmp_path / "out.txt").exists()
    assert all(not list(p.iterdir()) for p in tmp_path.iterdir())


# ---------------------- T84b: no address, www., mailto: or xmpp: autolinked in Markdown

#: GFM's "Autolinks (extension)": what a GFM renderer links in text outside code by itself
#: (an extended www, url, email or protocol autolink; a valid domain: labels of letters,
#: digits, ``_`` and ``-``, at least one period)
_DOMAIN = r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+"
_EMAIL = rf"[A-Za-z0-9.+_-]+@{_DOMAIN}"
GFM_AUTOLINK = re.compile(rf"(?:^|(?<=[\s*_~(]))www\.{_DOMAIN}|https?://{_DOMAIN}"
                          rf"|(?:mailto:|xmpp:)?{_EMAIL}", re.IGNORECASE)

ADDRESSES = ("alice@example.com", "mailto:alice@example.com", "xmpp:alice@example.com/home",
             "a.b-c_d+tag@mail.example.co.uk", "www.evil.example", "see WWW.EVIL.EXAMPLE now")


def _autolinked(markdown_text: str) -> list[str]:
    """What a GFM renderer would link by itself in ``markdown_text``: rendered (mistune), code
    elements dropped, the text searched for GFM's extended autolinks."""
    import html

    import mistune

    rendered = str(mistune.create_markdown(escape=False, plugins=["table"])(markdown_text))
    text = html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<code>.*?</code>", " ", rendered,
                                                        flags=re.DOTALL)))
    return GFM_AUTOLINK.findall(text)


def _shown(markdown_text: str) -> str:
    """The text the rendering of ``markdown_text`` shows (tags dropped)."""
    import html

    import mistune

    rendered = str(mistune.create_markdown(escape=False, plugins=["table"])(markdown_text))
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()


@pytest.mark.parametrize("text", [*ADDRESSES, "write to alice@example.com.",
                                  "[x](y) *bob@example.org* (carol@example.org)",
                                  "a\\alice@example.com", "x|alice@example.com|y"])
def test_an_address_in_markdown_is_a_code_span_and_renders_as_the_text(text: str) -> None:
    """``markdown`` made a capture's bare URL a code span (T77e) but left an address
    (``alice@example.com``), ``mailto:``, ``xmpp:`` as they were: GitHub autolinks them. Each
    is a code span: linked nowhere, the rendered text the text."""
    from forensics.escaping import markdown

    for raw in (False, True):
        shown = markdown(text, raw=raw)
        assert _autolinked(shown) == [], shown
        assert _shown(shown) == text, shown
    cell = f"| a | b |\n|---|---|\n| {markdown(text, table=True, raw=True)} | x |\n"
    assert _autolinked(cell) == []


@pytest.mark.parametrize("text", ["fix.diff@bdea3073", "@user", "a@b", "user@localhost"])
def test_what_gfm_links_not_is_left_as_it_was(text: str) -> None:
    """A text that holds no address (no domain of two labels) stays text: ``fix.diff@bdea3073``
    is no code span (a mention ``@user`` is one, T71d)."""
    from forensics.escaping import markdown

    assert ("`" in markdown(text)) == (text == "@user")


def test_a_summary_of_a_capture_holding_addresses_links_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``summary`` (Markdown to paste into a bug thread) of a capture whose model name, notes,
    request ids and events hold addresses links none of them; the addresses are there."""
    from test_round2 import hostile_capture, run_cli

    path = hostile_capture(tmp_path / "m.capture", " ".join(ADDRESSES))
    code, out, _ = run_cli(capsys, "summary", path)
    assert code == 0 and "alice@example.com" in out
    assert _autolinked(out) == [], _autolinked(out)


def make_work(case: str, size: int, scratch: Path) -> Callable[[], object]:
    """``markdown`` of ``LINEAR[case](size)`` (run by :mod:`tests.instructions`)."""
    from forensics.escaping import markdown

    text = LINEAR[case](size)
    return lambda: markdown(text, raw=True)


#: texts an address pattern could retry at each character: a run of its characters with no
#: ``@``, ``@`` after ``@``, domains without a period
LINEAR: dict[str, Callable[[int], str]] = {
    "no at": lambda n: "a." * n, "ats": lambda n: "a@" * n, "no period": lambda n: "a@bc-" * n}


@pytest.mark.parametrize("case", list(LINEAR))
def test_markdown_stays_linear_in_address_like_text(case: str, tmp_path: Path) -> None:
    """4x such a text costs under 6x the instructions (callgrind; 4x the base is 4,000 of
    them, up to 20,000 characters: past them a value is cut, :data:`~forensics.escaping.LIMIT`)."""
    from tests.instructions import assert_linear, scaling

    assert_linear(scaling(__file__, dict.fromkeys(LINEAR, 1000), tmp_path)[case])
