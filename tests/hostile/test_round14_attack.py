"""Round 14's held-out attacks: a hostile capture author and a hostile local user against the
places earlier rounds touched least (ranks a segment name cannot hold, who may read a capture
written by a command, ...)."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import numpy as np
import pytest

from forensics.errors import CaptureFormatError
from forensics.records import Record
from forensics.store.reader import load
from forensics.store.writer import write_capture


def _embedding(step: int, rank: int = 0) -> Record:
    return Record("embedding", step, rank, {"input_ids": np.array([50], dtype=np.int64),
                                            "num_embeddings": 10})


@pytest.mark.parametrize("rank", [10**6, 2**63 - 1])
def test_a_rank_no_segment_name_holds_is_refused(tmp_path: Path, rank: int) -> None:
    """A record of rank 10**6 or more (accepted up to int64 by ``import`` and the writer) went
    to a segment ``embedding.r1000000...`` whose name no reader parses (six digits at most):
    ``import`` said "wrote X: 0 records", and ``replay`` of the capture said "no unresolved
    violation" of a record out of bounds. The record is refused in one line naming the rank."""
    with pytest.raises(CaptureFormatError, match=r"'rank' must be a rank from 0 to 999999"):
        write_capture(tmp_path / "r.capture", [_embedding(1, rank)])


def test_the_largest_rank_a_name_holds_is_read_back(tmp_path: Path) -> None:
    """The bound is the reader's: rank 999999 is written and read back, record for record."""
    path = write_capture(tmp_path / "r.capture", [_embedding(1, 10**6 - 1)])
    assert [(r.step, r.rank) for r in load(path)] == [(1, 10**6 - 1)]


def _others_may(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode) & 0o077


def test_a_capture_written_by_a_command_is_private(tmp_path: Path) -> None:
    """README: "Captures ... stay private (0600): a capture holds token ids and a manifest
    that may name hosts and paths until forensics redact has passed it". The manifest was
    0600, but ``import``, ``simulate``, ``shrink`` and the writer made the folder 0755 and
    every segment (token ids, request ids) and index 0644: readable by every user of a
    shared folder. Nothing of a capture is open to others now."""
    path = write_capture(tmp_path / "c.capture", [_embedding(1)])
    assert _others_may(path) == 0
    assert sorted(p.suffix for p in path.iterdir()) == [".arrows", ".idx", ".json"]
    assert [p.name for p in path.iterdir() if _others_may(p)] == []


@pytest.mark.parametrize("name", ["ToyGather", "_toy", "caf\u00e9", "x" * 65])
def test_a_site_named_so_no_segment_name_holds_it_is_refused(name: str) -> None:
    """A plugin site's name had only to be a Python identifier: a site ``ToyGather`` (or
    ``_toy``, ``café``, 65 letters) had its records written to ``ToyGather.r0....arrows``,
    which no reader parses (``[a-z][a-z0-9_]{0,63}``): the capture read back 0 records and
    its replay said no violation. The site is refused where it is declared (a plugin that
    declares one is skipped with a warning naming why)."""
    import dataclasses

    from forensics.schema import SiteDefinitionError
    from forensics.sites import get_site

    with pytest.raises(SiteDefinitionError, match="a capture's file names hold it"):
        dataclasses.replace(get_site("embedding"), name=name)


@pytest.mark.parametrize("name", ["t" * 64, "a", "v2_site_9"])
def test_every_site_name_a_declaration_allows_is_one_a_reader_parses(name: str) -> None:
    """The bound is the reader's own pattern: a site name the declaration accepts (64
    characters, one letter, digits and underscores) is the site of its segments' file names."""
    import dataclasses

    from forensics.sites import get_site
    from forensics.store.paths import SegmentName, parse_segment_name

    site = dataclasses.replace(get_site("embedding"), name=name)
    parsed = parse_segment_name(SegmentName(site.name, 999_999, "w0", 0).filename)
    assert parsed is not None and (parsed.site, parsed.rank) == (name, 999_999)


def test_to_arrow_of_a_uint64_tensor_past_int64_is_one_line(tmp_path: Path) -> None:
    """A capture may hold tensors of any integer dtype; ``Capture.to_arrow`` (for Polars,
    DuckDB, Parquet) of one whose ``uint64`` input ids reach 2**64 - 1 raised pyarrow's
    ``OverflowError: Python int too large to convert to C long``, a traceback naming neither
    the capture nor the column. It is one line naming both and the fix; ``to_frame`` still
    reads the values, and a capture within int64 still converts."""
    big = Record("embedding", 1, 0, {"input_ids": np.array([2**64 - 1, 3], dtype=np.uint64),
                                     "num_embeddings": 10})
    capture = load(write_capture(tmp_path / "u64.capture", [big]))
    with pytest.raises(CaptureFormatError, match=r"u64\.capture', site 'embedding': column "
                                                 r"'input_ids' holds an integer past int64"):
        capture.to_arrow("embedding")
    assert capture.to_frame("embedding")["input_ids"][0] == [2**64 - 1, 3]
    small = Record("embedding", 1, 0, {"input_ids": np.array([2**63 - 1], dtype=np.uint64),
                                       "num_embeddings": 10})
    table = load(write_capture(tmp_path / "u63.capture", [small])).to_arrow("embedding")
    assert table.column("input_ids").to_pylist() == [[2**63 - 1]]


def test_an_npz_string_array_of_two_dimensions_is_refused(tmp_path: Path) -> None:
    """``import`` of an ``.npz``: "1-d string arrays are lists of str", but a 2-d one was
    flattened in silence (``req_ids`` of shape (2, 2) became four request ids, the batch's
    rows misnamed), where a 2-d ``input_ids`` is refused. It is one line naming the file, the
    member and its shape; a 1-d one is still read."""
    from forensics.importers import npz

    def dump(req_ids: np.ndarray) -> Path:
        path = tmp_path / f"d{req_ids.ndim}.npz"
        np.savez(path, site=np.array("embedding"), step=np.array(1),
                 input_ids=np.arange(4), num_embeddings=np.array(10), req_ids=req_ids)
        return path

    with pytest.raises(CaptureFormatError, match=r"d2\.npz': member 'req_ids\.npy' is a "
                                                 r"string array of shape \[2, 2\]"):
        npz.read(dump(np.array([["a", "b"], ["c", "d"]])))
    record = npz.read(dump(np.array(["a", "b", "c", "d"]))).records[0]
    assert record["req_ids"] == ["a", "b", "c", "d"]


_DUMP = ("ERROR 12-06 10:00:00 [dump_input.py:79] Dumping scheduler output for model execution: "
         "SchedulerOutput(num_scheduled_tokens={{r1: {count}, r2: 3}}, "
         "total_num_scheduled_tokens=5, scheduled_spec_decode_tokens={{r1: [{ids}]}})\n"
         "ERROR 12-06 10:00:00 [core.py:1] EngineCore encountered a fatal error.\n"
         "Traceback (most recent call last):\n"
         '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 10, in execute_model\n'
         "    assert x\nAssertionError\n")


@pytest.mark.parametrize(("count", "ids", "held"), [
    ("2", "-1, -1, 99999999999999999999999", "a draft id past int64"),
    ("99999999999999999999", "-1, -1", "a count past int64"),
])
def test_a_crash_dump_number_past_int64_is_refused_not_dropped(
        tmp_path: Path, count: str, ids: str, held: str) -> None:
    """``import`` of a crash dump dropped in silence a draft id past int64 and a request whose
    count was: ``r1: [-1, -1, 99999999999999999999999]`` read as
    "2 of 2 spec-decode token(s) -1", and ``known`` matched all-placeholder-drafts-race on a
    request whose third draft was no placeholder. Such a dump's batch is refused: unknown,
    naming the field and the request (round 21, T123h: the whole log was refused, its crashes
    lost, where a client's request id can spell such an entry)."""
    from forensics.importers import crash_dump

    log = tmp_path / "engine.log"
    log.write_text(_DUMP.format(count=count, ids=ids))
    dump = next(e for e in crash_dump.read(log).events if e["kind"] == "crash_dump")
    assert dump["scheduled_spec_decode_tokens"] == "unknown"
    assert re.search(rf"the crash dump's \w+ for request 'r1' holds {held}", dump["message"])
    assert "spec-decode token(s) -1" not in dump["message"]


def test_a_scheduler_output_of_more_draft_ids_than_kept_is_refused() -> None:
    """Past :data:`crash_dump.MAX_IDS` draft ids of one request the rest were dropped (the
    count of ``-1`` drafts then of a part); they are refused in one line as well."""
    from forensics.importers import crash_dump

    ids = ", ".join(["-1"] * (crash_dump.MAX_IDS + 1))
    with pytest.raises(CaptureFormatError, match=r"for request 'r1' holds 65537 draft ids, "
                                                 r"more than 65536"):
        crash_dump.parse_scheduler_output(f"S(scheduled_spec_decode_tokens={{r1: [{ids}]}})")


def test_a_crash_dump_of_int64_numbers_is_read_whole(tmp_path: Path) -> None:
    """The refusal is only past int64: a count of 19 digits within it is kept (a count was
    read only up to 18 digits, the request dropped), every draft with it."""
    from forensics.importers import crash_dump

    log = tmp_path / "engine.log"
    # without the fixture's total of 5: counts that do not add up to it are unknown (T115f)
    log.write_text(_DUMP.format(count=str(2**63 - 1), ids="-1, 5, 9223372036854775807")
                   .replace("total_num_scheduled_tokens=5, ", ""))
    dump = next(e for e in crash_dump.read(log).events if e["kind"] == "crash_dump")
    assert dump["num_scheduled_tokens"] == {"r1": 2**63 - 1, "r2": 3}
    assert dump["scheduled_spec_decode_tokens"] == {"r1": [-1, 5, 2**63 - 1]}
    assert "1 of 3 spec-decode token(s) -1" in dump["message"]
