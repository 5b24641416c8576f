"""The evidence of a capture: per variant, the verdict of every site and the first finding.

:class:`Evidence` is what ``expected.json`` holds (:meth:`Evidence.to_json` is its
serialisation, :meth:`Evidence.from_json` reads it back once :func:`check_json` has checked a
file's object) and what ``shrink`` and ``redact`` promise to keep; :func:`differences` names
what differs between two of them, for ``forensics check``, the pytest plugin and the share
commands alike. ``expected.json`` keeps the first finding's place and value
(:data:`EXPECTED_KEYS`); a shared capture keeps its bound, origin and resolution too
(:data:`FIRST_KEYS`). :func:`publish` writes a capture beside its final place, replays it from
disk, and renames it into place only when its evidence is the same. Checking a capture against
its file and regenerating it is :mod:`forensics.share.expectations`'s.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forensics.budget import remedy
from forensics.errors import CaptureFormatError, DeadlineError, ForensicsError
from forensics.escaping import shell_word, terminal
from forensics.records import Record
from forensics.variants import DEFAULT_VARIANTS

#: what ``expected.json`` keeps of a first finding: where it is and what it is
EXPECTED_KEYS = ("site", "step", "rank", "row", "element", "tensor", "kind", "value")
#: what a shared capture's first finding must keep: its place, bound, origin and resolution
FIRST_KEYS = (*EXPECTED_KEYS, "lower", "upper", "origin", "resolved")
#: the type a first finding's key has where the toolkit writes it (name -> type, its words): a
#: value of another type (the text "13", true) is a difference no replay can clear
FIRST_TYPES: dict[str, tuple[type, str]] = {
    **dict.fromkeys(("step", "rank", "row", "element", "value", "lower", "upper"),
                    (int, "an integer")),
    **dict.fromkeys(("site", "tensor", "kind", "origin"), (str, "a string")),
    "resolved": (bool, "true or false")}
#: the version of the ``expected.json`` object
EXPECTED_FORMAT = 1


class EvidenceChangedError(ForensicsError, RuntimeError):
    """A derived capture would not give the original's verdicts or first findings (exit 1)."""


@dataclass(frozen=True)
class Evidence:
    """Per variant: the verdict of each site, and the first finding (:data:`FIRST_KEYS`)."""

    verdicts: dict[str, dict[str, str]]
    first: dict[str, dict[str, Any] | None]
    #: the capture's crash verdict (``unexplained``, ``explained``, ``no crash``;
    #: :func:`forensics.known.crash_verdict_of`), None where not computed or not recorded
    crash_verdict: str | None = None

    @property
    def has_findings(self) -> bool:
        """Whether some variant has a finding at all."""
        return any(f is not None for f in self.first.values())

    @property
    def has_errors(self) -> bool:
        """Whether some variant's replay of a site raised (an ``error`` verdict): evidence
        too, with or without a finding."""
        from forensics.judge.findings import ERROR_VERDICT

        return any(v == ERROR_VERDICT for sites in self.verdicts.values() for v in sites.values())

    def to_json(self) -> dict[str, Any]:
        """The ``expected.json`` object: ``{"format": 1, "verdicts": {variant: {site:
        verdict}}, "first_finding": {variant: {...} | null}}``."""
        data = {"format": EXPECTED_FORMAT, "verdicts": self.verdicts,
                "first_finding": self.first}
        return data if self.crash_verdict is None else {**data,
                                                        "crash_verdict": self.crash_verdict}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evidence:
        """The evidence an ``expected.json`` object holds (read from a file, its shape checked
        first by :func:`check_json`)."""
        return cls({v: dict(s) for v, s in data.get("verdicts", {}).items()},
                   dict(data.get("first_finding", {})), data.get("crash_verdict"))


#: the most variants, sites per variant and characters per site name an ``expected.json``
#: holds (a real one names a few of each: a message lists every difference, one line each)
MAX_VARIANTS, MAX_SITES, MAX_NAME = 64, 256, 80


def check_json(data: dict[str, Any], path: Path) -> None:
    """Raise CaptureFormatError (naming ``path``, the field and the fix) unless ``data``, read
    from an ``expected.json`` file, is ``{"verdicts": {variant: {site: str}},
    "first_finding": {variant: {key: scalar} | null}}`` (other top-level keys are kept)."""
    fix = "regenerate it with forensics check --accept (in a test suite: --forensics-regen)"
    version = data.get("format", EXPECTED_FORMAT)  # a file older than the field has none
    if type(version) is not int or version != EXPECTED_FORMAT:
        shown = repr(version) if isinstance(version, (int, str)) else type(version).__name__
        raise CaptureFormatError(f"{terminal(path)}: field 'format' is {shortened(shown)}, but "
                                 f"this forensics reads format {EXPECTED_FORMAT} only; {fix} "
                                 "(or check it with the forensics that wrote it)")
    verdicts = data.get("verdicts")
    if not isinstance(verdicts, dict):
        raise CaptureFormatError(f"{terminal(path)}: field 'verdicts' missing; expected an object "
                                 f"{{variant: {{site: verdict}}}}; {fix}")
    if len(verdicts) > MAX_VARIANTS:
        raise CaptureFormatError(f"{terminal(path)}: field 'verdicts' holds {len(verdicts)} "
                                 f"variants, more than {MAX_VARIANTS}; {fix}")
    for variant, sites in verdicts.items():
        if not isinstance(sites, dict) or not all(
                isinstance(v, str) and len(v) <= 64 for v in sites.values()):
            raise CaptureFormatError(f"{terminal(path)}: field 'verdicts.{shortened(variant)}' "
                                     f"must map each site to a verdict string; {fix}")
        if len(sites) > MAX_SITES or any(len(site) > MAX_NAME for site in sites):
            raise CaptureFormatError(
                f"{terminal(path)}: field 'verdicts.{shortened(variant)}' must name at most "
                f"{MAX_SITES} sites, each of at most {MAX_NAME} characters; {fix}")
    firsts = data.get("first_finding", {})
    if not isinstance(firsts, dict):
        raise CaptureFormatError(f"{terminal(path)}: field 'first_finding' must be an object "
                                 f"{{variant: finding or null}}; {fix}")
    if len(firsts) > MAX_VARIANTS:
        raise CaptureFormatError(f"{terminal(path)}: field 'first_finding' holds {len(firsts)} "
                                 f"variants, more than {MAX_VARIANTS}; {fix}")
    for variant, finding in firsts.items():
        _check_first(path, variant, finding, fix)
    from forensics.known.answer import CRASH_VERDICTS

    crash = data.get("crash_verdict")
    if crash is not None and crash not in CRASH_VERDICTS:
        raise CaptureFormatError(f"{terminal(path)}: field 'crash_verdict' must be a verdict "
                                 f"string (unexplained, explained, no crash); {fix}")


def _check_first(path: Path, variant: str, finding: Any, fix: str) -> None:
    """Raise CaptureFormatError (naming ``path``, the field and the fix) unless ``finding``,
    the first finding of ``variant`` an ``expected.json`` file holds, is null or an object of
    plain values of a finding's keys (:data:`FIRST_KEYS`), each of its type."""
    if finding is not None and not (isinstance(finding, dict) and all(
            isinstance(v, (str, int, bool)) or v is None
            or (isinstance(v, float) and math.isfinite(v)) for v in finding.values())):
        raise CaptureFormatError(f"{terminal(path)}: field "
                                 f"'first_finding.{shortened(variant)}' must be null or an "
                                 f"object of plain values (strings, finite numbers, "
                                 f"booleans, null); {fix}")
    if finding is not None and not _finding_fits(finding):
        raise CaptureFormatError(
            f"{terminal(path)}: field 'first_finding.{shortened(variant)}' must hold at most "
            f"{len(FIRST_KEYS)} keys, each key and string value of at most {MAX_NAME} "
            f"characters; {fix}")
    foreign = [key for key in finding or {} if key not in FIRST_KEYS]
    if foreign:  # compared with a key no finding holds: {"note": null} matched any one
        raise CaptureFormatError(
            f"{terminal(path)}: field 'first_finding.{shortened(variant)}."
            f"{shortened(foreign[0])}' is no key of a finding, which is compared on "
            f"{', '.join(FIRST_KEYS)} only: remove it; {fix}")
    if finding == {}:  # it matched any finding, and differed from none as "none"
        raise CaptureFormatError(
            f"{terminal(path)}: field 'first_finding.{shortened(variant)}' is an empty "
            "object, which would match any finding: give the finding's keys (kind, site, "
            f"step, ...), or null for no finding; {fix}")
    for key, value in (finding or {}).items():
        kind = FIRST_TYPES.get(key)
        if kind is not None and value is not None and (
                type(value) is not kind[0]):  # a bool is no int, nor a text "13"
            raise CaptureFormatError(
                f"{terminal(path)}: field 'first_finding.{shortened(variant)}.{key}' must be "
                f"{kind[1]} or null, got {type(value).__name__} {value!r}; {fix}")


def _finding_fits(finding: dict[str, Any]) -> bool:
    """Whether a first finding read from a file is no larger than one the toolkit writes (its
    keys and values reach the differences a check prints)."""
    return len(finding) <= len(FIRST_KEYS) and all(
        len(key) <= MAX_NAME and not (isinstance(value, str) and len(value) > MAX_NAME)
        for key, value in finding.items())


def shortened(text: str) -> str:
    """A name read from a file, shortened and escaped (:func:`terminal`) for a one-line
    message."""
    return terminal(text if len(text) <= MAX_NAME else text[:MAX_NAME - 3] + "...")


def evidence_of(result: Any, keys: Sequence[str] = FIRST_KEYS, crash: bool = False) -> Evidence:
    """The :class:`Evidence` of a replay result (``forensics.replay(...)``), each first finding
    with ``keys`` (:data:`EXPECTED_KEYS` for ``expected.json``); ``crash``: with its crash
    verdict (:func:`forensics.known.crash_verdict_of`: the replay of a whole capture, whose
    events it reads)."""
    from forensics.judge.findings import first_finding

    verdict = None
    if crash:
        from forensics.known import crash_verdict_of

        verdict = crash_verdict_of(result)
    return Evidence({v: dict(s) for v, s in result.verdicts.items()},
                    {v: first_finding(result.findings, v, keys) for v in result.variants},
                    verdict)


def differences(expected: Evidence, got: Evidence,
                variants: Sequence[str] | None = None) -> list[str]:
    """Readable differences of ``got`` from ``expected`` over ``variants`` (default: those of
    ``expected``), empty when they agree, each one line (a site or a first finding's value
    read from ``expected.json`` through :func:`~forensics.escaping.terminal`). A first
    finding is compared on the keys ``expected`` holds for it; the command a line gives to
    regenerate the file accepts ``variants`` and every variant ``expected`` holds (it drops
    none of the file's expectations)."""
    out: list[str] = []
    for variant in expected.verdicts if variants is None else variants:
        want = expected.verdicts.get(variant)
        if want is None:
            check, suite = accept_options([*(variants or []), *expected.verdicts])
            out.append(f"variant {variant!r} is not in expected.json; regenerate it with "
                       f"forensics check --accept{check} (in a test suite: "
                       f"--forensics-regen{suite})")
            continue
        mine = got.verdicts.get(variant, {})
        out += [f"{variant}/{terminal(site)}: expected verdict "
                f"{_verdict(want, site, 'expected.json')}, "
                f"got {_verdict(mine, site, 'the replay')}"
                for site in sorted(set(want) | set(mine)) if want.get(site) != mine.get(site)]
        changed = _first_changed(expected.first.get(variant), got.first.get(variant))
        if changed:
            out.append(f"{variant}: first finding changed: {changed}")
    return out + _crash_verdict_changed(expected.crash_verdict, got.crash_verdict)


def accept_options(variants: Sequence[str]) -> tuple[str, str]:
    """The options that accept a replay through every one of ``variants`` (those a check
    replayed): `` --variant NAME`` for each (none when they are the default models, which
    ``--accept`` writes alone), and `` --forensics-variant NAME`` for each the pytest plugin
    does not replay always. A variant named alone once had ``--accept`` write it alone, dropping
    the expectations of the others."""
    names = list(dict.fromkeys(variants))
    default = sorted(names) == sorted(DEFAULT_VARIANTS)
    return ("" if default else "".join(f" --variant {shell_word(name)}" for name in names),
            "".join(f" --forensics-variant {shell_word(name)}" for name in names
                    if name not in DEFAULT_VARIANTS))


def _verdict(verdicts: dict[str, str], site: str, whose: str) -> str:
    """``site``'s verdict in ``verdicts`` (quoted), or that ``whose`` judged no such site (never
    a ``None`` nobody said), the site in ASCII escapes (two spellings of one name, NFC and NFD,
    print apart)."""
    return repr(verdicts[site]) if site in verdicts else f"none ({whose} judged no site " \
        f"{ascii(site)})"


def _crash_verdict_changed(want: str | None, got: str | None) -> list[str]:
    """The crash verdict's difference, compared only when ``want`` records one (older
    expected files do not) and ``got`` was computed (it is not when no variant of the
    expected file was replayed: there is no verdict to differ)."""
    if want is None or got is None or want == got:
        return []
    return [f"crash verdict: expected {want!r}, got {got!r}"
            + (" (a crash no captured value explains)" if got == "unexplained" else "")]


def _first_changed(want: dict[str, Any] | None, got: dict[str, Any] | None) -> str:
    """How ``got`` differs from ``want`` on ``want``'s keys ("" when it does not). A
    ``substituted`` finding's value is an in-range token id, which redaction maps to another
    by design: its kind and place are compared, not the id."""
    if want is None or got is None:
        return "" if want is got else f"expected {_short(want)}, got {_short(got)}"
    skip = {"value"} if want.get("kind") == got.get("kind") == "substituted" else set()
    keys = [k for k in want if k not in skip and want[k] != got.get(k)]
    if not keys:
        return ""
    return (f"expected {_short(want)}, got {_short(got)}; "
            + ", ".join(f"{k} {want[k]!r} -> {got.get(k)!r}" for k in keys))


def _short(finding: dict[str, Any] | None) -> str:
    """One line of a first finding: its kind, place and value (a key it does not hold, as an
    ``expected.json`` may not, is "unknown", never None), each value inert
    (:func:`~forensics.escaping.terminal`: a line break in one read from the file once began a
    line of its own in ``check``'s output, such as ``ALL CHECKS PASSED``)."""
    if not finding:
        return "none"
    return ("{kind} in {site} at step {step} rank {rank} row {row} element {element} "
            "({tensor}={value})").format(**{k: terminal(finding.get(k, "unknown"))
                                            for k in EXPECTED_KEYS})


def check_output(source: str | os.PathLike[str], out: str | os.PathLike[str],
                 force: bool) -> None:
    """Refuse an output that is the source (or inside it:
    :func:`forensics.atomic.refuse_inside_captures`), or that the store would not replace
    (:func:`forensics.store.writer.check_replaceable`), before any replay.

    Raises:
        ConfigurationError: the output is the source or inside it.
        OutputError: a link another user planted is on its way.
        OutputExistsError: naming the output and the fix.
    """
    from forensics.atomic import real_output, refuse_inside_captures

    refuse_inside_captures(out, [source])
    real_output(out)  # a link planted on its way is refused before the replay
    from forensics.store.writer import check_replaceable

    check_replaceable(Path(out), force)


def reference(capture: Any, out: str | os.PathLike[str], variants: Sequence[str] | None,
              force: bool, progress: bool,
              check: Callable[[Any], None] | None = None) -> tuple[Any, list[str], Any]:
    """Open ``capture`` (a Capture or a path), check ``out`` (:func:`check_output`) and the
    capture (``check``, when given: before the replay, which may take minutes), and replay
    the capture through ``variants`` (default ``upstream`` and ``patched``).

    Returns:
        (the Capture, the variant names, the ReplayResult).
    Raises:
        CaptureFormatError: not a readable capture. OutputExistsError: see :func:`check_output`.
    """
    from forensics.replaying import replay
    from forensics.store.reader import Capture, load

    cap = capture if isinstance(capture, Capture) else load(capture)
    check_output(cap.path, out, force)
    if check is not None:
        check(cap)
    names = list(variants or DEFAULT_VARIANTS)
    return cap, names, replay(cap, variants=names, progress=progress)


def publish(out: str | os.PathLike[str], records: Iterable[Record], manifest: dict[str, Any],
            events: Iterable[dict[str, Any]], expected: Evidence, variants: Sequence[str],
            force: bool = False, progress: bool = False,
            final: Callable[[], dict[str, Any]] | None = None) -> Path:
    """Write ``records`` as a capture at ``out``, replay it from disk through ``variants`` and
    rename it into place only when its evidence equals ``expected``.

    ``records`` come from a capture that was read (hence validated) and keep their fields'
    types, so they take the writer's trusted path; the replay from disk validates them again.
    ``events`` are taken after every record is written (a generator may depend on them);
    ``final``, when given, is the manifest once records and events are written (what was
    dropped from them), written in place of ``manifest`` before the replay.

    Returns:
        The path of the capture written.
    Raises:
        EvidenceChangedError: the written capture's evidence differs; nothing is left at ``out``
            (a capture already there stays as it was).
        DeadlineError: an overall deadline cut the written capture's replay (nothing is left).
        OutputExistsError: ``out`` exists and ``force`` is false, or it is not a capture.
    """
    from forensics.replaying import replay
    from forensics.store.manifest import build_manifest, write_manifest_once
    from forensics.store.reader import load
    from forensics.store.writer import FLUSH_EVERY, new_capture

    with new_capture(out, manifest, force) as writer:
        writer.extend(records, validated=True, flush_every=FLUSH_EVERY)
        for event in events:
            writer.add_event(event)
        writer.close()
        if final is not None:
            write_manifest_once(writer.path, build_manifest(final()), again=True)
        done = replay(load(writer.path), variants=list(variants), progress=progress)
        if done.cut:
            more = remedy(done.cut).replace("a longer --deadline", "shrink a longer --deadline")
            raise DeadlineError(f"refusing to write '{terminal(out)}': its replay did not finish "
                                f"({done.cut}), so it is not known to keep the original's "
                                f"evidence; {more}")
        got = evidence_of(done, crash=True)
        changed = differences(expected, got)
        if changed:
            raise EvidenceChangedError(f"refusing to write '{terminal(out)}': its replay differs "
                                       f"from the original's: {'; '.join(changed)}")
    return Path(out)
