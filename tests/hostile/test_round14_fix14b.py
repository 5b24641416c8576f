"""Round 14's fixes (B) of what an attacker left open: records of a site this install does
not know, named by ``inspect`` and ``replay`` (T71c), passed in silence by ``check``, the
pytest plugin and triage ("matches", "clean")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_round2 import run_cli
from test_round14_fix14 import plugin_captures  # noqa: F401  (a fixture)

SAID = "3 record(s) of site 'toy_gather' (not known to this install)"

pytest_plugins = ["pytester"]


# ------------------------------- 1. records of a site not installed, beyond replay/inspect


def _copy(plugin_captures: dict[str, Path], kind: str, to: Path) -> Path:  # noqa: F811
    """A private copy of the capture of ``kind`` under ``to`` (a check writes beside it)."""
    to.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copytree(plugin_captures[kind], to / f"{kind}.capture"))


@pytest.mark.parametrize("kind", ["only", "both"])
def test_check_says_the_records_of_a_site_not_installed_were_not_judged(
        plugin_captures: dict[str, Path], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str], kind: str) -> None:
    """``forensics check`` said "matches expected.json" (exit 0) of a capture whose records of
    a plugin's site this install lacks were judged by no variant. It names them (count and
    site), does not say "matches" alone, and exits 1; ``--json`` counts them."""
    capture = _copy(plugin_captures, kind, tmp_path)
    code, _, err = run_cli(capsys, "check", capture, "--accept")
    assert code == 0 and f"not judged: {SAID}" in err  # the baseline holds no verdict of them
    code, out, _ = run_cli(capsys, "check", capture)
    assert code == 1, out
    assert out.splitlines()[0].endswith("matches expected.json in the records judged only:")
    assert f"not judged: {SAID}" in out
    assert "to accept it" not in out  # accepting judges nothing more
    code, out, _ = run_cli(capsys, "check", capture, "--json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and data["not_known"] == {"toy_gather": 3}


def test_check_of_known_sites_still_matches(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The refusal is the unknown sites' only: a capture of known sites still matches."""
    from test_round2 import records

    from forensics.store.writer import write_capture

    path = write_capture(tmp_path / "k.capture", records(["a", "b"]))
    assert run_cli(capsys, "check", path, "--accept")[0] == 0
    code, out, _ = run_cli(capsys, "check", path)
    assert code == 0 and "matches expected.json" in out and "not judged" not in out


def test_the_pytest_plugin_fails_a_capture_whose_records_were_not_judged(
        plugin_captures: dict[str, Path], tmp_path: Path,  # noqa: F811
        pytester: pytest.Pytester) -> None:
    """The plugin passed the capture's item: its records of a site this install lacks were
    never judged. The item fails, naming them."""
    from forensics.share import expectations

    capture = _copy(plugin_captures, "both", tmp_path / "caps")
    with pytest.warns(UserWarning):
        expectations.regenerate(capture)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--forensics-captures",
                                          str(capture.parent))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*not judged: {SAID}*"])


@pytest.mark.parametrize("kind", ["only", "both"])
def test_triage_says_the_records_of_a_site_not_installed_were_not_judged(
        plugin_captures: dict[str, Path], tmp_path: Path, kind: str) -> None:  # noqa: F811
    """A triage row said "clean" (or "capture of no records") of a capture whose records of
    a site this install lacks were judged by no variant. Its conclusion is ``not judged``,
    its row names the records (the table's column, what it shows, the group's title)."""
    from forensics.fleet.output import flat_rows, render
    from forensics.fleet.triage import triage

    capture = _copy(plugin_captures, kind, tmp_path)
    result = triage([capture], workers=1)
    (row,) = result.rows
    assert row["conclusion"] == "not judged", row
    (flat,) = flat_rows(result)
    assert "records not judged" in flat["group"]
    text = render(result, "text")
    assert SAID in text and "clean" not in text and "no records" not in text
    if kind == "both":
        assert flat["not_judged"] == SAID
    else:
        assert SAID in flat["error"]


def test_triage_of_known_sites_names_nothing_not_judged(tmp_path: Path) -> None:
    """A capture of known sites still concludes as before, with no records not judged."""
    from test_round2 import records

    from forensics.fleet.triage import triage
    from forensics.store.writer import write_capture

    path = write_capture(tmp_path / "k.capture", records(["a", "b"]))
    (row,) = triage([path], workers=1).rows
    assert row["not_judged"] == "" and row["conclusion"] != "not judged"


# ------------------------------------------------ 2. a diff edited while a shrink runs

PATCHES = Path(__file__).resolve().parents[2] / "data" / "patches"
INCIDENT_B = Path(__file__).resolve().parents[2] / "data" / "incident-b-vocab-sentinel.capture"


@pytest.fixture
def cheap_diff_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A ``vllm+PATH.diff`` variant built as ever (its diff read, applied in memory), but run
    as the upstream model (no vLLM imported: cheap); the list of the diff texts each variant
    built was built from."""
    from forensics.variants import vllm_diff
    from forensics.variants.models import UpstreamVariant

    built: list[str] = []
    real_init = vllm_diff.PatchedVllmVariant.__init__

    def init(self: object, path: str, name: str | None = None) -> None:
        real_init(self, path, name)  # type: ignore[arg-type]
        built.append(Path(path).read_text())

    monkeypatch.setattr(vllm_diff.PatchedVllmVariant, "__init__", init)
    monkeypatch.setattr(vllm_diff.PatchedVllmVariant, "run",
                        lambda self, record: UpstreamVariant().run(record))
    return built


def _edit_during_search(monkeypatch: pytest.MonkeyPatch, diff: Path) -> None:
    """Replace ``diff`` by another (valid) diff at the search's first replay."""
    from forensics.share import shrinking

    real_keeps = shrinking._Search.keeps

    def keeps(self: object, positions: list[int]) -> bool:
        diff.write_bytes((PATCHES / "stale-prev-rows.diff").read_bytes())
        return real_keeps(self, positions)  # type: ignore[arg-type]

    monkeypatch.setattr(shrinking._Search, "keeps", keeps)


def test_a_diff_edited_while_a_shrink_runs_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cheap_diff_runs: list[str]) -> None:
    """``shrink --variant vllm+D.diff`` read the diff again at every replay: one edited during
    the search ran other code from then on, and the shrunk capture's evidence was another
    code's. The diff is named by its file name and digest once; a replay of it changed is
    refused, naming it, and nothing is written."""
    from forensics.errors import PatchApplyError
    from forensics.share.shrinking import shrink

    diff = tmp_path / "fix.diff"
    diff.write_bytes((PATCHES / "vocab-guard.diff").read_bytes())
    _edit_during_search(monkeypatch, diff)
    with pytest.raises(PatchApplyError, match="changed after it was named") as caught:
        shrink(INCIDENT_B, tmp_path / "small.capture", ["upstream", f"vllm+{diff}"])
    assert "\n" not in str(caught.value) and "fix.diff" in str(caught.value)
    assert not (tmp_path / "small.capture").exists()
    assert len(set(cheap_diff_runs)) == 1  # no replay ran the edited diff


def test_a_diff_left_alone_shrinks_named_by_its_digest(
        tmp_path: Path, cheap_diff_runs: list[str]) -> None:
    """A diff unchanged shrinks as before; the shrunk capture names it by its file name and
    digest (as a report does), never the folder it lies in."""
    from forensics.share.shrinking import shrink
    from forensics.store.reader import load
    from forensics.variants import shared_diffs

    diff = tmp_path / "fix.diff"
    diff.write_bytes((PATCHES / "vocab-guard.diff").read_bytes())
    result = shrink(INCIDENT_B, tmp_path / "small.capture", ["upstream", f"vllm+{diff}"])
    (named,) = shared_diffs([f"vllm+{diff}"])[0]
    assert load(result.path).manifest["shrink"]["variants"] == ["upstream", named]
    assert str(tmp_path) not in json.dumps(load(result.path).manifest)
    assert len(cheap_diff_runs) > 2 and len(set(cheap_diff_runs)) == 1


# ------------------------------------- 3. a capture replaced between its task and the stitch


def _engine(root: Path, diverging: bool) -> list[Path]:
    """The two captures of one two-rank engine under ``root`` (rank 1 diverging at step 6
    when asked; otherwise alike)."""
    from forensics.fleet.generate import Fleet, _engine

    fleet = Fleet(root)
    root.mkdir(parents=True)
    _engine(fleet, "engine-x", 12, 4, 3, diverging)
    return sorted(Path(p) for p in fleet.kinds)


def _replace_after_the_tasks(monkeypatch: pytest.MonkeyPatch, target: Path,
                             other: Path) -> None:
    """Once the triage's tasks are done (before it stitches), ``target`` is replaced by
    ``other`` (a rename: a new folder at its path)."""
    from forensics.fleet import runners

    real = runners.run_local

    def run_local(*args: object, **kwargs: object) -> list[bytes]:
        results = real(*args, **kwargs)  # type: ignore[arg-type]
        shutil.rmtree(target)
        other.rename(target)
        return results

    monkeypatch.setattr(runners, "run_local", run_local)


def test_a_capture_replaced_before_the_stitch_is_its_error_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stitch opened each capture again after its task: rank 1 replaced meanwhile by a
    capture diverging at step 6 was compared as that one, and both rows said "rank
    divergence" though rank 1's row replayed the capture that agreed. The replaced capture is
    now its error row (changed while the triage ran), and rank 0 is compared with nothing."""
    from forensics.fleet.triage import triage

    rank0, rank1 = _engine(tmp_path / "fleet", diverging=False)
    _, diverging1 = _engine(tmp_path / "other", diverging=True)
    _replace_after_the_tasks(monkeypatch, rank1, diverging1)
    rows = {r["name"]: r for r in triage([rank0, rank1], workers=1).rows}
    assert rows[rank0.name]["divergence"] is None and rows[rank0.name]["conclusion"] == "clean"
    error = rows[rank1.name]["error"]
    assert "changed while the triage ran" in error and rank1.name in error and "\n" not in error
    assert rows[rank1.name]["conclusion"] == "unreadable"


def test_an_engine_left_alone_is_still_stitched(tmp_path: Path) -> None:
    """The check is the changed capture's only: an engine whose captures stay as replayed
    still shows its rank divergence."""
    from forensics.fleet.triage import triage

    rows = triage(_engine(tmp_path / "fleet", diverging=True), workers=1).rows
    assert all(r["divergence"] is not None and not r["error"] for r in rows)


def test_a_piece_reading_other_files_than_its_sibling_is_its_error_row() -> None:
    """Two step ranges of one capture that read different files of it (it changed between
    them, keeping its records and steps) make its row an error row."""
    from forensics.fleet.tasks import merge_pieces

    base = {"capture": "/x/a.capture", "name": "a.capture", "error": "", "records": 1,
            "findings": 0, "verdicts": "{}", "first_finding": "null", "known": "[]"}
    row = merge_pieces([{**base, "start": 0, "stop": 5, "held": "one"},
                        {**base, "start": 5, "stop": 9, "held": "two"}])
    assert "changed while the triage ran" in row["error"]
    same = merge_pieces([{**base, "start": 0, "stop": 5, "held": "one"},
                         {**base, "start": 5, "stop": 9, "held": "one"}])
    assert not same["error"]


# ------------------------------ 4. FORENSICS_CAPTURE outside FORENSICS_DIR, with no owner


def test_a_capture_named_outside_the_directory_is_refused(tmp_path: Path) -> None:
    """``FORENSICS_CAPTURE`` (the probe's own setting, passed to the processes it starts)
    naming a folder outside ``FORENSICS_DIR``, with no ``FORENSICS_CAPTURE_OWNER``: the probe
    made the capture there, its records outside the directory the user chose. The setting is
    refused in one line naming the variable and the fix, and nothing is made there."""
    from forensics.errors import ConfigurationError
    from forensics.probe.settings import from_env

    elsewhere = tmp_path / "elsewhere" / "x.capture"
    env = {"FORENSICS_DIR": str(tmp_path / "caps"), "FORENSICS_CAPTURE": str(elsewhere)}
    with pytest.raises(ConfigurationError) as caught:
        from_env(env)
    message = str(caught.value)
    assert "\n" not in message and "FORENSICS_CAPTURE=" in message
    assert "not in FORENSICS_DIR" in message and "unset it" in message
    assert not elsewhere.parent.exists()


def test_the_plugin_refuses_it_before_making_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine does not start with it (the probe's settings are refused at load): no
    capture folder anywhere."""
    from forensics.errors import ConfigurationError
    from forensics.probe import plugin

    elsewhere = tmp_path / "elsewhere" / "x.capture"
    monkeypatch.setenv("FORENSICS_DIR", str(tmp_path / "caps"))
    monkeypatch.setenv("FORENSICS_CAPTURE", str(elsewhere))
    monkeypatch.delenv("FORENSICS_CAPTURE_OWNER", raising=False)
    try:
        with pytest.raises(ConfigurationError, match="FORENSICS_CAPTURE"):
            plugin.register()
        assert plugin.session() is None and not elsewhere.parent.exists()
    finally:
        plugin.stop()


def test_a_capture_in_the_directory_or_with_its_owner_is_kept(tmp_path: Path) -> None:
    """In ``FORENSICS_DIR`` the name is used as before; with an owner (a process the first
    one started) the inherited folder is kept wherever it is: it is joined only when it is
    that very folder (T13), else a new capture is made in ``FORENSICS_DIR``."""
    from forensics.probe import owned
    from forensics.probe.settings import from_env

    caps = tmp_path / "caps"
    inside = from_env({"FORENSICS_DIR": str(caps), "FORENSICS_CAPTURE": str(caps / "a.capture")})
    assert inside is not None and inside.capture == caps / "a.capture"
    elsewhere = tmp_path / "elsewhere" / "x.capture"
    joined = from_env({"FORENSICS_DIR": str(caps), "FORENSICS_CAPTURE": str(elsewhere),
                       "FORENSICS_CAPTURE_OWNER": "1:2:3"})
    assert joined is not None and joined.capture == elsewhere
    claimed = owned.claim(joined)  # not the first process's folder: a new one in caps
    assert claimed.capture.parent == caps and not elsewhere.parent.exists()
