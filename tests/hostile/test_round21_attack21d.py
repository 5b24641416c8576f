"""Round 21, attack 21d: the Python API a notebook calls, the pytest plugin's comparison."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import forensics

DATA = Path(__file__).parents[2] / "data"


# ------------------------------------------------ T128a: open_many given one path, not a list
def _parent_and_child(tmp_path: Path) -> Path:
    """A folder holding ``a.capture`` and ``sub/``, which holds ``b.capture`` (another
    capture's copy); the path of ``sub``."""
    shutil.copytree(DATA / "clean.capture", tmp_path / "a.capture")
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", sub / "b.capture")
    return sub


def _captures(datasets: dict[str, object]) -> set[str]:
    """The names of the captures ``open_many``'s datasets read."""
    embedding = datasets["embedding"].to_table(columns=["capture"])  # type: ignore[attr-defined]
    return {Path(name).name for name in embedding.column("capture").to_pylist()}


def test_open_many_one_string_path_is_that_path(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``open_many("..")`` reads the parent's captures (``a`` beside ``sub``, and ``sub``'s
    ``b``): the string was read as its characters, ``'.'`` and ``'.'``, and gave the captures
    under the working folder alone (``b``), unsaid."""
    monkeypatch.chdir(_parent_and_child(tmp_path))
    assert _captures(forensics.open_many("..")) == {"a.capture", "b.capture"}


def test_open_many_one_folder_named_alone(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``open_many("sub")`` reads sub's capture: it once said "'s' names no capture
    directory", a path nobody gave."""
    monkeypatch.chdir(tmp_path)
    _parent_and_child(tmp_path)
    assert _captures(forensics.open_many("sub")) == {"b.capture"}


def test_open_many_one_pathlike(tmp_path: Path) -> None:
    """``open_many(Path(...))`` reads it: a ``Path`` alone was a ``TypeError`` traceback."""
    sub = _parent_and_child(tmp_path)
    assert _captures(forensics.open_many(sub / "b.capture")) == {"b.capture"}
    with pytest.raises(forensics.ForensicsError, match="nowhere"):
        forensics.open_many(tmp_path / "nowhere")


# ------------------------------------------------ T128b: another variant named "upstream"
INCIDENT_B = DATA / "incident-b-vocab-sentinel.capture"


def test_a_variant_named_upstream_is_the_upstream_model() -> None:
    """``replay(..., {"upstream": "patched"})`` is refused, one line: that name is the
    baseline a sink finding's origin is judged by, and the patched model run under it was
    given an embedding violation (step 14, input_ids element 5) its own replay does not find."""
    with pytest.raises(forensics.ForensicsError, match="'upstream' names the baseline"):
        forensics.replay(INCIDENT_B, variants={"upstream": "patched"})
    alone = forensics.replay(INCIDENT_B, variants={"fixed": "patched"})
    assert alone.verdicts["fixed"]["embedding"] == "ok"
    named = forensics.replay(INCIDENT_B, variants={"upstream": None, "fixed": "patched"})
    assert named.verdicts["upstream"]["embedding"] == "violation"
    assert named.verdicts["fixed"] == alone.verdicts["fixed"]


# ------------------------------------------------ T128c: a table of a variant not replayed
def test_a_table_of_a_variant_or_site_not_replayed_is_refused() -> None:
    """``first_violation`` of a replay without ``upstream`` (its default variant) was None,
    "no violation", beside the ``embedding`` violation the table of the variant replayed
    holds; a misspelt variant or site gave an empty table. Each is one line naming the
    choices."""
    result = forensics.replay(INCIDENT_B, variants={"mine": "upstream"})
    assert forensics.first_violation(result, "mine")["site"] == "async_output"
    with pytest.raises(forensics.ForensicsError,
                       match=r"variant 'upstream' is not in the replay.*\['mine'\]"):
        forensics.first_violation(result)
    with pytest.raises(forensics.ForensicsError, match="unknown site 'embeding'"):
        forensics.findings_table(result, site="embeding")
    with pytest.raises(forensics.ForensicsError, match="variant 'Mine' is not in the replay"):
        forensics.grouped_findings(result, "Mine")
    assert len(forensics.findings_table(result, "mine", "embedding")) == 1


# ------------------------------------------------ T128d: one name given alone to shrink, redact
def test_shrink_and_redact_take_one_variant_or_field_alone(tmp_path: Path) -> None:
    """``variants="patched"`` and ``keep_manifest="model.name"`` are that one name, as
    ``replay`` takes a variant: each was read as its characters ("unknown variant 'p'",
    "--keep-manifest 'm' names no field"), names nobody gave."""
    shrunk = forensics.shrink(INCIDENT_B, tmp_path / "s.capture", variants="patched")
    assert list(shrunk.evidence.verdicts) == ["patched"]
    redacted = forensics.redact(INCIDENT_B, tmp_path / "r.capture", keep_manifest="model.name",
                                variants="patched")
    assert "model.name" not in redacted.dropped and list(redacted.evidence.verdicts) == ["patched"]
    assert forensics.load(tmp_path / "r.capture").manifest["model"]["name"] == \
        forensics.load(INCIDENT_B).manifest["model"]["name"]


# ------------------------------------------------ T128e: embedding_guard's rank, refused first
@pytest.mark.parametrize("rank", [-1, True, 2**63, 1.5, "0"])
def test_embedding_guard_refuses_a_bad_rank_before_the_block(tmp_path: Path, rank: object) -> None:
    """A rank no capture holds is one line before the block runs: it was refused only by the
    first lookup's record, as a CaptureFormatError raised from inside the user's model call,
    and a capture folder of no record was left behind."""
    import torch

    ran = []
    with pytest.raises(forensics.ForensicsError, match="embedding_guard rank .* is not a rank"):
        with forensics.embedding_guard(tmp_path / "g.capture", mode="record",
                                       rank=rank):  # type: ignore[arg-type]
            ran.append(torch.nn.Embedding(10, 4)(torch.tensor([1, 2])).shape)
    assert ran == [] and not (tmp_path / "g.capture").exists()


# ------------------------------------------------ T128f: plots.save of a path without an image type
@pytest.mark.parametrize("name", ["figure", "figure.exe", "figure.SVG"])
def test_plots_save_names_the_image_type_it_was_given(tmp_path: Path, name: str) -> None:
    """A path without an image suffix is one line naming it and the fix: it was a ValueError
    traceback saying "Format 'tmp' is not supported", a format nobody gave (the suffix of the
    file written first); an upper-case suffix is its type."""
    from forensics import plots

    ax = plots.plot_verdict_matrix(forensics.replay(INCIDENT_B))
    if name.endswith(".SVG"):
        plots.save(ax, tmp_path / name)
        assert (tmp_path / name).read_bytes().startswith(b"<?xml")
        return
    with pytest.raises(forensics.ForensicsError, match=f"{name}': the image type is the file's"):
        plots.save(ax, tmp_path / name)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------ T128g: expected.json's errors, escaped in the API
@pytest.mark.parametrize("change", [{"format": 2},
                                    {"first_finding": {"upstream": {"step": "13"}}}])
def test_an_expected_file_error_names_the_capture_inertly(tmp_path: Path,
                                                          change: dict[str, object]) -> None:
    """``expectations.check`` of a capture whose folder name holds ESC (a colour code) and whose
    expected.json has a wrong ``format`` or a first finding's key of a wrong type: the error
    names the folder as inert text, as every other field's error does; these two held the ESC
    itself (a notebook shows a traceback's ANSI codes: the text after it coloured or hidden)."""
    import json

    from forensics.share import expectations

    capture = tmp_path / "a\x1b[8mHIDDEN.capture"
    shutil.copytree(DATA / "clean.capture", capture)
    data = json.loads((capture / "expected.json").read_text())
    data.update(change)
    (capture / "expected.json").write_text(json.dumps(data))
    with pytest.raises(forensics.ForensicsError) as caught:
        expectations.check(capture)
    assert "\x1b" not in str(caught.value) and "HIDDEN.capture" in str(caught.value)
