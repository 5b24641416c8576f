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


# ------------------ T84c: a rank two captures claim is said not judged, on every row it touches


def _two_ranks(root: Path) -> list[Path]:
    """The two captures of one two-rank engine under ``root`` (rank 1 diverging at step 6)."""
    from forensics.fleet.generate import Fleet, _engine

    fleet = Fleet(root)
    root.mkdir(parents=True)
    _engine(fleet, "engine-x", 12, 4, 3, True)
    return sorted(Path(p) for p in fleet.kinds)


def test_a_forged_copy_of_a_rank_makes_no_row_clean(tmp_path: Path) -> None:
    """A forged capture (here a copy) claiming rank 1 of an engine whose rank 1 diverges from
    rank 0: neither rank 1 is stitched to the engine (two captures of one rank), and every row
    of the engine said ``clean``: the divergence went unseen, and no row said its ranks were
    not compared. Each says ``divergence not judged`` and names the rank and the other
    captures that claim it: the real rank 1 names the copy, the copy the real one, rank 0
    both."""
    from forensics.fleet.signature import what
    from forensics.fleet.triage import triage

    rank0, rank1 = _two_ranks(tmp_path / "fleet")
    forged = tmp_path / "fleet" / "forged.capture"
    shutil.copytree(rank1, forged)
    rows = {Path(r["capture"]).name: r for r in triage([tmp_path / "fleet"], workers=1).rows}
    assert {name: r["conclusion"] for name, r in rows.items()} == dict.fromkeys(
        [rank0.name, rank1.name, forged.name], "divergence not judged")
    assert f"its rank 1 is claimed by '{forged}' too" in rows[rank1.name]["contested"]
    assert f"its rank 1 is claimed by '{rank1}' too" in rows[forged.name]["contested"]
    assert f"rank 1 of engine 'engine-x' is claimed by '{rank1}' and '{forged}'" in \
        rows[rank0.name]["contested"]
    assert all(r["divergence"] is None for r in rows.values())
    assert what(rows[rank0.name]) == ("rank divergence not judged (another capture claims a "
                                      "rank of its engine)")


def test_the_triage_table_shows_the_rank_not_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text and Markdown tables and the JSON and CSV rows carry the sentence (the
    ``contested`` column); the engine's rows are one group, not ``clean``."""
    import csv
    import json

    from forensics.cli import main

    _, rank1 = _two_ranks(tmp_path / "fleet")
    shutil.copytree(rank1, tmp_path / "fleet" / "forged.capture")
    for fmt in ("text", "markdown", "json"):
        assert main(["triage", str(tmp_path / "fleet"), "--workers", "1", "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert "rank divergence not judged" in out, out
        if fmt != "json":
            assert out.count("rank divergence not judged: ") == 3, out
        else:
            assert [r["conclusion"] for r in json.loads(out)["rows"]] == [
                "divergence not judged"] * 3
    table = tmp_path / "t.csv"
    assert main(["triage", str(tmp_path / "fleet"), "--workers", "1", "-o", str(table)]) == 0
    rows = list(csv.DictReader(table.open()))
    assert all(r["contested"].startswith("rank divergence not judged: ") for r in rows)


def test_a_rank_claimed_once_is_compared_as_before(tmp_path: Path) -> None:
    """Without a forged rank the engine's ranks are compared (the divergence at step 6 on both
    rows) and no row is said contested."""
    from forensics.fleet.triage import triage

    rows = triage([tmp_path / "fleet"] if _two_ranks(tmp_path / "fleet") else [],
                  workers=1).rows
    assert [(r["conclusion"], r["contested"]) for r in rows] == [("rank divergence", None)] * 2


# ------------------ T84d: what the stitch and the plan compare is read, not mapped: no SIGBUS

CHANGED = "changed while the triage ran"

#: a triage of a two-rank engine in which rank 1's segment is cut to nothing in the moment
#: between a batch of it being found whole and its columns being read, in the triage's own
#: process: the stitch's read (or, ``split_records`` small, the plan's race window)
CUT_UNDER_THE_READ = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_round16_fix16b import _two_ranks
from forensics.store import segment
from forensics.fleet.triage import triage

rank0, rank1 = _two_ranks(Path({root!r}))
target = rank1 / "embedding.r1.w0.0000.arrows"
parent, cut, real = os.getpid(), [], getattr(segment.Segment, {hooked!r})

def hooked(self, *args, **kwargs):
    if {hooked!r} == "check_whole":  # the segment opened: its size checked, nothing read yet
        out = real(self, *args, **kwargs)
        if os.getpid() == parent and self.path == target and not cut and \
                not hasattr(self, "schema"):
            cut.append(1)
            os.truncate(target, 0)
        return out
    if os.getpid() == parent and self.path == target and not cut:
        cut.append(1)
        os.truncate(target, 0)
    return real(self, *args, **kwargs)

setattr(segment.Segment, {hooked!r}, hooked)
rows = triage([rank0, rank1], workers=1, split_records={split})
print(json.dumps({{"cut": bool(cut),
                  "rows": {{r["name"]: r["error"] for r in rows.rows}},
                  "records": {{r["name"]: r.get("records") for r in rows.rows}}}}))
"""


@pytest.mark.parametrize("where", ["stitch", "plan", "open"])
def test_a_segment_cut_between_the_check_and_the_read_is_its_error_row(
        tmp_path: Path, where: str) -> None:
    """Rank 1's segment truncated in the moment after the stitch found a batch of it whole
    (``check_whole``) and before it copied its columns out of the memory map (or, a capture
    cut in step ranges, before the plan read its race sites' steps; or as the plan opened
    the capture, its size checked and its schema not yet read): the page past the cut end
    raised SIGBUS and ended the triage, every row lost (exit -7; T31l, T80b's "what
    remains"). Both open the capture and read each batch into their own memory with ordinary
    reads: the triage ends, rank 1 its error row (naming the segment the stitch found cut;
    cut as the plan opened it, the plan makes it one task, which replays it as it is now: its
    12 embedding records gone), rank 0 its row."""
    import json
    import sys

    script = CUT_UNDER_THE_READ.format(tests=str(Path(__file__).parent),
                                       root=str(tmp_path / "fleet"),
                                       hooked="check_whole" if where == "open" else "_decode",
                                       split=500_000 if where == "stitch" else 2)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["cut"], said
    rows = said["rows"]
    assert not rows["engine-x-rank0.capture"], rows
    if where == "open":  # the plan could not open it: its piece read it as it is now, cut
        assert not rows["engine-x-rank1.capture"], rows
        assert said["records"] == {"engine-x-rank0.capture": 48, "engine-x-rank1.capture": 36}
        return
    assert rows["engine-x-rank1.capture"].startswith(
        f"'engine-x-rank1.capture' {CHANGED}: "), rows
    if where == "stitch":  # the plan's capture is then cut: its pieces count fewer records
        assert "'embedding.r1.w0.0000.arrows'" in rows["engine-x-rank1.capture"], rows


def test_a_batch_cut_while_it_is_read_is_one_line_naming_the_segment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment truncated as its batch is read (between the ``pread`` calls): a short read,
    one CaptureFormatError naming the segment, the batch and the bytes it held; the stitch
    makes it the capture's error row ("changed while the triage ran")."""
    from forensics.errors import CaptureFormatError
    from forensics.fleet.triage import triage
    from forensics.store import segment
    from forensics.store.reader import load

    rank0, rank1 = _two_ranks(tmp_path / "fleet")
    target = rank1 / "embedding.r1.w0.0000.arrows"
    (first,) = [int(seg._table["offset"][0]) for seg in load(rank1)._segments
                if seg.path == target]
    real = os.preadv
    cut: list[int] = []

    def preadv(fd: int, buffers: list[memoryview], offset: int) -> int:
        """Batch 0's read (not the 8 bytes of its head read as the segment is opened)."""
        if not cut and offset == first and len(buffers[0]) > 8 and \
                os.fstat(fd).st_ino == os.stat(target).st_ino:
            cut.append(offset)
            got = real(fd, [buffers[0][:16]], offset)  # a first part read, then the cut
            os.truncate(target, offset + got)
            return got
        return real(fd, buffers, offset)

    monkeypatch.setattr(segment.os, "preadv", preadv)
    capture = load(rank1)
    with pytest.raises(CaptureFormatError) as caught:
        list(capture.batches("embedding", private=True))
    message = str(caught.value)
    assert "'embedding.r1.w0.0000.arrows' of 'engine-x-rank1.capture' was truncated while it " \
           f"was read: batch 0 at byte {cut[0]} holds 16 of its" in message, message
    assert "\n" not in message
    rank0, rank1 = _two_ranks(tmp_path / "again")
    target = rank1 / "embedding.r1.w0.0000.arrows"  # the same layout: batch 0 at ``first``
    cut.clear()
    rows = {r["name"]: r for r in triage([rank0, rank1], workers=1).rows}
    assert cut and CHANGED in rows[rank1.name]["error"] and "truncated while it was read" in \
        rows[rank1.name]["error"], rows[rank1.name]["error"]
    assert not rows[rank0.name]["error"]


def test_a_segment_replaced_before_its_batch_is_read_is_refused(tmp_path: Path) -> None:
    """The file at the segment's path replaced (another file, same bytes) after the capture
    was opened: the batch is not read from it."""
    from forensics.errors import CaptureFormatError
    from forensics.store.reader import load

    _, rank1 = _two_ranks(tmp_path / "fleet")
    target = rank1 / "embedding.r1.w0.0000.arrows"
    capture = load(rank1)
    shutil.copy(target, tmp_path / "copy")
    os.replace(tmp_path / "copy", target)
    with pytest.raises(CaptureFormatError, match="was replaced or removed while it was read"):
        list(capture.batches("embedding", private=True))


@pytest.mark.parametrize("how", ["indexed", "scanned, its tail cut"])
def test_a_batch_read_is_the_batch_mapped(tmp_path: Path, how: str) -> None:
    """Read into memory (a batch, or the whole capture opened unmapped), each batch holds what
    the mapped one holds, column for column, and the capture the same records; so too for
    segments without their ``.idx`` (their batches found by scanning), one cut short."""
    from forensics.store.reader import load

    _, rank1 = _two_ranks(tmp_path / "fleet")
    if how != "indexed":
        for index in rank1.glob("*.idx"):
            index.unlink()
        cut = rank1 / "embedding.r1.w0.0000.arrows"
        os.truncate(cut, cut.stat().st_size - 100)
    capture, unmapped = load(rank1), load(rank1, mapped=False)
    mapped = [view.batch for view in capture.batches()]
    for read in ([v.batch for v in capture.batches(private=True)],
                 [v.batch for v in unmapped.batches()]):
        assert len(read) == len(mapped) > 0
        assert all(a.equals(b) for a, b in zip(read, mapped, strict=True))
    assert unmapped.truncated == capture.truncated == (
        [] if how == "indexed" else ["embedding.r1.w0.0000.arrows"])
    assert [(r.site, r.step, r.rank) for r in unmapped] == \
        [(r.site, r.step, r.rank) for r in capture]
    assert unmapped.summary() == capture.summary()


def test_a_batch_past_the_read_cap_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch read into memory takes at most ``MAX_READ_BYTES`` (1 GiB; here made 64 bytes):
    one past it is one line naming the segment, the batch and its size, before any is read
    (a forged index entry could claim a batch as large as the file)."""
    from forensics.errors import CaptureFormatError
    from forensics.store import segment
    from forensics.store.reader import load

    _, rank1 = _two_ranks(tmp_path / "fleet")
    capture = load(rank1)  # its schemas read (within the cap) before it is lowered
    monkeypatch.setattr(segment, "MAX_READ_BYTES", 64)
    with pytest.raises(CaptureFormatError, match=r"'embedding\.r1\.w0\.0000\.arrows' of "
                       r"'engine-x-rank1\.capture': batch 0 takes \d+ bytes, past the 64 one"):
        list(capture.batches("embedding", private=True))
