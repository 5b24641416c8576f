"""Summary records are evidence, not replays (issue 29, point 6): a log's lines keep their own
order and never share step numbers with a dump's records; a site with summary records only is
``unjudged`` for every variant but the baseline, and the conclusion says why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from importer_helpers import record_to_npz

import forensics
from forensics.cli import main
from forensics.importers import import_sources
from forensics.present.conclusion import conclude
from forensics.records import Record
from forensics.store.reader import load

#: two probe lines naming no step: the first holds the -1 placeholder, the second is clean
LOG = ("SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=-1 max=7\n"
       "SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=0 max=9\n")


def _dump(tmp_path: Path) -> list[Path]:
    """Two full embedding records at steps 40 and 41; the first reads id 1000 of 1000 rows."""
    paths = []
    for step, ids in ((40, [1, 1000, 3, 4]), (41, [1, 2, 3, 4])):
        record = Record("embedding", step, 0, {"input_ids": np.array(ids, np.int64),
                                                "num_embeddings": 1000})
        paths.append(record_to_npz(tmp_path / f"dump{step}.npz", record))
    return paths


def test_log_lines_keep_their_order_after_the_dumps_steps(tmp_path: Path) -> None:
    (tmp_path / "engine.log").write_text(LOG)
    out = import_sources([*_dump(tmp_path), tmp_path / "engine.log"], tmp_path / "c.capture")
    records = list(load(out).records())
    full = sorted(r.step for r in records if not r.summary)
    logged = [(r.step, r["line"]) for r in records if r.summary]
    assert full == [40, 41]
    assert sorted(logged) == [(42, 1), (43, 2)]  # after the dump, in line order
    first = forensics.replay(out, ["upstream"]).first_finding("upstream")
    assert first is not None and first["step"] == 40 and first["value"] == 1000


def test_a_log_alone_keeps_its_line_numbers(tmp_path: Path) -> None:
    (tmp_path / "engine.log").write_text(LOG)
    out = import_sources([tmp_path / "engine.log"], tmp_path / "c.capture")
    assert sorted(r.step for r in load(out).records()) == [0, 1]


def test_summary_only_sites_are_unjudged_but_for_the_baseline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "engine.log").write_text(LOG)
    out = import_sources([tmp_path / "engine.log"], tmp_path / "c.capture")
    result = forensics.replay(out, ["upstream", "patched"])
    assert result.verdicts == {"upstream": {"embedding": "violation"},
                               "patched": {"embedding": "unjudged"}}
    text = conclude(result).paragraph()
    assert "patched leaves embedding in violation" not in text
    assert "embedding holds summary records only" in text
    assert "patched cannot be judged there (unjudged)" in text
    assert main(["replay", str(out)]) == 0
    assert "1 findings (0 resolved at their origin, 1 not judged)" in capsys.readouterr().out


def test_a_replayed_record_beside_a_log_keeps_the_site_judged(tmp_path: Path) -> None:
    (tmp_path / "engine.log").write_text(LOG)
    out = import_sources([*_dump(tmp_path), tmp_path / "engine.log"], tmp_path / "c.capture")
    result = forensics.replay(out, ["upstream", "patched"])
    assert result.verdicts["patched"] == {"embedding": "violation"}  # the dump's step 40
