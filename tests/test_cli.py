"""The command line: help with examples, exit codes, and one-line errors that name the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.cli import COMMANDS, main
from tests.conftest import embedding_records


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help_with_an_example(command: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert "example" in capsys.readouterr().out.lower()


def _assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_missing_capture_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("inspect", "replay", "check", "report", "plot"):
        suffix = {"report": ".html", "plot": ".png"}.get(command)
        extra = ["-o", str(tmp_path / f"x{suffix}")] if suffix else []
        code, _, err = run_cli(capsys, command, str(tmp_path / "nope.capture"), *extra)
        _assert_one_line_error(code, err, "nope.capture")


def test_unknown_variant_exits_2(make_capture, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_capture("c", embedding_records())
    code, _, err = run_cli(capsys, "replay", str(path), "--variant", "bogus")
    _assert_one_line_error(code, err, "bogus", "upstream")


def test_missing_diff_exits_2(make_capture, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    path = make_capture("c", embedding_records())
    code, _, err = run_cli(capsys, "replay", str(path), "--variant",
                           f"vllm+{tmp_path / 'missing.diff'}")
    _assert_one_line_error(code, err, "missing.diff")


def test_diff_that_does_not_apply_exits_2(make_capture, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = make_capture("c", embedding_records())
    diff = tmp_path / "bad.diff"
    diff.write_text("--- a/vllm/v1/spec_decode/utils.py\n+++ b/vllm/v1/spec_decode/utils.py\n"
                    "@@ -1,2 +1,2 @@\n-this line is not in the file\n+replacement\n"
                    " neither is this one\n")
    code, _, err = run_cli(capsys, "replay", str(path), "--variant", f"vllm+{diff}")
    _assert_one_line_error(code, err, "bad.diff", "hunk")


def test_unknown_scenario_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "simulate", "bogus", "-o", str(tmp_path / "s.capture"))
    _assert_one_line_error(code, err, "bogus", "clean")


def test_existing_output_without_force_exits_2(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.capture"
    assert run_cli(capsys, "simulate", "clean", "-o", str(out), "--steps", "3")[0] == 0
    code, _, err = run_cli(capsys, "simulate", "clean", "-o", str(out), "--steps", "3")
    _assert_one_line_error(code, err, "--force")
    assert run_cli(capsys, "simulate", "clean", "-o", str(out), "--steps", "3",
                   "--force")[0] == 0


def test_import_of_a_wrong_format_exits_2(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "dump.pt"
    source.write_bytes(b"this is not a torch file")
    code, _, err = run_cli(capsys, "import", str(source), "-o", str(tmp_path / "o.capture"))
    _assert_one_line_error(code, err, "dump.pt")


def test_plot_of_an_unknown_site_exits_2(make_capture, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = make_capture("c", embedding_records())
    code, _, err = run_cli(capsys, "plot", str(path), "-o", str(tmp_path / "f.png"),
                           "--site", "bogus")
    _assert_one_line_error(code, err, "bogus", "embedding")


def test_fail_on_exits_1_on_a_violation(make_capture,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    bad = make_capture("bad", embedding_records(bad_step=1))
    good = make_capture("good", embedding_records())
    assert run_cli(capsys, "replay", str(bad), "--fail-on", "upstream")[0] == 1
    assert run_cli(capsys, "replay", str(bad))[0] == 0
    assert run_cli(capsys, "replay", str(good), "--fail-on", "upstream")[0] == 0


def test_check_exits_1_on_a_difference(make_capture,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.share.expectations import regenerate

    path = make_capture("c", embedding_records(bad_step=1))
    regenerate(path)
    assert run_cli(capsys, "check", str(path))[0] == 0
    data = json.loads((path / "expected.json").read_text())
    data["verdicts"]["upstream"]["embedding"] = "ok"
    (path / "expected.json").write_text(json.dumps(data))
    code, out, _ = run_cli(capsys, "check", str(path))
    assert code == 1 and "expected verdict 'ok', got 'violation'" in out


def test_one_verbose_flag_before_or_after_the_command() -> None:
    """``-v`` is one setting: before the command (kept, not reset by the command's default),
    after it, on every command; absent, it is off."""
    from forensics.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["-v", "replay", "x.capture"]).verbose is True
    assert parser.parse_args(["replay", "x.capture", "-v"]).verbose is True
    assert parser.parse_args(["replay", "x.capture"]).verbose is False
    for command in COMMANDS:
        action = next(a for a in parser._subparsers._group_actions[0].choices[command]._actions
                      if "-v" in a.option_strings)
        assert action.dest == "verbose"


def test_a_reader_leaving_early_is_no_error(make_capture, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``forensics replay CAPTURE | head -3``: the closed pipe is not reported as a path,
    permission or disk problem; the exit code is a shell's for SIGPIPE."""
    import sys

    class ClosedPipe:
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    path = make_capture("emb", embedding_records())
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["inspect", str(path)]) == 141
    assert capsys.readouterr().err == ""
