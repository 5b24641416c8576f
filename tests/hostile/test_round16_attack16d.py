"""Hostile input, round 16 (attack D): the share bundle (``redact``), the write-up and the
pytest plugin, as a hostile capture's author would write them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from forensics.records import Record
from forensics.store.writer import write_capture


def _files_text(folder: Path) -> bytes:
    """Every byte of every file under ``folder``."""
    return b"".join(f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file())


def test_redact_drops_ids_an_event_or_the_manifest_holds_under_a_field_name(
        tmp_path: Path) -> None:
    """T91a: a token id or a request id under a record field's name (``input_ids``, ``min``,
    ``req_ids``) in an event or the manifest was kept as it was (a known key, numbers or a
    version-like string), while the records' ids were permuted and pseudonymised."""
    from forensics.share.redaction import redact

    records = [Record("embedding", step, 0, {
        "input_ids": np.array([5, 6], dtype=np.int64), "num_embeddings": 32000,
        "req_ids": ["1.2.3", "4.5.6"]}) for step in range(2)]
    events = [{"kind": "index_error", "step": 1, "rank": 0, "input_ids": [12345, 23456],
               "input_ids_after": 13579, "req_ids": ["1.2.3"], "min": 24680}]
    capture = write_capture(tmp_path / "s.capture", records, events=events,
                            manifest={"model": {"input_ids": [11111, 22222]}})
    result = redact(capture, tmp_path / "r.capture")
    text = _files_text(result.path)
    for private in (b"12345", b"23456", b"13579", b"24680", b"11111", b"22222", b"1.2.3",
                    b"4.5.6"):
        assert private not in text, private
    assert {"events.input_ids", "events.input_ids_after", "events.req_ids", "events.min",
            "model.input_ids"} <= set(result.dropped), result.dropped
