"""``forensics demo``: a report that cannot be written is one line, and the others are written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from forensics.cli import main
from forensics.errors import CaptureFormatError

DATA = Path(__file__).resolve().parents[1] / "data"
#: the first capture in the demo's order, its name a terminal would act on
BAD = "a\x1b[31mbad"


def test_a_report_that_fails_is_named_and_the_others_are_still_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.present import demo, report

    data = tmp_path / "data"
    for name in (BAD, "b-good", "c-good"):
        shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", data / f"{name}.capture")

    def write_report(capture: Path, out: Path) -> Path:
        if capture.name.startswith("a"):
            raise CaptureFormatError(f"{capture}: broken\x1b[2J here")
        out.write_text(f"report of {capture.name}")
        return out

    monkeypatch.setattr(demo, "bundled_data_dir", lambda: data)
    monkeypatch.setattr(report, "write_report", write_report)
    out = tmp_path / "out"
    code = main(["demo", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    (line,) = captured.err.splitlines()
    assert line.startswith(r"forensics demo: error: the report of a\x1b[31mbad was not "
                           "written: "), line
    assert line.endswith(r"bad.capture: broken\x1b[2J here") and "\x1b" not in line, line
    assert (out / "b-good.html").read_text() == "report of b-good.capture"
    assert (out / "c-good.html").read_text() == "report of c-good.capture"
    assert not (out / f"{BAD}.html").exists()
    index = (out / "index.html").read_text()
    assert "href='b-good.html'" in index and "href='c-good.html'" in index
    assert index.count(">report</a>") == 2  # the failed capture's entry links no report
    assert f"wrote {out}/index.html" in captured.out


def test_a_demo_whose_reports_are_all_written_exits_0(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.present import demo, report

    data = tmp_path / "data"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", data / "good.capture")
    monkeypatch.setattr(demo, "bundled_data_dir", lambda: data)
    monkeypatch.setattr(report, "write_report", lambda capture, out: out.write_text("r") and out)
    assert main(["demo", "-o", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().err == ""
