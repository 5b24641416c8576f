"""Hostile input, round 8 (front B): a fleet of many captures that do not fit beside the others.

``open_many(..., on_error="skip")`` (and the triage stitching an engine) left out one unfit
capture per pass (a uint64 id past int64 beside int64 ids), each pass over every capture:
quadratic in a fleet of them (400 of each kind: 8.9 s of CPU, twice as many took 2.7x that).
One pass now leaves out every capture it finds unfit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from forensics.records import Record
from forensics.store.writer import write_capture
from tests.instructions import assert_scales_linearly


def ids_capture(root: Path, name: str, ids: list[int], dtype: type) -> str:
    return str(write_capture(root / name, [Record(
        "embedding", 0, 0, {"input_ids": np.array(ids, dtype=dtype), "num_embeddings": 10})]))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """240 captures: even ones of int64 ids, odd ones of a uint64 id past int64."""
    root = tmp_path_factory.mktemp("fleet")
    return [ids_capture(root, f"s{i:03d}.capture", [0, 1], np.int64) if i % 2 else
            ids_capture(root, f"u{i:03d}.capture", [0, 2**63 + 5], np.uint64)
            for i in range(240)]


def test_leaving_out_unfit_captures_is_linear_in_the_fleet(fleet: list[str]) -> None:
    """4x the captures cost under 6x the instructions (:mod:`tests.instructions`)."""
    assert_scales_linearly(__file__, "unfit", 60, Path(fleet[0]).parent)


def make_work(case: str, n: int, scratch: Path) -> Callable[[], object]:
    """Leaving out the unfit of the first ``n`` captures of the fleet in ``scratch``."""
    from forensics.fleet.dataset import capture_batches, fit_together
    from forensics.sites import SITES

    fleet = sorted(scratch.glob("*.capture"), key=lambda p: int(p.stem[1:]))[:n]
    part = {str(path): capture_batches(str(path)) for path in fleet}
    return lambda: fit_together(part, SITES, "skip")


def test_every_unfit_capture_is_left_out_and_only_they(fleet: list[str]) -> None:
    from forensics.errors import CaptureFormatError
    from forensics.fleet.dataset import open_many

    table = open_many(fleet, on_error="skip")["embedding"].to_table()
    assert sorted(set(table["capture"].to_pylist())) == [
        p for p in fleet if Path(p).name.startswith("s")]
    with pytest.raises(CaptureFormatError, match="u000.capture"):
        open_many(fleet)


def test_a_capture_named_like_a_glob_is_itself(tmp_path: Path) -> None:
    """``triage 'd[1].capture'`` (and ``open_many``) read its name as a glob: it triaged
    ``d1.capture`` beside it, another capture (or said it named nothing). A path that exists
    is taken as spelled; a glob that names no path is still a glob."""
    from forensics.fleet.dataset import open_many
    from forensics.fleet.paths import find_captures

    named = ids_capture(tmp_path, "d[1].capture", [0, 1], np.int64)
    other = ids_capture(tmp_path, "d1.capture", [0, 2], np.int64)
    assert find_captures([named]) == [Path(named)]
    table = open_many([named])["embedding"].to_table()
    assert set(table["capture"].to_pylist()) == {named}
    assert find_captures([str(tmp_path / "d?.capture")]) == [Path(other)]
