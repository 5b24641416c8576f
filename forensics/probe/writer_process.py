"""The probe's writer process: ``python -m forensics.probe.writer_process`` (the session
spawns it; see :mod:`forensics.probe.channel` for the ring, the pokes and the acks).

It owns the capture's segments and events file of its engine process (named with the
engine's process tag), reads frames up to each head the engine pokes, rebuilds the records
(:mod:`forensics.probe.frames`), writes them through the probe's one write path
(:class:`~forensics.probe.writing.BatchWriter`: column-wise blocks, checked appends, fsync)
and acknowledges. It imports neither torch nor vLLM, runs off the engine's cores
(:func:`~forensics.probe.affinity.leave_engine_cores`), ignores SIGINT and SIGTERM (a signal
to the engine's process group must not cut a capture short), and ends at the end of its
stdin: when the engine closed it or died, after writing what it was poked for.
"""

from __future__ import annotations

import argparse
import gc
import json
import mmap
import os
import signal
import sys
import time
from typing import Any

from forensics.errors import CaptureFormatError
from forensics.probe import frames
from forensics.probe.affinity import leave_engine_cores
from forensics.probe.channel import ACK, FAILED, POKE, START_FAILED
from forensics.probe.copy import PendingRecord
from forensics.probe.owned import through_descriptor
from forensics.probe.writing import BatchWriter, error_text
from forensics.store.events import EventsFullError


class WriterChild:
    """Writes the frames of ``ring`` to ``writer`` and acknowledges them on ``ack_fd``."""

    def __init__(self, ring: memoryview, writer: Any, ack_fd: int, engine_pid: int,
                 cpus: dict[str, list[int]]) -> None:
        self.ring, self.writer, self.ack_fd = ring, writer, ack_fd
        self.engine_pid, self.cpus = engine_pid, cpus
        self.decoder = frames.Decoder()
        self.done = 0  # ring bytes written and acknowledged
        self.counts = {"records": 0, "written": 0, "dropped": 0, "errors": 0}
        self.batch = BatchWriter(writer, self.error, self.count)
        self._where = (0, 0)  # rank and step of the last record read, for events
        self.frames = 0  # frames read so far (a probe_error names the frame by this number)
        self.lost_events = 0  # events the writer could not keep (the first is said on stderr)

    def run(self, pokes: int) -> None:
        """Serve pokes read from the file descriptor ``pokes`` until its end."""
        rest = b""
        while True:
            data = os.read(pokes, POKE.size * 512)
            if not data:
                return
            rest += data
            whole = len(rest) // POKE.size * POKE.size
            if whole:
                heads = [head for (head,) in POKE.iter_unpack(rest[:whole])]
                rest = rest[whole:]
                self.write_upto(max(heads))

    def write_upto(self, head: int) -> None:
        """Write every frame before ring position ``head``, then acknowledge."""
        pendings, events = self.read_upto(head)
        for number, event in events:
            self.add_event(event, number)
        self.counts["records"] += len(pendings)
        if pendings:
            try:
                self.batch.write(pendings)
            except Exception as exc:  # noqa: BLE001  (no record may end the writer)
                self.count("dropped", len(pendings))
                self.error(exc, f"writing {len(pendings)} records up to frame {self.frames}")
        self.acknowledge()

    def read_upto(self, head: int) -> tuple[list[PendingRecord],
                                            list[tuple[int, dict[str, Any]]]]:
        """Read every frame before ring position ``head``: the records a capture can hold,
        and the events with the number of the frame each came in."""
        pendings: list[PendingRecord] = []
        events: list[tuple[int, dict[str, Any]]] = []  # (frame number, event)
        while self.done < head:
            offset = self.done % len(self.ring)
            self.frames += 1
            try:
                length, kind, item = self.decoder.frame(self.ring, offset)
            except Exception as exc:  # noqa: BLE001  (no frame may end the writer)
                skip = self._frame_length(offset)
                self.error(exc, f"decoding frame {self.frames} at ring offset {offset}"
                                + ("" if skip else "; the frames after it up to the poke"))
                if skip is None:  # its length cannot be trusted: nor can what follows
                    self.done = head
                    break
                self.done += skip
                continue
            self.done += length
            if kind in (frames.BLOCK, frames.RECORD):
                pendings.extend(self._admit(item if kind == frames.BLOCK else [item]))
            elif kind == frames.EVENT:
                events.append((self.frames, item))
        return pendings, events

    def _frame_length(self, offset: int) -> int | None:
        """The length the frame at ``offset`` declares, when it is a possible one."""
        if offset + frames.HEAD.size > len(self.ring):
            return None
        length, _ = frames.HEAD.unpack_from(self.ring, offset)
        ok = length >= frames.HEAD.size and not length % frames.ALIGN \
            and offset + length <= len(self.ring)
        return int(length) if ok else None

    def _admit(self, pendings: list[PendingRecord]) -> list[PendingRecord]:
        """The records of one frame that a capture can hold (a registered site, a step and a
        rank that are non-negative int64); the others become one ``probe_error``."""
        from forensics.sites import SITES

        kept = [p for p in pendings if p.site in SITES and all(
            type(v) is int and 0 <= v < 2**63 for v in (p.rank, p.step))]
        if len(kept) < len(pendings):
            bad = next(p for p in pendings if p not in kept)
            self.count("dropped", len(pendings) - len(kept))
            self.error(ValueError(f"{len(pendings) - len(kept)} record(s) of site "
                                  f"{str(bad.site)[:64]!r}, step {str(bad.step)[:32]}, rank "
                                  f"{str(bad.rank)[:32]}: an unknown site or a step or rank "
                                  f"outside [0, 2**63)"), f"admitting frame {self.frames}")
        if kept:
            self._where = (kept[-1].rank, kept[-1].step)
        return kept

    def acknowledge(self) -> None:
        """Tell the engine how far the capture holds the ring, and the counts."""
        c = self.counts
        if self.ack_fd < 0:  # the engine rewriting what a lost writer process left: no one
            return
        try:
            os.write(self.ack_fd, ACK.pack(self.done, c["records"], c["written"], c["dropped"],
                                           c["errors"]))
        except OSError:  # the engine is gone: go on writing what it framed
            pass

    def count(self, name: str, n: int) -> None:
        """Add ``n`` to the count ``name`` (the write path's drops and writes)."""
        self.counts[name] += n

    def error(self, exc: BaseException, where: str) -> None:
        """One of the probe's own errors here: counted and kept as an event."""
        self.counts["errors"] += 1
        rank, step = self._where
        self.add_event({"kind": "probe_error", "time": time.time(), "pid": self.engine_pid,
                        "rank": rank, "step": step, "where": where, "error": error_text(exc),
                        "errors": self.counts["errors"]})

    def add_event(self, event: dict[str, Any], frame: int | None = None) -> None:
        """Keep ``event`` (the writer's CPUs join the engine's ``probe_stop``); ``frame``: the
        number of the frame it came in, for the ``probe_error`` of an event a capture could
        not load."""
        if event.get("kind") == "probe_stop":
            event.update(self.cpus)
        try:
            self.writer.add_event(event)
        except EventsFullError:  # counted by the events file, said by its probe_stop
            pass
        except CaptureFormatError as exc:  # an event the capture could not load: say why
            self.error(exc, f"checking the event of frame {frame}")
        except Exception as exc:  # a full disk: the count reaches the engine
            self.counts["errors"] += 1
            if not self.lost_events:  # one line, not one per record while the disk is full
                print(f"forensics probe writer: an event was lost: {error_text(exc)} "
                      "(further lost events are only counted)", file=sys.stderr)
            self.lost_events += 1


class Salvaged:
    """What the engine wrote again of a lost writer process's ring (:func:`salvage`): the
    records read, written and dropped, the errors, and the steps of the records that
    process may or may not have written before it died (``unsure``: sorted)."""

    __slots__ = ("records", "written", "dropped", "errors", "unsure")

    def __init__(self, counts: dict[str, int] | None = None,
                 unsure: list[int] | None = None) -> None:
        counts = counts or {}
        self.records, self.written = counts.get("records", 0), counts.get("written", 0)
        self.dropped, self.errors = counts.get("dropped", 0), counts.get("errors", 0)
        self.unsure = unsure or []


def salvage(ring: memoryview, layouts: list[bytes], acked: int, unread: int, head: int,
            writer: Any) -> Salvaged:
    """In the engine, after its writer process was lost: write through ``writer`` the frames
    of ``ring`` from ``unread`` (where that process provably read nothing) to ``head``, with
    the ``LAYOUT`` frames ``layouts`` announced; the frames from ``acked`` (what it
    acknowledged) to ``unread`` are only read, for the steps of their records (it may have
    written them before it died: writing them again could hold them twice)."""
    child = WriterChild(ring, writer, -1, os.getpid(), {})
    for announce in layouts:
        child.decoder.frame(memoryview(announce), 0)
    child.done = acked
    unsure, _ = child.read_upto(unread)
    child.write_upto(head)
    return Salvaged(child.counts, sorted({pending.step for pending in unsure}))


def main(argv: list[str] | None = None) -> int:
    """Command line (the session's): the ring's descriptor and size, the ack pipe's
    descriptor, the capture folder's descriptor, the engine's process tag and pid, the
    manifest (JSON). Any failure is one line on stderr (the engine's), never a traceback:
    exit :data:`START_FAILED` before the first frame is read, :data:`FAILED` after."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("--ring-fd", "--ring-bytes", "--ack-fd", "--engine-pid", "--capture-fd",
                 "--manifest-fd"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--process", required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        child = _start(args)
    except Exception as exc:  # noqa: BLE001  (one line, not a traceback on the engine's stderr)
        _say("could not start", exc)
        return START_FAILED
    gc.freeze()  # the collector skips what the imports made (a write's objects are acyclic)
    return _serve(child)


def _start(args: argparse.Namespace) -> WriterChild:
    """Map the ring and open the capture the engine made and checked (its folder held open
    as ``--capture-fd``)."""
    cpus = leave_engine_cores()
    from forensics.store.writer import CaptureWriter

    ring = memoryview(mmap.mmap(args.ring_fd, args.ring_bytes))
    # the folder through the descriptor, or a refusal: never ``mkdir`` of /proc/self/fd/N
    folder = through_descriptor(args.capture_fd, f"(descriptor {args.capture_fd})")
    writer = CaptureWriter(folder, _manifest(args.manifest_fd), process=args.process)
    return WriterChild(ring, writer, args.ack_fd, args.engine_pid, cpus)


def _manifest(fd: int) -> dict[str, Any]:
    """The manifest the engine wrote in the unnamed file ``fd`` (see
    :func:`~forensics.probe.channel.manifest_file`), read from its start; the file is closed."""
    with os.fdopen(fd, "rb") as facts:
        data = json.loads(os.pread(facts.fileno(), os.fstat(fd).st_size, 0))
    if not isinstance(data, dict):
        raise ValueError("the manifest is not a JSON object")
    return data


def _serve(child: WriterChild) -> int:
    """Serve the engine's pokes until its end, then close the capture and acknowledge; 0,
    or :data:`FAILED` after one line saying what failed."""
    status = 0
    try:
        child.run(sys.stdin.fileno())
    except Exception as exc:  # noqa: BLE001
        _say("stopped", exc)
        status = FAILED
    try:
        child.writer.close()
    except Exception as exc:  # noqa: BLE001  (a full disk: every file is closed regardless)
        child.counts["errors"] += 1
        _say("could not close the capture", exc)
    child.acknowledge()
    return status


def _say(what: str, exc: BaseException) -> None:
    """One line on stderr: the writer process ``what``, and why (escaped, on one line)."""
    from forensics.escaping import inert

    why = inert(" ".join(error_text(exc).split()))[:500]  # a message
    print(f"forensics probe writer: {what}: {why}", file=sys.stderr)


if __name__ == "__main__":
    status = main()
    sys.stderr.flush()
    os._exit(status)  # the capture is closed and fsynced: skip the interpreter's teardown
