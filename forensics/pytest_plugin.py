"""pytest plugin: every ``*.capture`` under ``--forensics-captures DIR`` becomes a test item.

Options and fixtures only; the comparison lives in :mod:`forensics.share.expectations`. What
the plugin gives pytest to show (an item's id and name, a failure, a written file) holds a
capture's folder name and its ``expected.json``'s text: it goes through
:mod:`forensics.escaping` (``terminal``) first.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forensics.escaping import terminal, terminal_lines

MARKER = "forensics_capture"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("forensics", "vllm-forensics captures as regression tests")
    group.addoption("--forensics-captures", action="append", default=[], metavar="DIR",
                    help="collect every *.capture under DIR as a test item")
    group.addoption("--forensics-regen", action="store_true", default=False,
                    help="rewrite each capture's expected.json from its replay")
    group.addoption("--forensics-variant", action="append", default=[], metavar="NAME",
                    help="replay through this variant too (vllm, vllm+PATH.diff)")
    parser.addini("forensics_captures", type="paths", default=[],
                  help="directories whose *.capture are collected as test items")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: a replayed vllm-forensics capture")


def _capture_dirs(config: pytest.Config) -> list[Path]:
    """The captures of every root (the option's, then the ini's), each once (see
    :func:`_collected`)."""
    return _collected(config)[0]


def _collected(config: pytest.Config, unlisted: list[tuple[Path, OSError]] | None = None
               ) -> tuple[list[Path], list[tuple[str, str]]]:
    """The captures of every root (the option's, then the ini's), each once: a folder named
    twice (by the option and the ini, or a capture inside a folder also named) once made two
    items of one id, the capture replayed twice and counted twice. Then each root that names no
    capture, with the line saying so. The folders that could not be listed beside captures
    found are added to ``unlisted``, with why."""
    from forensics.atomic import unnamed_path
    from forensics.errors import ConfigurationError
    from forensics.fleet.paths import folder_id

    given = [*config.getoption("forensics_captures"), *config.getini("forensics_captures")]
    found: dict[object, Path] = {}
    empty: list[tuple[str, str]] = []
    for text in map(os.fspath, given):
        root = Path(text)
        try:
            unnamed = unnamed_path(text)  # "" (an unset "$DIR") is no working directory
            if unnamed is not None:
                raise ConfigurationError(f"--forensics-captures (or the forensics_captures "
                                         f"ini option): {unnamed}")
            captures = [root] if root.name.endswith(".capture") else captures_under(
                root, unlisted)
        except ConfigurationError as exc:  # one item however often the root is named
            if all(not _same_root(text, r) for r, _ in empty):
                empty.append((text, str(exc)))
            continue
        for capture in captures:
            found.setdefault(folder_id(capture), capture)
    return list(found.values()), empty


def _same_root(one: str, other: str) -> bool:
    """Whether two roots given name one folder (an empty one is none: not the ``.`` it reads
    as)."""
    return one == other if not (one and other) else os.path.abspath(one) == os.path.abspath(other)


def captures_under(root: Path, unlisted: list[tuple[Path, OSError]] | None = None
                   ) -> list[Path]:
    """The ``*.capture`` folders under ``root``, sorted, each once: found as triage finds them
    (:func:`forensics.fleet.paths.find_captures`: without recursion, so a folder nested
    thousands deep is no ``RecursionError``; links not entered; a capture reached twice listed
    once, by its direct name). Each folder that could not be listed beside the captures found
    is added to ``unlisted``, with why (:func:`~forensics.fleet.paths.unlisted_note`).

    Raises ConfigurationError when ``root`` holds none (a folder missing, renamed or emptied:
    its regression tests once dropped out unsaid, and the suite passed), or when a folder on
    its way cannot be listed (named, with why: it said the folder held none).
    """
    import glob

    from forensics.errors import ConfigurationError
    from forensics.fleet.paths import UnlistedError, find_captures

    try:
        found = find_captures([glob.escape(str(root))], unlisted)
    except UnlistedError as exc:  # a folder that cannot be listed: said, never "holds none"
        raise ConfigurationError(f"--forensics-captures (or the forensics_captures ini "
                                 f"option) {exc}") from None
    except ConfigurationError:
        found = []
    found = [path for path in found if path.name.endswith(".capture")]
    if not found:
        raise ConfigurationError(f"'{shown(root)}' (--forensics-captures, or the "
                                 "forensics_captures ini option) does not exist or holds no "
                                 "NAME.capture folder: give a folder of captures, or leave it "
                                 "out")
    return found


#: where the paths of the expected.json files this run wrote are kept (for the summary)
WRITTEN = pytest.StashKey[list[Path]]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Collect the captures as a collector of their own (reported, so counted and listed
    as pytest's own items are), before ``-m`` and ``-k`` select."""
    config.stash[WRITTEN] = []
    unlisted: list[tuple[Path, OSError]] = []
    captures, empty = _collected(config, unlisted)
    _warn_unread(captures, unlisted)
    if captures or empty:
        collector = CaptureCollector.from_parent(session, name="forensics-captures",
                                                 nodeid="forensics-captures",
                                                 captures=captures, empty=empty)
        items += [item for item in session.genitems(collector)]


def _warn_unread(captures: list[Path], unlisted: list[tuple[Path, OSError]]) -> None:
    """Warn, in ``triage``'s words, of the capture folders inside the collected captures' own
    folders, which are not collected, and of the ``unlisted`` folders, whose captures cannot
    be found (both dropped out unsaid)."""
    import warnings

    from forensics.fleet.paths import unlisted_note, unread_note

    for note in (unread_note(captures), unlisted_note(unlisted)):
        if note:
            warnings.warn(pytest.PytestWarning(note), stacklevel=1)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """List every expected.json file this run wrote."""
    written = config.stash.get(WRITTEN, [])
    if written:
        terminalreporter.section("forensics: expected.json written")
        for path in written:
            terminalreporter.write_line(f"wrote {terminal(path)}")


def shown_path(path: Path) -> str:
    """``path`` as the test id shows it: relative to the invocation directory when inside it,
    as inert text (:func:`shown`)."""
    try:
        return shown(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, RuntimeError, OSError):  # outside it; a link to itself; unreachable
        return shown(path)


def shown(text: object) -> str:
    """``text`` as inert text (:func:`forensics.escaping.terminal`, which tells two captures
    apart: a folder named with the four characters ``\\x1b`` never gets the id of one holding
    ESC; two items of one id: pytest listed a result, and ``--deselect`` took both, without
    saying which capture was meant)."""
    return terminal(str(text))


class CaptureCollector(pytest.Collector):
    """The captures of ``--forensics-captures`` and the ``forensics_captures`` ini option."""

    def __init__(self, *, captures: list[Path], empty: list[tuple[str, str]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.captures = captures
        self.empty = empty or []

    def collect(self) -> list[pytest.Item]:
        """One item per capture, its id the capture's path; then one failing item per root
        that names no capture."""
        items: list[pytest.Item] = [
            CaptureItem.from_parent(self, name=shown(path.name), nodeid=shown_path(path),
                                    capture=path) for path in self.captures]
        return items + [NoCaptureItem.from_parent(self, name=root_name(root),
                                                  nodeid=root_id(root), why=why)
                        for root, why in self.empty]


def root_name(text: str) -> str:
    """The item name of a root of captures given as ``text``: its last part, ``''`` of an
    empty root (which names no folder; it read as the working directory's ``.``)."""
    return shown(Path(text).name) if text else "''"


def root_id(text: str) -> str:
    """The item id of a root given as ``text`` (:func:`shown_path`); of an empty one,
    ``forensics-captures['']``, as given (its id read ``.``, the working directory)."""
    return shown_path(Path(text)) if text else "forensics-captures['']"


class NoCaptureItem(pytest.Item):
    """A root of captures that names none: it fails, saying so (never a suite that passes
    with its regression captures gone unsaid)."""

    def __init__(self, *, why: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.why = why
        self.add_marker(MARKER)

    def runtest(self) -> None:
        """Fail with the line naming the root."""
        raise CaptureMismatch(terminal_lines(self.why))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"captures {self.nodeid}"


class CaptureItem(pytest.Item):
    """One capture, replayed and compared with its expected.json."""

    def __init__(self, *, capture: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.capture = capture
        self.add_marker(MARKER)

    def _variants(self) -> list[str]:
        from forensics.variants import DEFAULT_VARIANTS

        extra = self.config.getoption("forensics_variant")
        return list(dict.fromkeys([*DEFAULT_VARIANTS, *extra]))

    def runtest(self) -> None:
        """Compare the replay with expected.json; with --forensics-regen, or when there is
        none yet, write it (a first run fails, as pytest-regressions does)."""
        from forensics.share import expectations

        regen = self.config.getoption("forensics_regen")
        missing = not (self.capture / expectations.EXPECTED_NAME).exists()
        folder = self._own_folder()  # nothing is written in another found there after
        if regen or missing:
            self._refuse_a_link()
            written = expectations.regenerate(self.capture, self._variants(), folder)
            self.config.stash.setdefault(WRITTEN, []).append(written)
            if missing and not regen:
                raise CaptureMismatch(
                    f"{shown_path(self.capture)}: no {expectations.EXPECTED_NAME} yet; wrote "
                    f"{terminal(written)} from this replay. Check it, commit it and rerun (or pass "
                    "--forensics-regen to write baselines without failing)")
            return
        result = expectations.check(self.capture, self._variants(),  # nothing through a link
                                    write_obtained=folder is not None, folder=folder)
        if not result.ok:
            raise CaptureMismatch(terminal_lines(result.explain()))
        said = [result.matched()] if result.launches or result.unchecked or result.unread else []
        if result.note:  # a stale obtained result left, or none written: as `check` says it
            said.append(terminal(result.note))
        if said:  # a pass says what it covers, and what it left
            import warnings

            warnings.warn(pytest.PytestWarning("; ".join(said)), stacklevel=1)

    def _own_folder(self) -> tuple[int, int] | None:
        """The capture folder's device and inode, None when its name is a link (or cannot be
        looked at): a link swapped in at its name while it is replayed once had
        ``expected.json`` written into the folder it points to."""
        try:
            info = os.lstat(self.capture)
        except OSError:
            return None
        return None if stat.S_ISLNK(info.st_mode) else (info.st_dev, info.st_ino)

    def _refuse_a_link(self) -> None:
        """Fail, writing nothing, when the capture's folder is a link: a link planted in the
        folder of captures (to another user's capture, anywhere) once had ``expected.json``
        written into the folder it points to."""
        if self.capture.is_symlink():
            from forensics.share import expectations

            try:  # where the link points, as written in it (a broken one's target too)
                target = shown(os.readlink(self.capture))
            except OSError:
                target = shown_path(self.capture)
            raise CaptureMismatch(
                f"{shown(self.capture)}: is a link (to {target}); "
                f"{expectations.EXPECTED_NAME} is not written through a link: give the "
                "capture's own folder to write it")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, CaptureMismatch):
            return str(excinfo.value)
        from forensics.errors import ForensicsError

        if isinstance(excinfo.value, ForensicsError):
            return terminal_lines(f"{shown(self.capture)}: {excinfo.value}")
        return terminal_lines(str(super().repr_failure(excinfo)))  # a message may quote it

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.capture, None, f"capture {shown_path(self.capture)}"


class CaptureMismatch(AssertionError):
    """A capture's replay no longer matches its expected.json."""


def iter_captures(config: pytest.Config) -> Iterator[Path]:
    """The capture directories this run collects (for conftest use)."""
    yield from _capture_dirs(config)
