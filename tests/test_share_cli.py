"""forensics shrink / redact on the command line: bad input gets one line and exit 2, a changed
evidence exit 1, and the original is never modified."""

from __future__ import annotations

from pathlib import Path

import pytest
from share_cases import private_capture, tree_digest

import forensics.share.redaction
from forensics.cli import main
from forensics.share.evidence import Evidence, EvidenceChangedError, publish


@pytest.fixture(scope="module")
def fault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return private_capture(tmp_path_factory.mktemp("cli") / "fault.capture", "vocab-sentinel",
                           1, 10)


def _one_line_error(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"forensics {command}: error: ") and "\n" not in err
    return err


@pytest.mark.parametrize("command", ["shrink", "redact"])
def test_not_a_capture(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                       ) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    assert main([command, str(tmp_path), "-o", str(tmp_path / "out.capture")]) == 2
    assert "manifest.json" in _one_line_error(capsys, command)
    assert not (tmp_path / "out.capture").exists()


@pytest.mark.parametrize("command", ["shrink", "redact"])
def test_existing_output_without_force(command: str, fault: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.capture"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    before = tree_digest(fault)
    assert main([command, str(fault), "-o", str(out)]) == 2
    assert "--force" in _one_line_error(capsys, command)
    assert (out / "keep.txt").read_text() == "mine" and tree_digest(fault) == before


@pytest.mark.parametrize("command", ["shrink", "redact"])
def test_output_over_the_input_is_refused_even_with_force(
        command: str, fault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree_digest(fault)
    assert main([command, str(fault), "-o", str(fault), "--force"]) == 2
    assert "is the capture" in _one_line_error(capsys, command)
    assert tree_digest(fault) == before


def test_shrink_of_a_capture_without_findings(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    clean = private_capture(tmp_path / "clean.capture", "clean", 0, 0)
    assert main(["shrink", str(clean), "-o", str(tmp_path / "out.capture")]) == 2
    assert "no finding" in _one_line_error(capsys, "shrink")


def test_both_commands_write_and_report(fault: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    small, shared = tmp_path / "small.capture", tmp_path / "shared.capture"
    assert main(["shrink", str(fault), "-o", str(small)]) == 0
    assert "kept 4 of 96 records" in capsys.readouterr().out
    assert main(["redact", str(small), "-o", str(shared), "--keep-manifest", "model.name"]) == 0
    assert "token ids in [1, 32000) permuted" in capsys.readouterr().out
    assert main(["shrink", str(fault), "-o", str(small), "--force"]) == 0


@pytest.mark.parametrize(("key", "changed"), [
    (0, "upstream/async_output: expected verdict 'violation', got 'ok'"),
    (153, "upstream/prepare_input_ids: expected verdict 'ok', got 'violation'")])
def test_a_redaction_that_changes_the_evidence_is_refused(
        fault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, key: int, changed: str) -> None:
    """A wrong domain moves the vocab_size sentinel (32000) into range: the redaction is
    refused saying what changed. Which change comes first depends on the permutation's key,
    drawn at random per run (about 1 key in 100 also moves another id onto 32000, and the
    first change named is that one's), so the key is fixed: 0 and 153, one of each."""
    monkeypatch.setattr(forensics.share.redaction, "token_domain", lambda records, where="": 32001)
    monkeypatch.setattr(forensics.share.redaction.secrets, "token_bytes",
                        lambda size: key.to_bytes(size, "big"))
    out = tmp_path / "out.capture"
    assert main(["redact", str(fault), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("forensics redact: refusing to write") and "\n" not in err
    assert changed in err, err
    assert not out.exists() and not list(tmp_path.glob(".*tmp*"))


def test_publish_leaves_an_existing_capture_when_refusing(fault: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.capture"
    assert main(["shrink", str(fault), "-o", str(out)]) == 0
    before = tree_digest(out)
    wrong = Evidence({"upstream": {"embedding": "ok"}}, {"upstream": None})
    with pytest.raises(EvidenceChangedError, match="upstream/embedding: expected verdict"):
        publish(out, forensics.load(fault), {}, [], wrong, ["upstream"], force=True)
    assert tree_digest(out) == before


def test_one_evidence_type_serialises_as_expected_json_and_differs_on_its_own_keys() -> None:
    from forensics.share.evidence import EXPECTED_KEYS, FIRST_KEYS, differences

    first = {key: 1 for key in FIRST_KEYS}
    full = Evidence({"upstream": {"embedding": "violation"}}, {"upstream": first})
    assert Evidence.from_json(full.to_json()) == full
    assert full.to_json()["format"] == 1
    stored = Evidence.from_json({"verdicts": {"upstream": {"embedding": "violation"}},
                                 "first_finding": {"upstream": {k: 1 for k in EXPECTED_KEYS}}})
    assert differences(stored, full) == []  # an expected.json keeps fewer keys of the finding
    moved = Evidence(full.verdicts, {"upstream": {**first, "origin": "async_output"}})
    assert differences(full, moved) == ["upstream: first finding changed: expected "
                                        "1 in 1 at step 1 rank 1 row 1 element 1 (1=1), got "
                                        "1 in 1 at step 1 rank 1 row 1 element 1 (1=1); "
                                        "origin 1 -> 'async_output'"]
    assert differences(full, full, ["patched"]) == [
        "variant 'patched' is not in expected.json; regenerate it with forensics check "
        "--accept (in a test suite: --forensics-regen)"]  # keeps upstream's (T116b)
