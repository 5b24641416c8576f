"""Round 21's fix21b (issue 38): what was found and left in round 21.

- T127a: ``known`` of a capture holding a vLLM crash dump whose drafts are unknown (its line
  cut past 64 KiB) printed "no   all-placeholder-drafts-race: does not match: the crash dump's
  scheduled spec-decode tokens are unknown ...": a verdict the data cannot give. Such an entry
  is now "?" and "not judged: ..." (``"status": "not judged"`` in ``--json``).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from test_round2 import run_cli
from test_round19_attack19b import import_log

ROOT = Path(__file__).resolve().parents[2]
ALL_PLACEHOLDER = ROOT / "tests" / "data" / "vllm_dump_all_placeholder.log"
CLEAN = ROOT / "data" / "clean.capture"


# ------------------------ T127a: an entry whose required fact is unknown is not judged


def _cut_dump(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    """A capture of the bundled all-placeholder dump whose line is cut past 64 KiB."""
    text = ALL_PLACEHOLDER.read_text(encoding="utf-8").replace(
        "finished_req_ids=[]", "finished_req_ids=[" + "'r', " * 20000 + "]")
    import_log(capsys, tmp_path, text)
    return tmp_path / "engine.capture"


def test_an_entry_whose_dump_is_unread_is_not_judged(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """``known`` says the all-placeholder race was not judged, and why: never "no" or "does not
    match"."""
    capture = _cut_dump(capsys, tmp_path)
    code, out, err = run_cli(capsys, "known", capture)
    assert code == 0, err
    said = " ".join(out.split())
    assert "no all-placeholder-drafts-race" not in said
    assert "all-placeholder-drafts-race: does not match" not in said
    assert ("? all-placeholder-drafts-race: not judged: the crash dump's scheduled spec-decode "
            "tokens are unknown (its line was longer than 65536 bytes") in said


def test_known_json_says_not_judged(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--json`` gives the entry ``"status": "not judged"`` and the clause it could not judge;
    a judged entry keeps ``"no"``."""
    capture = _cut_dump(capsys, tmp_path)
    code, out, err = run_cli(capsys, "known", capture, "--json")
    assert code == 0, err
    checked = {m["id"]: m for m in json.loads(out)["checked"]}
    race = checked["all-placeholder-drafts-race"]
    assert race["status"] == "not judged" and race["matched"] is False
    assert race["not_judged"] and "unknown" in race["not_judged"][0]
    assert checked["v2-zeros-embedded"]["status"] == "no"  # runner is v1: judged false


def test_judged_entries_are_said_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    """Of the bundled clean capture (no crash dump) every entry is judged: "no", "does not
    match" (a capture holding no dump holds none of such drafts)."""
    code, out, err = run_cli(capsys, "known", CLEAN)
    assert code == 0, err
    said = " ".join(out.split())
    assert "not judged" not in said and "? " not in said
    assert ("no negative-draft-id-verified: does not match: no crash dump with scheduled "
            "spec-decode tokens") in said


def test_a_false_clause_still_says_does_not_match() -> None:
    """An entry of one false and one unknown required clause does not match (the false one
    decides), and names both."""
    from forensics.known.matching import Match
    from forensics.known.schema import load_catalogue

    entry = load_catalogue().entries[0]
    match = Match(entry, matched=False, missing=["a is 1, not 2", "b not recorded"],
                  unjudged=["b not recorded"])
    assert match.status == "no"
    assert match.explain() == "does not match: a is 1, not 2; b not recorded."
    unjudged = Match(entry, matched=False, missing=["b not recorded"],
                     unjudged=["b not recorded"])
    assert unjudged.status == "not judged"
    assert unjudged.explain() == "not judged: b not recorded."


# ------------- T127b: a config fact a model path spells too is unknown, never the path's


def _config_line() -> str:
    """The bundled dump's config text (after ``with config: ``)."""
    line = next(x for x in ALL_PLACEHOLDER.read_text(encoding="utf-8").splitlines()
                if "with config: " in x)
    return line.split("with config: ", 1)[1]


@pytest.mark.parametrize("draft", ["/m/num_spec_tokens=9/tensor_parallel_size=8/x",
                                   "/m/x, num_spec_tokens=9, tensor_parallel_size=8"])
def test_a_draft_path_spelling_a_config_field_leaves_it_unknown(draft: str) -> None:
    """A draft model path spelling ``num_spec_tokens=`` and ``tensor_parallel_size=`` (read
    first, 9 and 8 of a dump of 4 and 1) leaves both unknown; the rest is read."""
    from forensics.importers.crash_dump import parse_config

    text = _config_line().replace("model='/models/Qwen3.8-27B', num_spec_tokens",
                                  f"model='{draft}', num_spec_tokens")
    facts = parse_config("0.33.0", text)
    assert facts["num_speculative_tokens"] == "unknown"
    assert facts["tensor_parallel_size"] == "unknown"
    assert facts["speculative"] == "mtp" and facts["model"] == "/models/Qwen3.8-27B"


def test_a_plain_config_is_read_as_before() -> None:
    """The bundled config line: 4 draft tokens, tensor parallel size 1 (a field whose name
    ends another's, ``draft_tensor_parallel_size=``, is no second spelling)."""
    from forensics.importers.crash_dump import parse_config

    facts = parse_config("0.33.0", _config_line())
    assert facts["num_speculative_tokens"] == 4 and facts["tensor_parallel_size"] == 1
    facts = parse_config("0.33.0", _config_line().replace(
        "num_spec_tokens=4", "num_spec_tokens=4, draft_tensor_parallel_size=2"))
    assert facts["num_speculative_tokens"] == 4 and facts["tensor_parallel_size"] == 1


def test_an_imported_dumps_config_holds_no_paths_value(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    """The imported dump's config holds no 9: ``inspect --json`` shows the fact unknown."""
    text = ALL_PLACEHOLDER.read_text(encoding="utf-8").replace(
        "SpeculativeConfig(method='mtp', model='/models/Qwen3.8-27B'",
        "SpeculativeConfig(method='mtp', model='/m/num_spec_tokens=9/x'")
    events = import_log(capsys, tmp_path, text)[2]
    dump = next(e for e in events if e["kind"] == "crash_dump")
    config = dump["config"]
    assert isinstance(config, dict) and config["num_speculative_tokens"] == "unknown"


# ------------ T127c: a capture folder inside another capture is named as not read


def _nested(tmp_path: Path) -> tuple[Path, Path]:
    """A folder holding the clean capture, which holds another copy two folders down."""
    outer = Path(shutil.copytree(CLEAN, tmp_path / "fleet" / "a.capture"))
    inner = Path(shutil.copytree(CLEAN, outer / "old" / "b.capture"))
    return tmp_path / "fleet", inner


def test_triage_names_a_capture_inside_another(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    """``triage DIR`` reads ``a.capture`` and says in one line that ``a.capture/old/b.capture``
    was not read, and why (it dropped out unsaid)."""
    fleet, inner = _nested(tmp_path)
    code, out, err = run_cli(capsys, "triage", fleet, "--workers", "1", "--format", "json")
    assert code == 0, err
    assert len(json.loads(out)["rows"]) == 1
    said = [line for line in err.splitlines() if line.startswith("not read:")]
    assert said == [f"not read: 1 capture folder(s) inside another capture ({inner}): a "
                    "capture's own folders are not searched; name them to read them"]


def test_open_many_warns_of_a_capture_inside_another(tmp_path: Path) -> None:
    """``open_many`` warns, naming the capture it did not read."""
    from forensics.fleet.dataset import open_many

    fleet, inner = _nested(tmp_path)
    with pytest.warns(UserWarning, match="not read: 1 capture folder"):
        open_many([fleet])


def test_no_note_without_a_nested_capture(capsys: pytest.CaptureFixture[str]) -> None:
    """A plain folder of captures: no note."""
    from forensics.fleet.paths import find_captures, unread_note

    assert unread_note(find_captures([ROOT / "data"])) is None


# ------------ T127d: the folders we make are owner-writable whatever the umask


def _under_umask(code: str) -> None:
    """Run ``code`` in a fresh Python under umask ``0277`` (root ignores mode bits: the tests
    check the bits themselves)."""
    script = f"import os\nos.umask(0o277)\n{code}"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_probes_folder_is_0700_under_umask_0277(tmp_path: Path) -> None:
    """The probe's ``FORENSICS_DIR`` (and its parents) made under umask ``0277`` are ``0700``:
    they were ``0500``, and the probe then said no capture folder could be made there."""
    root = tmp_path / "a" / "captures"
    _under_umask("from pathlib import Path\nfrom forensics.probe.owned import make_folder\n"
                 f"d = Path({str(root)!r})\nmake_folder(d, d / 'x.capture')")
    assert _mode(root) == 0o700 and _mode(tmp_path / "a") == 0o700
    assert _mode(root / "x.capture") == 0o700


def test_simulate_makes_writable_folders_under_umask_0277(tmp_path: Path) -> None:
    """``simulate clean -o a/b/x.capture`` under umask ``0277``: the capture is ``0700`` and
    the parents it made are owner-writable (they were ``0500``: "Permission denied")."""
    out = tmp_path / "a" / "b" / "x.capture"
    _under_umask("import sys\nfrom forensics.cli import main\n"
                 f"sys.exit(main(['simulate', 'clean', '-o', {str(out)!r}]))")
    assert _mode(out) == 0o700
    assert _mode(tmp_path / "a") == 0o700 and _mode(tmp_path / "a" / "b") == 0o700


def test_folders_keep_the_usual_umask_bits(tmp_path: Path) -> None:
    """Under umask ``022`` a parent made is ``0755`` (as ``mkdir -p``), the capture ``0700``."""
    from forensics.store.fs import make_folders

    old = os.umask(0o022)
    try:
        make_folders(tmp_path / "p" / "q.capture")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "p") == 0o755 and _mode(tmp_path / "p" / "q.capture") == 0o700
