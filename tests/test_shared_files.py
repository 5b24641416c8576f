"""Files for sharing honour the umask (issue 42, point 7): reports, exports, plots and the
demo's index get the mode ``open()`` would give them (0644 under umask 022); everything else
written atomically (captures, anything redaction has not passed) stays private (0600)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from forensics.atomic import write_text_atomically
from forensics.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_shared_file_honours_the_umask_and_a_private_one_does_not(tmp_path: Path,
                                                                     umask_022: None) -> None:
    assert mode(write_text_atomically(tmp_path / "a.html", "x", shared=True)) == 0o644
    assert mode(write_text_atomically(tmp_path / "b.json", "x")) == 0o600
    os.umask(0o027)
    assert mode(write_text_atomically(tmp_path / "c.html", "x", shared=True)) == 0o640


def test_a_findings_export_is_readable_by_others(tmp_path: Path, umask_022: None,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "f.csv"
    assert main(["findings", str(DATA / "incident-b-vocab-sentinel.capture"), "-o",
                 str(out)]) == 0
    assert mode(out) == 0o644


def test_the_demo_index_and_a_plot_are_readable_by_others(tmp_path: Path,
                                                          umask_022: None) -> None:
    from forensics.present.demo import DemoRow, _write_index
    from forensics.present.plots import save

    index = tmp_path / "index.html"
    _write_index(index, [DemoRow("c", "embedding", "ok", "ok", "none")], [])
    assert mode(index) == 0o644
    import matplotlib.pyplot as plt

    _, ax = plt.subplots()
    save(ax, tmp_path / "fig.svg")
    assert mode(tmp_path / "fig.svg") == 0o644
