"""Capture directories: the append-only, crash-safe writer and the lazy, memory-mapped reader.

Layout of ``NAME.capture/`` (see DESIGN.md):

- ``manifest.json``: written once, atomically (:mod:`forensics.store.manifest`);
- ``events-<process>.jsonl``: one JSON object per line, per process (:mod:`forensics.store.events`);
- ``<site>.r<rank>.<process>.<seq>.arrows``: Arrow IPC streams, one per (site, rank, process) and
  schema, with a ``.idx`` sidecar of fixed-size batch entries (:mod:`forensics.store.index`);
- ``expected.json``: optional expected verdicts (read only).

Import :mod:`forensics.store.writer` or :mod:`forensics.store.reader`; this package itself
imports nothing heavy.
"""
