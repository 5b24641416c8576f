"""The evidence of a capture, and the check that a derived capture keeps it.

``shrink`` and ``redact`` write a new capture from an old one. Both promise the same
**evidence**: per variant, the verdict of every site, and the first finding with its bounds,
origin and resolution (:data:`FIRST_KEYS`). This module holds that promise once:
:func:`evidence_of` reads it from a :class:`~forensics.replaying.ReplayResult`,
:func:`differences` names what differs, and :func:`publish` writes a capture beside its final
place, replays it from disk, and renames it into place only when its evidence is the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forensics.errors import ForensicsError, OutputExistsError
from forensics.records import Record

#: what a first finding must keep: where it is, what it is, its bound, origin and resolution
FIRST_KEYS = ("site", "step", "rank", "row", "element", "tensor", "kind", "value", "lower",
              "upper", "origin", "resolved")


class EvidenceChangedError(ForensicsError, RuntimeError):
    """A derived capture would not give the original's verdicts or first findings (exit 1)."""


@dataclass(frozen=True)
class Evidence:
    """Per variant: the verdict of each site, and the first finding (:data:`FIRST_KEYS`)."""

    verdicts: dict[str, dict[str, str]]
    first: dict[str, dict[str, Any] | None]

    @property
    def has_findings(self) -> bool:
        """Whether some variant has a finding at all."""
        return any(f is not None for f in self.first.values())


def evidence_of(result: Any) -> Evidence:
    """The :class:`Evidence` of a replay result (``forensics.replay(...)``)."""
    return Evidence({v: dict(s) for v, s in result.verdicts.items()},
                    {v: first_finding(result, v) for v in result.variants})


def first_finding(result: Any, variant: str) -> dict[str, Any] | None:
    """The first finding of ``variant`` with the keys :data:`FIRST_KEYS`, or None."""
    from forensics.findings import first_finding as first_of

    return first_of(result.findings, variant, FIRST_KEYS)


def differences(expected: Evidence, got: Evidence) -> list[str]:
    """Human-readable differences of ``got`` from ``expected`` (empty when they agree)."""
    out = []
    for variant, sites in expected.verdicts.items():
        mine = got.verdicts.get(variant, {})
        for site in sorted(set(sites) | set(mine)):
            if sites.get(site) != mine.get(site):
                out.append(f"{variant} verdict of {site}: {sites.get(site)} -> "
                           f"{mine.get(site, 'absent')}")
        want, have = expected.first.get(variant), got.first.get(variant)
        if want != have:
            out.append(f"{variant} first finding: {_brief(want)} -> {_brief(have)}")
    return out


def _brief(finding: dict[str, Any] | None) -> str:
    if finding is None:
        return "none"
    return " ".join(f"{key}={finding[key]}" for key in FIRST_KEYS)


def check_output(source: str | os.PathLike[str], out: str | os.PathLike[str],
                 force: bool) -> None:
    """Refuse an output that is the source (or inside it), or that the store would not replace
    (:func:`forensics.store.writer.check_replaceable`), before any replay.

    Raises:
        OutputExistsError: naming the output and the fix.
    """
    src, dst = Path(os.path.realpath(source)), Path(os.path.realpath(out))
    if dst == src or src in dst.parents:
        raise OutputExistsError(f"output '{out}' is the input capture '{source}' or inside it; "
                                "choose another output path (the original is never modified)")
    from forensics.store.writer import check_replaceable

    check_replaceable(Path(out), force)


def reference(capture: Any, out: str | os.PathLike[str], variants: Sequence[str] | None,
              force: bool, progress: bool) -> tuple[Any, list[str], Any]:
    """Open ``capture`` (a Capture or a path), check ``out`` (:func:`check_output`) and replay
    the capture through ``variants`` (default ``upstream`` and ``patched``).

    Returns:
        (the Capture, the variant names, the ReplayResult).
    Raises:
        CaptureFormatError: not a readable capture. OutputExistsError: see :func:`check_output`.
    """
    from forensics.replaying import DEFAULT_VARIANTS, replay
    from forensics.store.reader import Capture, load

    cap = capture if isinstance(capture, Capture) else load(capture)
    check_output(cap.path, out, force)
    names = list(variants or DEFAULT_VARIANTS)
    return cap, names, replay(cap, variants=names, progress=progress)


def publish(out: str | os.PathLike[str], records: Iterable[Record], manifest: dict[str, Any],
            events: Sequence[dict[str, Any]], expected: Evidence, variants: Sequence[str],
            force: bool = False, progress: bool = False) -> Path:
    """Write ``records`` as a capture at ``out``, replay it from disk through ``variants`` and
    rename it into place only when its evidence equals ``expected``.

    ``records`` come from a capture that was read (hence validated) and keep their fields'
    types, so they take the writer's trusted path; the replay from disk validates them again.

    Returns:
        The path of the capture written.
    Raises:
        EvidenceChangedError: the written capture's evidence differs; nothing is left at ``out``
            (a capture already there stays as it was).
        OutputExistsError: ``out`` exists and ``force`` is false, or it is not a capture.
    """
    from forensics.replaying import replay
    from forensics.store.reader import load
    from forensics.store.writer import FLUSH_EVERY, new_capture

    with new_capture(out, manifest, force) as writer:
        writer.extend(records, validated=True, flush_every=FLUSH_EVERY)
        for event in events:
            writer.add_event(event)
        writer.close()
        got = evidence_of(replay(load(writer.path), variants=list(variants), progress=progress))
        changed = differences(expected, got)
        if changed:
            raise EvidenceChangedError(f"refusing to write '{out}': its replay differs from the "
                                       f"original's: {'; '.join(changed)}")
    return Path(out)
