"""Commands on hostile captures: check chooses no code from the capture; every error is one
line and exit 2 (a traceback only with -v)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cases import EXPECTED, capture

from forensics.cli import main
from forensics.errors import CaptureFormatError, UnknownVariantError
from forensics.share.expectations import check, choose_variants, read_expected


def test_a_variant_named_only_by_expected_json_is_refused(tmp_path: Path) -> None:
    path = capture(tmp_path)
    data = dict(EXPECTED, verdicts={**EXPECTED["verdicts"], "vllm+p.diff": {}})
    (path / "expected.json").write_text(json.dumps(data))
    with pytest.raises(UnknownVariantError, match="'vllm\\+p.diff', which is not built in"):
        check(path)


def test_variants_the_user_names_are_replayed_and_built_ins_by_default(tmp_path: Path) -> None:
    expected = {"verdicts": {"upstream": {}, "vllm+x.diff": {}}}
    assert choose_variants(expected, tmp_path, ["vllm+x.diff"]) == ["vllm+x.diff"]
    assert choose_variants({"verdicts": {"patched": {}}}, tmp_path, None) == ["patched"]
    assert choose_variants({"verdicts": {}}, tmp_path, None) == ["upstream", "patched"]
    assert check(capture(tmp_path)).ok  # upstream from expected.json, replayed


@pytest.mark.parametrize(("text", "field"), [
    ('{"verdicts": {"upstream": ["ok"]}}', "verdicts.upstream"),
    ('{"verdicts": {"upstream": {"embedding": 3}}}', "verdicts.upstream"),
    ('{"verdicts": {}, "first_finding": []}', "'first_finding'"),
    ('{"verdicts": {}, "first_finding": {"upstream": {"step": {"a": 1}}}}',
     "first_finding.upstream"),
    ('{"verdicts": [1]}', "'verdicts'"),
    ("[" * 100_000 + "]" * 100_000, "nested 100000 deep"),
])
def test_expected_json_of_a_wrong_shape_names_the_field(tmp_path: Path, text: str,
                                                        field: str) -> None:
    path = capture(tmp_path)
    (path / "expected.json").write_text(text)
    with pytest.raises(CaptureFormatError, match=field):
        read_expected(path)


def test_the_obtained_file_never_writes_through_a_link(tmp_path: Path) -> None:
    path = capture(tmp_path)
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    data = dict(EXPECTED, verdicts={"upstream": {"embedding": "violation"}})
    (path / "expected.json").write_text(json.dumps(data))
    (path / "expected.obtained.json").symlink_to(target)
    result = check(path)
    assert not result.ok and target.read_text() == "keep"
    assert not (path / "expected.obtained.json").is_symlink()


def test_an_output_error_is_one_line_and_the_traceback_needs_v(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "clean", "-o", "/proc/forensics.capture", "--steps", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write capture '/proc/forensics.capture'" in err
    with pytest.raises(OSError):
        main(["-v", *argv])


def test_an_unexpected_exception_is_one_line_naming_a_bug(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    import forensics.commands.inspect as inspect_command

    def broken(args: object) -> int:
        raise TypeError("boom")

    monkeypatch.setattr(inspect_command, "run", broken)
    assert main(["inspect", str(tmp_path)]) == 2  # a folder: the CLI's path check passes
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error TypeError: boom" in err and "-v" in err
