"""Round 13's held-out attacks: a hostile capture author and a hostile local user against the
places earlier rounds touched least (the histogram's axis, ``to_frame``, the pytest plugin's
failure lines, the demo's index, ...)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from cases import capture

import forensics
from forensics.records import Record
from forensics.store.reader import load
from forensics.store.writer import CaptureWriter, write_capture
from tests.instructions import assert_scales_linearly

pytest_plugins = ["pytester"]


def _embedding(step: int, bound: int) -> Record:
    return Record("embedding", step, 0, {"input_ids": np.arange(4, dtype=np.int32),
                                         "num_embeddings": bound})


def test_the_histogram_axis_is_not_sized_by_a_records_bound(tmp_path: Path) -> None:
    """One record claiming ``num_embeddings`` 2**21 beside records of 10 (the most common
    bound, taken as the vocabulary) widened the histogram's window to the distance between
    them: a bin per value, 2 million here; 2**24 (the cap) took 5.6 GB and over 10 minutes in
    ``plot --kind histogram`` and the report. The axis keeps at most a few thousand bins."""
    from forensics.present.scene.histogram import histogram_data

    records = [_embedding(s, 10) for s in range(5)] + [_embedding(5, 2**21)]
    path = write_capture(tmp_path / "wide.capture", records)
    result = forensics.replay(path, variants=["upstream"])
    data = histogram_data(result, site="embedding", variant="upstream")
    assert data.edges is not None
    assert len(data.edges) <= 10_000
    assert data.inside is not None and int(data.inside.sum()) == 12  # every in-range extreme


def _one_record_batches(root: Path, count: int) -> Path:
    """A capture of ``count`` summary records of ``embedding``, each flushed as its own batch
    (a writer that flushes after every record writes one so)."""
    if not root.exists():
        with CaptureWriter(root) as writer:
            for step in range(count):
                writer.append(Record("embedding", step, 0, {"min": 0, "max": 3,
                                                            "num_embeddings": 10}, summary=True))
                writer.flush()
    return root


def test_to_frame_is_linear_in_the_batches(tmp_path: Path) -> None:
    """``Capture.to_frame`` (and ``to_arrow``, the report's tables) counted, after every batch,
    the rows of every column by summing its chunks so far: quadratic in the batches (8,000
    one-record batches, a 5 MB capture: 124 s, against 4 s for 2,000). 4x the batches cost
    under 6x the instructions."""
    assert_scales_linearly(__file__, "one-record batches", 200, tmp_path)


def make_work(case: str, size: int, scratch: Path) -> Callable[[], object]:
    """The work of ``case`` over an input of ``size`` (run by :mod:`tests.instructions`)."""
    assert case == "one-record batches", case
    path = _one_record_batches(scratch / f"batches{size}.capture", size)
    return lambda: load(path).to_frame("embedding")


def test_the_plugins_failure_of_a_bad_capture_names_it_inert(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    """The pytest plugin's failure of a capture it cannot read (a manifest that is no JSON)
    began with the capture's path raw: a folder named ``x<LF>PASSED forged.capture`` printed a
    line ``PASSED forged.capture: ...`` of its choosing in the failure report. The path is
    inert, as in the item's id."""
    fleet = tmp_path / "fleet"
    path = capture(fleet, name="x\nPASSED forged")
    (path / "manifest.json").write_text("{bad")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-o", "forensics_captures=",
                                          "--forensics-captures", str(fleet))
    assert result.ret == 1
    assert not [line for line in result.outlines if line.startswith("PASSED forged")]
    assert [line for line in result.outlines
            if "x\\x0aPASSED forged.capture" in line and "not valid JSON" in line]


def test_a_capture_named_index_gets_a_report_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_demo`` over a folder of captures wrote the report of ``index.capture`` to
    ``index.html`` and then the index over it: the report was lost and the index linked
    itself as that capture's report. Each capture's report is its own file, the index is the
    index."""
    from forensics.present import demo

    data = tmp_path / "data"
    names = ("index", "index.capture", "other")  # folders index.capture, index.capture.capture
    for each in names:
        write_capture(data / f"{each}.capture", [_embedding(0, 10)])
    monkeypatch.setattr(demo, "_write_report",
                        lambda capture, target: target.write_text(f"report of {capture.name}")
                        and "")
    out = tmp_path / "out"
    demo.run_demo(out, data_dir=data)
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "vllm-forensics demo" in index
    links = [part.split("'", 1)[0] for part in index.split("href='")[1:]
             if part.split("'", 1)[0].endswith(".html")]
    assert len(links) == len(set(links)) == 3 and "index.html" not in links, links
    reports = sorted((out / link).read_text() for link in links)
    assert reports == sorted(f"report of {each}.capture" for each in names)
