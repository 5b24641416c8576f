"""Round 15 (lead): the vLLM version a capture's verdicts rest on, said when it is unknown
(issue 38, hostile input; "facts we do not have are unknown").

Whether a leaked ``-1`` is clamped to token 0 (vLLM 0.32 and later) or reaches the embedding as
an out-of-range index depends on the engine's vLLM version. A manifest that refused its version
said "vllm unknown"; one that left the version out said nothing at all, and the conclusion
named the models' verdicts (on vLLM 0.33.0's code) as if they were the engine's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import forensics
from forensics.present.capture_facts import facts_lines
from forensics.present.conclusion import conclude

DATA = Path(__file__).resolve().parents[2] / "data"


def _without_version(tmp_path: Path, drop: str) -> Path:
    """A copy of the stale-row capture whose manifest lacks ``versions.vllm`` (``drop``:
    ``"vllm"`` the one key, ``"versions"`` the whole object)."""
    copy = tmp_path / "v.capture"
    shutil.copytree(DATA / "stale-prev-row.capture", copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    if drop == "versions":
        manifest.pop("versions", None)
    else:
        manifest["versions"].pop("vllm", None)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


@pytest.mark.parametrize("drop", ["vllm", "versions"])
def test_a_capture_without_its_vllm_version_says_it_is_unknown(tmp_path: Path,
                                                               drop: str) -> None:
    """T78a: the conclusion says the version is unknown and that the models' code may not be
    the engine's (it said nothing: the fact was left out), and ``inspect`` lists it."""
    capture = _without_version(tmp_path, drop)
    text = conclude(forensics.replay(capture)).paragraph()
    assert "vllm unknown;" in text, text
    assert ("The vLLM version of the capture is unknown (its manifest's versions.vllm), while "
            "upstream, patched replay the code of vLLM 0.33.0") in text, text
    assert "  vllm: unknown" in facts_lines(forensics.load(capture).summary())


def test_a_capture_of_the_models_version_says_nothing_of_it(tmp_path: Path) -> None:
    """T78a: a capture of vLLM 0.33.0 gets no version sentence (nothing to warn of)."""
    text = conclude(forensics.replay(DATA / "stale-prev-row.capture")).paragraph()
    assert "vllm 0.33.0;" in text and "vLLM version of the capture" not in text


# ------------------------------------------------- an SVG's data-x past 2**53, exact or said so


def test_a_far_steps_data_x_is_exact_and_no_drawn_float_poses_as_a_step(tmp_path: Path) -> None:
    """T78b: steps 0, 1, 2 and 2**63 - 1 span more than 2**53, so the axis has no origin that
    keeps every position exact: the far point's ``data-x`` read ``9223372036854775808``, a
    step past int64 that no capture holds. A series point and a mark carry the step exactly;
    a drawn position that is not a step (a bound's edge) and that float64 does not hold is
    written in float notation; the ticks stay exact whole numbers."""
    import re
    import xml.etree.ElementTree as ET

    import numpy as np

    from forensics.present.svg import views
    from forensics.records import Record
    from forensics.store.writer import write_capture

    far = 2**63 - 1
    records = [Record("embedding", step, 0, {"input_ids": np.array([50 if step == far else 3],
                                                                    dtype=np.int64),
                                             "num_embeddings": 10}) for step in (0, 1, 2, far)]
    result = forensics.replay(write_capture(tmp_path / "far.capture", records))
    svg = views.figure("timeline", result, site="embedding", variant="upstream").to_svg()
    root = ET.fromstring(svg)
    series = [e.get("data-x", "") for e in root.iter() if e.get("class") == "series max"]
    assert {int(x) for xs in series for x in xs.split(",")} == {0, 1, 2, far}, series
    (mark,) = [m for g in root.iter() if g.get("class") == "mark open" for m in g
               if m.get("data-x")]
    assert mark.get("data-x") == str(far)
    wholes = {int(x) for x in re.findall(r"(?<![\d.e+-])(\d{17,})(?![\d.e])", svg)}
    assert 2**63 not in wholes and wholes <= {far} | {
        int(t.get("data-x", "0")) for t in root.iter() if t.get("class") == "xtick"}, wholes
    ticks = [t.get("data-x", "") for t in root.iter() if t.get("class") == "xtick"]
    assert ticks and all(re.fullmatch(r"-?\d+", t) for t in ticks), ticks


# ------------------------------------------------- the manifest's model facts


def test_a_manifest_written_first_without_the_model_is_completed_by_the_engines(
        tmp_path: Path) -> None:
    """T78c: of the processes sharing a probe's capture, the first to write the manifest won;
    one that held no model runner (vLLM's front end, a helper it spawned: each writes its
    ``probe_start``) could win under load, and the capture lost its model facts
    (``max_model_len``: a live V2 test failed on it). The engine's writer now replaces a
    manifest stating no model with its own; one stating a model is kept, and a process with
    none never replaces another's."""
    from forensics.store.writer import CaptureWriter

    folder = tmp_path / "c.capture"
    read = lambda: json.loads((folder / "manifest.json").read_text())  # noqa: E731
    CaptureWriter(folder, {"runner": "unknown", "model": {}}, process="front").close()
    assert read()["model"] == {}
    engine = {"runner": "v2", "model": {"max_model_len": 256, "vocab_size": 512}}
    CaptureWriter(folder, engine, process="engine").close()
    assert read()["model"]["max_model_len"] == 256 and read()["runner"] == "v2"
    CaptureWriter(folder, {"runner": "unknown", "model": {}}, process="late").close()
    CaptureWriter(folder, {"runner": "v2", "model": {"max_model_len": 9}}, process="r1").close()
    assert read()["model"]["max_model_len"] == 256, read()


# --------------------------------------------- a known issue matched from a crash dump alone


def test_a_crash_dump_alone_is_not_said_to_hold_values_in_range(tmp_path: Path) -> None:
    """T78d: a crash dump imported alone (no record) matches ``all-placeholder-drafts-race``,
    as the catalogue means (every draft -1 and a crash), but its evidence said "no value out of
    range in the engine's own code" of a capture holding no value, beside "no records were
    captured". It says there was no record to judge the engine's values by."""
    from forensics.cli import main

    capture = tmp_path / "d.capture"
    data = Path(__file__).resolve().parents[1] / "data" / "vllm_dump_all_placeholder.log"
    assert main(["import", str(data), "-o", str(capture)]) == 0
    from forensics.known import answer, load_catalogue

    known = answer(forensics.replay(capture), load_catalogue())
    (race,) = [m for m in known.matches if m.entry.id == "all-placeholder-drafts-race"]
    text = "; ".join(race.evidence)
    assert "no value out of range in the engine's own code" not in text, text
    assert "no record of the engine's values to find one out of range by" in text, text
    assert known.seen.endswith("; no record to replay"), known.seen  # not "raises nothing"
