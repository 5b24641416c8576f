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

from forensics.probe import frames
from forensics.probe.affinity import leave_engine_cores
from forensics.probe.channel import ACK, POKE
from forensics.probe.copy import PendingRecord
from forensics.probe.writing import BatchWriter, error_text


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
        pendings: list[PendingRecord] = []
        events: list[dict[str, Any]] = []
        while self.done < head:
            offset = self.done % len(self.ring)
            try:
                length, kind, item = self.decoder.frame(self.ring, offset)
            except (frames.FrameError, ValueError, KeyError, TypeError) as exc:
                self.error(exc, "reading the ring")  # its frames cannot be trusted
                self.done = head
                break
            self.done += length
            if kind == frames.BLOCK and item:
                pendings.extend(item)
                self._where = (item[-1].rank, item[-1].step)
            elif kind == frames.RECORD:
                pendings.append(item)
                self._where = (item.rank, item.step)
            elif kind == frames.EVENT:
                events.append(item)
        self.counts["records"] += len(pendings)
        if pendings:
            self.batch.write(pendings)
        for event in events:
            self.add_event(event)
        self.acknowledge()

    def acknowledge(self) -> None:
        """Tell the engine how far the capture holds the ring, and the counts."""
        c = self.counts
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

    def add_event(self, event: dict[str, Any]) -> None:
        """Keep ``event`` (the writer's CPUs join the engine's ``probe_stop``)."""
        if event.get("kind") == "probe_stop":
            event.update(self.cpus)
        try:
            self.writer.add_event(event)
        except Exception as exc:  # a full disk: the count reaches the engine
            self.counts["errors"] += 1
            print(f"forensics probe writer: an event was lost: {error_text(exc)}",
                  file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Command line (the session's): the ring's descriptor and size, the ack pipe's
    descriptor, the capture, the engine's process tag and pid, the manifest (JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("--ring-fd", "--ring-bytes", "--ack-fd", "--engine-pid"):
        parser.add_argument(name, type=int, required=True)
    for name in ("--capture", "--process", "--manifest"):
        parser.add_argument(name, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    cpus = leave_engine_cores()
    from forensics.store.writer import CaptureWriter

    ring = memoryview(mmap.mmap(args.ring_fd, args.ring_bytes))
    writer = CaptureWriter(args.capture, json.loads(args.manifest), process=args.process)
    child = WriterChild(ring, writer, args.ack_fd, args.engine_pid, cpus)
    gc.freeze()  # the collector skips what the imports made (a write's objects are acyclic)
    try:
        child.run(sys.stdin.fileno())
    finally:
        try:
            writer.close()
        finally:
            child.acknowledge()
    return 0


if __name__ == "__main__":
    status = main()
    sys.stderr.flush()
    os._exit(status)  # the capture is closed and fsynced: skip the interpreter's teardown
