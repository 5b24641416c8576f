"""A capture's ``expected.json`` file: check a replay against it, explain, regenerate.

The workflow of ``forensics check`` and the pytest plugin over a capture's file: read it,
choose the variants to replay (nothing in a capture chooses code to run), replay, compare,
write the obtained result beside it or over it. What the file holds is
:mod:`forensics.share.evidence`'s: the :class:`~forensics.share.evidence.Evidence` type, its
serialisation (:meth:`~forensics.share.evidence.Evidence.to_json`, read back by
:meth:`~forensics.share.evidence.Evidence.from_json` once
:func:`~forensics.share.evidence.check_json` has checked its shape) and
:func:`~forensics.share.evidence.differences`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from forensics.atomic import user_path
from forensics.errors import CaptureFormatError, UnknownVariantError
from forensics.escaping import shell_path, shell_word, terminal
from forensics.share.evidence import (
    EXPECTED_KEYS,
    Evidence,
    accept_options,
    check_json,
    differences,
    evidence_of,
    shortened,
)
from forensics.store.paths import EXPECTED
from forensics.variants import DEFAULT_VARIANTS, resolve_variant

EXPECTED_NAME = EXPECTED
OBTAINED_NAME = "expected.obtained.json"


@dataclass
class CheckResult:
    """Outcome of checking one capture: ``differences`` is empty when it matches."""

    capture: Path
    differences: list[str] = field(default_factory=list)
    obtained: dict[str, Any] = field(default_factory=dict)
    obtained_path: Path | None = None
    #: what could not be written or removed at ``expected.obtained.json`` (a folder there, a
    #: folder this user may not write), in one line naming it; the verdict stands
    note: str = ""
    #: the variants checked: the accept command we suggest replays each of them again
    variants: list[str] = field(default_factory=lambda: list(DEFAULT_VARIANTS))
    #: of ``variants``, those replayed (the ones ``expected.json`` holds verdicts of); None:
    #: every one of them
    replayed: list[str] | None = None
    #: site -> records of the capture's sites this install does not know (a plugin not
    #: installed here): no variant judged them, so the check cannot vouch for them
    not_known: dict[str, int] = field(default_factory=dict)
    #: recorded kernel launches the capture holds: no replay judges them (``forensics
    #: kernels`` does), so neither does the check; its match says so
    launches: int = 0
    #: the variants ``expected.json`` holds verdicts of that this check did not replay (the
    #: pytest plugin's default models, a ``--variant`` naming fewer): its match is not theirs
    unchecked: list[str] = field(default_factory=list)
    #: whether the file's crash verdict ("explained") was left unchecked: the variants of the
    #: engine's code that explain it were not all replayed, and those that were do not
    crash_unchecked: bool = False
    #: the file's crash verdict where this replay gives none to compare it with (no variant of
    #: the engine's code replayed, or values out of range only where it cannot see): "" else
    crash_unjudged: str = ""
    #: what the capture held that no replay read (the ends of files cut short, records its
    #: probe never wrote, events it left out; :func:`~forensics.store.unjudged.unjudged_text`
    #: of all but :attr:`not_known`): "" when none
    unread: str = ""

    @property
    def ok(self) -> bool:
        """Whether the replay matches the file and judged every record (a record of a site
        this install does not know was judged by nothing: no match can be claimed for it)."""
        return not self.differences and not self.not_known

    @property
    def ran(self) -> list[str]:
        """The variants this check replayed (a variant named and not in ``expected.json`` is
        not: "replayed: vllm" was said of none)."""
        return self.variants if self.replayed is None else self.replayed

    def not_known_line(self) -> str:
        """The line naming the records no variant judged, with its fix; or ``""``."""
        if not self.not_known:
            return ""
        from forensics.store.unjudged import not_known_text

        return (f"not judged: {not_known_text(self.not_known)}: install the plugin that "
                "declares each and check again")

    def launches_line(self) -> str:
        """That the capture's recorded kernel launches were not checked, and what judges them;
        or ``""`` when it holds none."""
        if not self.launches:
            return ""
        return (f"not checked: its {self.launches} recorded kernel launch(es) (expected.json "
                f"holds the records' replay only): `forensics kernels "
                f"{shell_path(self.capture)}` judges them")

    def unread_line(self) -> str:
        """That what no replay read was not checked; or ``""``."""
        if not self.unread:
            return ""
        return (f"not checked: {self.unread}; no variant judged what they held, so neither "
                f"{EXPECTED_NAME} nor this check covers it")

    def unchecked_line(self) -> str:
        """That the verdicts of :attr:`unchecked` variants in ``expected.json`` were not
        checked, and how to check them; or ``""``."""
        if not self.unchecked:
            return ""
        names = ", ".join(shortened(name) for name in self.unchecked)
        every = "".join(f" --variant {shell_word(name)}" for name in self.variants + self.unchecked)
        added = "".join(f" --forensics-variant {shell_word(name)}" for name in self.unchecked
                        if name not in DEFAULT_VARIANTS)  # the plugin replays those always
        crash = (", and its crash verdict 'explained', which may rest on them"
                 if self.crash_unchecked else "")
        replayed = ", ".join(shortened(name) for name in self.ran) or "none"
        return (f"not checked: the verdicts of variant(s) {names} in {EXPECTED_NAME}{crash} "
                f"(replayed: {replayed}); to check them: forensics check "
                f"{shell_path(self.capture)}{every}"
                + (f" (in a test suite: add{added})" if added else ""))

    def crash_line(self) -> str:
        """That the file's crash verdict was not checked, this replay judging none; or ``""``."""
        if not self.crash_unjudged:
            return ""
        from forensics.known.evidence import ENGINE_CODE

        why = ("the values out of range the models find lie where its variants of the engine's "
               "code cannot see" if ENGINE_CODE & set(self.ran) else
               "it replayed no variant of the engine's code, upstream or vllm")
        return (f"not checked: its crash verdict {shortened(self.crash_unjudged)!r}, which this "
                f"replay does not judge ({why})")

    def matched(self) -> str:
        """The line of a match: what it covers, and the variants and launches it does not."""
        line = f"{terminal(self.capture.name)}: matches {EXPECTED_NAME}"
        if self.unread:
            line += " in the records read"
        elif self.launches:
            line += " in its records"
        if self.unchecked:
            line += f" for {', '.join(shortened(name) for name in self.variants)} only"
        return "; ".join([line] + [text for text in (self.unchecked_line(), self.crash_line(),
                                                     self.launches_line(), self.unread_line())
                                   if text])

    def explain(self) -> str:
        """A readable report of the differences, of the records no variant judged, and the
        command that accepts the new result (when it differs)."""
        name = terminal(self.capture.name)
        lines = [f"{name}: replay differs from {EXPECTED_NAME}:" if self.differences else
                 f"{name}: matches {EXPECTED_NAME} in the records judged only:"]
        lines += [f"  - {d}" for d in self.differences]
        if self.not_known:
            lines.append(f"  {self.not_known_line()}")
        if self.launches:
            lines.append(f"  {self.launches_line()}")
        if self.unread:
            lines.append(f"  {self.unread_line()}")
        if self.unchecked:
            lines.append(f"  {self.unchecked_line()}")
        if self.crash_unjudged:
            lines.append(f"  {self.crash_line()}")
        if self.obtained_path is not None:
            lines.append(f"  obtained result written to {terminal(self.obtained_path)}")
        if self.note:
            lines.append(f"  {self.note}")
        if not self.differences:
            return "\n".join(lines)
        check, suite = accept_options(self.variants + self.unchecked)  # drops none of them
        lines.append(f"  to accept it: forensics check {shell_path(self.capture)} --accept"
                     f"{check}  (in a test suite: pytest --forensics-captures "
                     f"{shell_path(self.capture.parent)} --forensics-regen{suite})")
        return "\n".join(lines)


def read_expected(capture: Path) -> dict[str, Any]:
    """Parse and check ``capture/expected.json`` (through the guarded reader, like the
    capture's other files).

    Raises:
        CaptureFormatError: the file is missing, malformed, or of the wrong shape, naming it,
            the field and the fix; UnsafeInputError: not a regular file inside the capture.
    """
    from forensics.store.manifest import read_expected as read_file
    from forensics.store.paths import capture_dir

    capture = capture_dir(capture)  # a FIFO, a file, a link loop: not "no expected results"
    path = capture / EXPECTED_NAME
    data = read_file(capture)
    if data is None:
        raise CaptureFormatError(f"{terminal(path)}: no expected results; create them with "
                                 f"`forensics check {shell_path(capture)} --accept`")
    check_json(data, path)
    return data


def choose_variants(expected: dict[str, Any], path: Path, variants: Sequence[str] | None,
                    trust_expected: bool = False) -> list[str]:
    """The variants to replay: those the user named, else those of ``expected`` that are the
    built-in models (:data:`DEFAULT_VARIANTS`), or with ``trust_expected`` any registered
    variant it names (the real vLLM code, a plugin). Nothing in a capture chooses code to run
    on its own say-so.

    Raises:
        UnknownVariantError: ``expected`` names a variant outside those (a ``vllm+PATH.diff``
            shipped with the capture, or ``vllm`` without ``trust_expected``) and the user did
            not name it.
    """
    if variants:
        return list(variants)
    from forensics.variants import registry

    allowed = set(registry.names()) if trust_expected else set(DEFAULT_VARIANTS)
    foreign = [v for v in expected["verdicts"] if v not in allowed]
    if foreign:
        built_in = "is not built in" if foreign[0] not in registry.names() else "runs real code"
        raise UnknownVariantError(
            f"{terminal(path)}: field 'verdicts' names variant '{shortened(foreign[0])}', which "
            f"{built_in} (a capture alone runs only {list(DEFAULT_VARIANTS)}); a capture never "
            "chooses code to run: pass --variant NAME for each variant to check, or "
            "--trust-expected for the registered ones (only if you trust the capture)")
    return list(expected["verdicts"] or DEFAULT_VARIANTS)


class Obtained(NamedTuple):
    """What a replay of a capture gives a check: its expected object, site -> records of its
    sites this install does not know (judged by no variant), its recorded kernel launches
    (judged by no replay) and what no replay read (:attr:`CheckResult.unread`)."""

    evidence: dict[str, Any]
    not_known: dict[str, int]
    launches: int
    unread: str


def obtain(capture: Path, variants: Sequence[str]) -> Obtained:
    """Replay ``capture`` through ``variants``, in the order ``expected.json`` keeps them
    (sorted: the file cannot hold the order they were named in, and the first is the baseline
    when ``upstream`` is not among them, which decides a summary-only site's verdicts): what a
    check compares and says (:class:`Obtained`)."""
    from forensics.present.conclusion import kernel_launches
    from forensics.replaying import replay
    from forensics.store.unjudged import KINDS, NOT_KNOWN, unjudged_of, unjudged_text

    result = replay(capture, variants=sorted(dict.fromkeys(variants)))
    not_known = dict(getattr(result.capture, "unknown_sites", None) or {})
    evidence = evidence_of(result, EXPECTED_KEYS, crash=True).to_json()
    return Obtained(evidence, not_known, kernel_launches(result.capture),
                    unjudged_text(unjudged_of(result.capture), set(KINDS) - {NOT_KNOWN}))


def check(capture: Path | str, variants: Sequence[str] | None = None,
          write_obtained: bool = True, trust_expected: bool = False,
          folder: tuple[int, int] | None = None) -> CheckResult:
    """Replay ``capture`` and compare with its ``expected.json``.

    ``variants`` defaults to the built-in models the expected file names (any registered
    variant it names with ``trust_expected``; see :func:`choose_variants`). On a mismatch the
    obtained object is written to ``expected.obtained.json`` beside it (and on a match a stale
    one removed; what cannot be is said in ``note``, the verdict standing); with
    ``write_obtained=False`` nothing is written or removed. Records of sites this install does
    not know are judged by no variant: ``not_known`` counts them, and the result is not ok.
    ``folder``: the capture folder's device and inode as checked before (the pytest plugin's):
    nothing is written or removed in another found at its name after the replay.
    Raises:
        CaptureFormatError: no or malformed expected.json; any error of load or replay; a
            ``vllm+PATH.diff`` variant whose diff is missing, replayed or not.
        UnknownVariantError: see :func:`choose_variants`; a variant no name registers.
    """
    capture = user_path(capture)
    expected = read_expected(capture)
    chosen = choose_variants(expected, capture / EXPECTED_NAME, variants, trust_expected)
    known = [v for v in chosen if v in expected["verdicts"]]
    for name in chosen:
        if name not in known:  # not replayed, but a name no variant has is still refused
            resolve_variant(name)
    obtained, not_known, launches, unread = (
        obtain(capture, known) if known
        else Obtained({"verdicts": {}, "first_finding": {}}, {}, 0, ""))
    unchecked = [v for v in expected["verdicts"] if v not in chosen]
    left = _crash_left(expected, obtained, unchecked)
    changed = differences(Evidence.from_json(expected), Evidence.from_json(
        {**obtained, "crash_verdict": None} if left else obtained), chosen)
    result = CheckResult(capture, changed, obtained, variants=list(chosen), replayed=known,
                         not_known=not_known,
                         launches=launches, unread=unread, unchecked=unchecked,
                         crash_unchecked=left,
                         crash_unjudged=str(expected.get("crash_verdict") or "") if known
                         and obtained.get("crash_verdict") is None else "")
    if write_obtained:
        _leave_obtained(result, folder)
    return result


def _crash_left(expected: dict[str, Any], obtained: dict[str, Any],
                unchecked: Sequence[str]) -> bool:
    """Whether the file's crash verdict cannot be checked by this replay: it says
    "explained", the replay's variants of the engine's code explain nothing, and a variant of
    that code whose findings may explain it was not replayed (an unexplained crash of fewer
    variants contradicts no explained crash of more)."""
    from forensics.known.answer import EXPLAINED, UNEXPLAINED
    from forensics.known.evidence import ENGINE_CODE

    return (expected.get("crash_verdict") == EXPLAINED
            and obtained.get("crash_verdict") == UNEXPLAINED
            and bool(ENGINE_CODE & set(unchecked)))


def _leave_obtained(result: CheckResult, folder: tuple[int, int] | None = None) -> None:
    """Write the obtained result to ``expected.obtained.json`` when it differs, else remove a
    stale one (a link or FIFO there is replaced or removed, never followed or opened). What
    cannot be written or removed (a folder the capture holds under that name, a folder this
    user may not write) becomes ``result.note``: the replay's verdict is stated all the same."""
    from forensics.errors import OutputError

    path = result.capture / OBTAINED_NAME
    if result.differences:
        try:
            result.obtained_path = write_json(path, result.obtained, folder)
        except OutputError as exc:
            result.note = (f"obtained result not written: {exc} (`forensics check --json` "
                           "prints it)")
        return
    result.note = _remove_stale(path, folder)


def _remove_stale(path: Path, folder: tuple[int, int] | None = None) -> str:
    """Remove ``path``, a stale ``expected.obtained.json`` (a link or FIFO is removed, never
    followed) from its folder (the one of device and inode ``folder``, where given); ``""``,
    or the line saying why it is left (a folder there)."""
    from forensics.atomic import remove_in
    from forensics.errors import OutputError

    try:
        if folder is None:
            path.unlink(missing_ok=True)
        else:
            remove_in(path, folder)
    except OutputError as exc:
        return str(exc)
    except OSError as exc:
        return (f"'{terminal(path)}' is left as it was ({exc.strerror or exc}): it is no result "
                "of this replay; remove it")
    return ""


def regenerate(capture: Path | str, variants: Sequence[str] = DEFAULT_VARIANTS,
               folder: tuple[int, int] | None = None) -> Path:
    """Replay ``capture`` through ``variants`` and write the result as its ``expected.json``
    (a warning names the records of sites this install does not know: no verdict of theirs
    is in it); ``folder``: as :func:`check` takes it.

    Raises:
        OutputError: it cannot be written (or ``folder`` is no longer at its name)."""
    capture = user_path(capture)
    obtained, not_known, launches, unread = obtain(capture, variants)
    dropped = _held_besides(capture, variants)
    path = write_json(capture / EXPECTED_NAME, obtained, folder)
    if dropped:  # a baseline's expectations are never lost without a word
        names = ", ".join(shortened(name) for name in dropped)
        check, suite = accept_options([*variants, *dropped])
        warnings.warn(f"{terminal(path)}: the verdicts of variant(s) {names} it held are dropped "
                      f"(not replayed: {', '.join(shortened(v) for v in variants)}); to keep "
                      f"them: forensics check {shell_path(capture)} --accept{check} (in a test "
                      f"suite: --forensics-regen{suite})", stacklevel=2)
    note = _remove_stale(capture / OBTAINED_NAME, folder)
    if note:
        warnings.warn(note, stacklevel=2)
    if not_known:  # the baseline holds no verdict of them
        warnings.warn(f"{terminal(path)}: " + CheckResult(capture, not_known=not_known)
                      .not_known_line(), stacklevel=2)
    if launches:  # nor of them
        warnings.warn(f"{terminal(path)}: " + CheckResult(capture, launches=launches)
                      .launches_line(), stacklevel=2)
    if unread:  # nor of what was not read
        warnings.warn(f"{terminal(path)}: " + CheckResult(capture, unread=unread)
                      .unread_line(), stacklevel=2)
    return path


def _held_besides(capture: Path, variants: Sequence[str]) -> list[str]:
    """The variants whose verdicts the capture's ``expected.json`` holds besides ``variants``
    (none when it has none, or none readable: it is rewritten all the same)."""
    from forensics.errors import ForensicsError

    try:
        held = read_expected(capture)["verdicts"]
    except ForensicsError:
        return []
    return [name for name in held if name not in variants]


def write_json(path: Path, data: dict[str, Any], folder: tuple[int, int] | None = None
               ) -> Path:
    """Write ``data`` as indented JSON atomically (:func:`forensics.atomic.write_atomically`:
    a new private file, never a link that a capture may hold, then a rename over ``path``);
    return ``path``.

    Raises OutputError when it cannot be written (or its folder is not ``folder``:
    :func:`forensics.atomic.same_folder`).
    """
    from forensics.atomic import write_text_atomically

    return write_text_atomically(path, json.dumps(data, indent=2, sort_keys=True) + "\n",
                                 folder=folder)
