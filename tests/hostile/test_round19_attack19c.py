"""Round 19's attack19c (issue 38): what `findings`, `triage`, `summary` and the API say of
hostile or odd-but-legal captures (T112a-)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from rank_engines import engine_ranks
from test_round2 import run_cli

from forensics.records import Record
from forensics.store.writer import write_capture

INCIDENT = Path(__file__).resolve().parents[2] / "data" / "incident-b-vocab-sentinel.capture"


# ------------------------------ T112a: findings --request of findings whose records name no request


def _unnamed(tmp_path: Path) -> Path:
    """Incident B with its embedding records' ``req_ids`` (optional) left out: the embedding's
    findings name no request, the async_output's names ``req-1``."""
    import forensics

    records = [Record(r.site, r.step, r.rank,
                      {k: v for k, v in r.fields.items()
                       if not (r.site == "embedding" and k == "req_ids")})
               for r in forensics.load(INCIDENT).records()]
    manifest = json.loads((INCIDENT / "manifest.json").read_text())
    return write_capture(tmp_path / "unnamed.capture", records, manifest)


@pytest.mark.parametrize("site", [[], ["--site", "embedding"]])
def test_findings_of_a_request_says_the_findings_that_name_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], site: list[str]) -> None:
    """``findings --request req-1`` of a capture whose embedding records hold no request ids
    left the embedding's 3 findings out in silence ("no findings" with ``--site embedding``),
    read as the request's rows judged clean. A line now says how many findings name no
    request, so --request could not select them."""
    capture = _unnamed(tmp_path)
    code, out, err = run_cli(capsys, "findings", capture, "--request", "req-1", *site)
    assert code == 0, err
    assert "not selected: 3 finding(s) name no request (their records hold no request ids), "\
        "so --request 'req-1' cannot say whether they are its" in out, out
    if site:
        assert out.startswith("no findings\n"), out


def test_findings_of_a_request_says_nothing_more_where_every_finding_names_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Every finding of incident B names its request: no extra line."""
    code, out, err = run_cli(capsys, "findings", INCIDENT, "--request", "req-1")
    assert code == 0, err
    assert "not selected" not in out and "req-1" in out, out


# ------------------------- T112b: a step not compared is no step of any rank of the engine compared


def _three_ranks(root: Path, calls: dict[int, int], changed: tuple[int, int] | None = None,
                 dropped: tuple[int, str] | None = None,
                 also: tuple[int, int] | None = None) -> None:
    """The three rank captures of one engine (:func:`rank_engines.engine_ranks`) whose
    embedding is called ``calls[rank]`` times at step 5; ``changed``: ``(rank, step)`` at which
    that rank's embedding ids differ from the others'; ``dropped``: ``(rank, site)`` whose
    records that rank's capture leaves out, all of them; ``also``: a second ``(rank, step)``
    changed so."""
    engine_ranks(root, 3, calls, [c for c in (changed, also) if c], [dropped] if dropped else [])


#: the sentence of step 5, rank 0's 2 embedding calls beside rank 1's 3
STEP_5 = ("rank divergence not judged at step 5: embedding input_ids not compared: rank 0 "
          "(engine-x-rank0.capture) holds 2 records of it, rank 1 (engine-x-rank1.capture) "
          "holds 3")


def test_a_step_not_compared_is_said_on_every_rank_of_the_engine(tmp_path: Path) -> None:
    """Ranks 0 and 2 hold 2 embedding records at step 5, rank 1 holds 3: the step is compared
    on no rank (rank 2's records there were never set beside rank 0's, alike in number), yet
    only the rows of ranks 0 and 1 said so and rank 2's read `clean`. Every row of the engine
    is now `divergence not judged`, naming the step."""
    from forensics.fleet.output import render
    from forensics.fleet.triage import triage

    _three_ranks(tmp_path / "fleet", {0: 2, 1: 3, 2: 2})
    result = triage([tmp_path / "fleet"], workers=1)
    assert [r["conclusion"] for r in result.rows] == ["divergence not judged"] * 3, \
        [(r["name"], r["conclusion"]) for r in result.rows]
    out = render(result, "text")
    assert "clean" not in out and out.count(STEP_5) == 3, out


def test_a_rank_named_by_the_step_before_a_divergence_is_not_clean(tmp_path: Path) -> None:
    """Step 5 not compared (rank 1's 3 records beside rank 0's 2), rank 2's ids differing at
    step 7: the divergence went to the rows of ranks 0 and 2, its sentence naming rank 1's
    step 5 not compared, and rank 1's row read `clean`. It is now `divergence not judged`,
    saying step 5."""
    from forensics.fleet.stitch import divergence_text
    from forensics.fleet.triage import triage

    _three_ranks(tmp_path / "fleet", {0: 2, 1: 3, 2: 2}, changed=(2, 7))
    rows = {r["name"]: r for r in triage([tmp_path / "fleet"], workers=1).rows}
    assert [rows[f"engine-x-rank{n}.capture"]["conclusion"] for n in (0, 2)] == \
        ["rank divergence"] * 2
    rank1 = rows["engine-x-rank1.capture"]
    assert rank1["conclusion"] == "divergence not judged", rank1["conclusion"]
    assert divergence_text(rank1["divergence"]).startswith(STEP_5)


# ------------------------------ T112d: a rank the first divergence does not name, compared up to it


def test_a_rank_the_first_divergence_does_not_name_is_not_clean(tmp_path: Path) -> None:
    """Rank 2's ids differ at step 5, rank 1's at step 9: the search stops at the first
    divergence (ranks 0 and 2), so rank 1's later steps were set beside nothing, yet its row
    read `clean` and its own divergence went unsaid. Its row is now `divergence not judged`,
    naming the step the comparison stopped at and the ranks that diverged there."""
    from forensics.fleet.output import render
    from forensics.fleet.triage import triage

    _three_ranks(tmp_path / "fleet", {0: 1, 1: 1, 2: 1}, changed=(2, 5), also=(1, 9))
    result = triage([tmp_path / "fleet"], workers=1)
    rows = {r["name"]: r["conclusion"] for r in result.rows}
    assert rows == {"engine-x-rank0.capture": "rank divergence",
                    "engine-x-rank1.capture": "divergence not judged",
                    "engine-x-rank2.capture": "rank divergence"}, rows
    out = render(result, "text")
    assert "rank divergence not judged from step 5: the engine's ranks were compared up to its " \
        "first divergence only, at step 5 between rank 0 (engine-x-rank0.capture) and rank 2 " \
        "(engine-x-rank2.capture)" in out, out
    assert "clean" not in out, out


# ------------------------------------ T112c: a rank of the engine holding no record of a site


@pytest.mark.parametrize("site", ["embedding", "async_output"])
def test_a_rank_holding_no_record_of_a_site_is_not_compared(tmp_path: Path, site: str) -> None:
    """Rank 2 of three holds every site's records but the embedding's (or async_output's):
    its segments of that site deleted, or never written. The site was compared on ranks 0 and
    1 only and every row read `clean`, though rank 2's ids there were set beside nothing. Every
    row is now `divergence not judged`, the sentence saying rank 2 holds 0 at the first step."""
    from forensics.fleet.output import render
    from forensics.fleet.triage import triage

    _three_ranks(tmp_path / "fleet", {0: 1, 1: 1, 2: 1}, dropped=(2, site))
    result = triage([tmp_path / "fleet"], workers=1)
    assert [r["conclusion"] for r in result.rows] == ["divergence not judged"] * 3, \
        [(r["name"], r["conclusion"]) for r in result.rows]
    out = render(result, "text")
    assert f"rank divergence not judged at step 1: {site} " in out, out
    assert "rank 0 (engine-x-rank0.capture) holds 1 record of it, rank 2 " \
        "(engine-x-rank2.capture) holds 0 (rank 2 holds no record of the site at any step: " \
        "dropped, never written, or a pipeline stage that does not run it)" in out, out
    assert "clean" not in out, out


def test_ranks_that_hold_a_site_are_still_compared_beside_one_that_holds_none(
        tmp_path: Path) -> None:
    """Rank 2 holds no embedding record, rank 1's ids differ at step 7: the divergence of
    ranks 0 and 1 is still found, its sentence saying rank 2's site not compared before it."""
    from forensics.fleet.stitch import divergence_text
    from forensics.fleet.triage import triage

    _three_ranks(tmp_path / "fleet", {0: 1, 1: 1, 2: 1}, changed=(1, 7),
                 dropped=(2, "embedding"))
    rows = {r["name"]: r for r in triage([tmp_path / "fleet"], workers=1).rows}
    assert [rows[f"engine-x-rank{n}.capture"]["conclusion"] for n in range(3)] == \
        ["rank divergence", "rank divergence", "divergence not judged"]
    text = divergence_text(rows["engine-x-rank0.capture"]["divergence"])
    assert text.startswith("rank divergence at step 7: embedding input_ids[0] = "), text
    assert "; before it, rank divergence not judged at step 1: embedding input_ids not " \
        "compared: rank 0 (engine-x-rank0.capture) holds 1 record of it, rank 2 " \
        "(engine-x-rank2.capture) holds 0" in text, text


def make_work(case: str, size: int, scratch: Path) -> Callable[[], object]:
    """The work of ``case`` over an input of ``size`` (run by :mod:`tests.instructions`):
    ``absent``, a site's ``size`` rows all of rank 0 beside ``size`` ranks holding none."""
    import numpy as np

    from forensics.fleet.stitch import _absent

    steps, ranks = np.arange(size, dtype=np.int64), np.zeros(size, np.int64)
    spans = {rank: (0, size, "c.capture") for rank in range(size + 1)}  # rank 0 holds rows
    return lambda: _absent(steps, ranks, spans, "embedding", "input_ids")


def test_ranks_holding_no_record_of_a_site_are_found_in_linear_time(tmp_path: Path) -> None:
    """4x the ranks holding no record of a site, and 4x its rows, cost under 6x the
    instructions: each absent rank is one binary search, never a pass over the rows."""
    from tests.instructions import assert_scales_linearly

    assert_scales_linearly(__file__, "absent", 5000, tmp_path)
