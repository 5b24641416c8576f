"""Round 9, the lead's own: an output folder named as ``plot``'s figure is refused before the
replay, and an output that cannot be written is named as every other path is (T49e)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.atomic import write_atomically
from forensics.cli import main
from forensics.errors import OutputError, one_line

BUNDLED = Path(__file__).resolve().parents[2] / "data" / "v2-negative-draft.capture"


def test_plot_refuses_a_folder_named_as_its_figure_before_replaying(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import forensics

    def no_replay(*args: object, **kwargs: object) -> None:
        raise AssertionError("replayed before the output was checked")

    monkeypatch.setattr(forensics, "replay", no_replay)
    monkeypatch.setattr(forensics, "load", no_replay)
    folder = tmp_path / "fig-heatmap.png"
    folder.mkdir()
    code = main(["plot", str(BUNDLED), "-o", str(tmp_path / "fig.png"), "--kind", "all"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"-o '{folder}' is a directory" in err and "give the image file" in err


@pytest.mark.parametrize("names", [("out\nx", "out x"), ("out\x1bx", "out\\x1bx")])
def test_an_output_that_cannot_be_written_is_named_apart(tmp_path: Path,
                                                         names: tuple[str, str]) -> None:
    """Two outputs whose names differ by a line break and a space (ESC and the text ``\\x1b``)
    are two different one-line messages, free of control characters."""
    lines = []
    for name in names:
        target = tmp_path / name
        target.mkdir()  # a folder in the way: the rename over it fails
        (target / "inside").write_text("x")
        with pytest.raises(OutputError) as caught:
            write_atomically(target, lambda p: p.write_text("new"))
        lines.append(one_line(caught.value))
    assert lines[0] != lines[1], lines
    assert all(ch.isprintable() for line in lines for ch in line), lines
