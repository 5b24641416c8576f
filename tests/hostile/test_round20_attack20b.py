"""Round 20's attack20b (issue 38, "Hostile input, round 3"): what a hostile capture author or a
careful user found in ``import`` of engine logs, ``check``, ``known``, ``summary``, ``report``
and ``repro`` (T116a.. of docs/threat-model.md).

- T116a: a traceback of the API server rooted in vLLM's ``RuntimeError: Engine core process NAME
  died unexpectedly.`` after the engine core's own exception was a second crash event
  (``process_died``): ``known`` and ``summary`` said "2 crash event(s)" of one death.
- T116b: ``check`` through fewer variants than ``expected.json`` holds said "to accept it:
  forensics check CAPTURE --accept --variant patched" (and "regenerate it with" the same): run,
  it wrote patched alone and dropped the file's other expectations.
- T116c: a baseline accepted with ``--accept --variant vllm --variant patched`` failed its own
  ``check --trust-expected``: the file keeps its variants sorted, the check replayed patched
  first, and the baseline (the first variant without upstream) decides a summary-only site's
  verdicts ("patched/embedding: expected verdict 'unjudged', got 'ok'").
- T116d: ``known`` of ``v2-wrong-last-token.capture`` said "Known issue v2-zeros-embedded ...:
  Model Runner V2 embeds zeros where a request's tokens belong; evidence: upstream finds
  embedding step 8: input_ids[0] = 149759": the entry matches any in-range token fed that is
  not the request's own, and the token named is no zero.
- T116e: ``known --variant vllm`` of a V2 capture with a crash, whose one value out of range
  (``post_update`` counting id vocab_size into the next slot's row of ``output_bin_counts``) lies
  inside an allocation, where Triton's interpreter flags nothing (the vllm variant's finding is
  not judged), said "crash verdict explained" and "the engine's own code (the baseline or
  unpatched vLLM) finds a value out of range": no variant replayed found one.
- T116f: ``check --accept`` (and the plugin's ``--forensics-regen``) through fewer variants than
  the ``expected.json`` it rewrites holds (a plain ``--accept`` of a file that held ``vllm``'s
  verdicts) said "wrote PATH" alone: the other variants' expectations were gone without a word.
- T116g: ``check --variant upstream`` of a capture whose expected.json, of upstream and vllm,
  says the crash is "explained" said "crash verdict: expected 'explained', got 'unexplained'":
  upstream alone finding nothing contradicts no explanation vllm's findings may give.
- T116h: ``check`` of a capture with a crash whose expected.json holds patched's verdicts and
  says "crash verdict": "no crash" said "matches expected.json" alone: a replay through no
  variant of the engine's code judges no crash verdict, and none was compared.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from test_round2 import run_cli

DATA = Path(__file__).resolve().parents[2] / "data"

#: the engine core's own exception, logged with its process tag
CORE_EXCEPTION = (
    "(EngineCore_DP0 pid=4242) SM70-TEMB: rows=1000 input=(4,) dtype=torch.int32 min=0 max=7\n"
    "(EngineCore_DP0 pid=4242) ERROR 12-02 10:46:44 [core.py:866] Traceback (most recent call "
    "last):\n"
    '(EngineCore_DP0 pid=4242) ERROR 12-02 10:46:44 [core.py:866]   File "/x/vllm/v1/engine/'
    'core.py", line 857, in run_engine_core\n'
    "(EngineCore_DP0 pid=4242) ERROR 12-02 10:46:44 [core.py:866]     engine_core.run_busy_loop()\n"
    "(EngineCore_DP0 pid=4242) ERROR 12-02 10:46:44 [core.py:866] IndexError: index 1000 is out "
    "of bounds for dimension 0 with size 1000\n")
#: the API server's traceback of the same death, rooted in its report that the core died
CORE_DIED = (
    "ERROR 12-02 10:46:45 [core_client.py:564] Traceback (most recent call last):\n"
    'ERROR 12-02 10:46:45 [core_client.py:564]   File "/x/vllm/v1/engine/core_client.py", '
    "line 560, in monitor\n"
    "ERROR 12-02 10:46:45 [core_client.py:564]     raise RuntimeError(msg)\n"
    "ERROR 12-02 10:46:45 [core_client.py:564] RuntimeError: Engine core process EngineCore_DP0 "
    "died unexpectedly.\n")


def _imported(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> Path:
    """The capture ``forensics import`` makes of a log of ``text``."""
    (tmp_path / "engine.log").write_text(text)
    out = tmp_path / "engine.capture"
    code, _, err = run_cli(capsys, "import", tmp_path / "engine.log", "-o", out, "--force")
    assert code == 0, err
    return out


def _events(capsys: pytest.CaptureFixture[str], capture: Path) -> list[dict[str, object]]:
    """The events ``forensics inspect --json`` lists of ``capture``."""
    code, shown, err = run_cli(capsys, "inspect", capture, "--json")
    assert code == 0, err
    return list(json.loads(shown)["events"])


# ------------------------------ T116a: one death, reported twice, is one crash event


def test_a_died_traceback_after_a_crash_is_that_crash(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """The API server's traceback rooted in ``Engine core process ... died unexpectedly`` after
    the core's exception is that exception's death (its ``died``), not a second crash."""
    capture = _imported(capsys, tmp_path, CORE_EXCEPTION + CORE_DIED)
    [event] = _events(capsys, capture)
    assert event["kind"] == "engine_exception" and event["line"] == 5
    assert event["died"]["line"] == 9  # type: ignore[index]
    for command in (("known",), ("summary", "--format", "text")):
        code, out, err = run_cli(capsys, *command, capture)
        assert code in (0, 1), err
        said = " ".join(out.split())
        assert "2 crash event(s)" not in said, said
    code, out, _ = run_cli(capsys, "known", capture)
    assert "1 crash event(s)" in " ".join(out.split())


def test_a_died_traceback_alone_is_still_a_crash(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    """Without a crash before it, the same traceback is the crash event (``process_died``)."""
    capture = _imported(capsys, tmp_path, CORE_EXCEPTION.splitlines(keepends=True)[0] + CORE_DIED)
    [event] = _events(capsys, capture)
    assert event["kind"] == "process_died" and event["line"] == 5


# ------------------------------ T116b: the accept a check gives drops no expectation


def test_check_advice_through_fewer_variants_keeps_the_others(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A check through patched of an expected.json of upstream alone gives the commands that
    accept patched and keep upstream; run, the file holds both (it held patched alone)."""
    capture = tmp_path / "b.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", capture)
    code, _, err = run_cli(capsys, "check", capture, "--accept", "--variant", "upstream")
    assert code == 0, err
    code, said, _ = run_cli(capsys, "check", capture, "--variant", "patched")
    assert code == 1, said
    lines = said.splitlines()
    regen = next(line for line in lines if "is not in expected.json" in line)
    advice = regen.split("regenerate it with forensics check ", 1)[1].split(" (in a test", 1)[0]
    accept = next(line for line in lines if "to accept it:" in line)
    assert shlex.split(accept.split("to accept it: forensics check ", 1)[1].split("  (", 1)[0]
                       ) == [str(capture), *shlex.split(advice)], (accept, advice)
    code, _, err = run_cli(capsys, "check", capture, *shlex.split(advice))
    assert code == 0, err
    kept = json.loads((capture / "expected.json").read_text())["verdicts"]
    assert sorted(kept) == ["patched", "upstream"], kept


# ------------------------------ T116c: a baseline accepted in any order checks in any order


def test_a_baseline_accepted_in_any_order_matches_its_check(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Accepted through ``vllm`` then ``patched`` (no upstream: the first variant is the
    baseline), a capture of summary records matches its own check, whatever order the check
    names them in."""
    capture = _imported(capsys, tmp_path, CORE_EXCEPTION)
    code, _, err = run_cli(capsys, "check", capture, "--accept", "--variant", "vllm",
                           "--variant", "patched")
    assert code == 0, err
    for words in (("--trust-expected",), ("--variant", "vllm", "--variant", "patched"),
                  ("--variant", "patched", "--variant", "vllm")):
        code, said, _ = run_cli(capsys, "check", capture, *words)
        assert code == 0 and "matches expected.json" in said, (words, said)


# ------------------------------ T116d: a known issue's title is true of what it matched


def test_a_wrong_token_that_is_no_zero_is_not_called_zeros(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``known`` of a V2 capture whose fed tokens are other valid ids (149759) matches the
    entry of in-range wrong tokens, and no longer says "embeds zeros" of them."""
    code, out, err = run_cli(capsys, "known", DATA / "v2-wrong-last-token.capture")
    assert code in (0, 1), err
    said = " ".join(out.split())
    assert "Known issue v2-zeros-embedded" in said and "input_ids[0] = 149759" in said, said
    assert "embeds zeros" not in said, said
    assert "embeds an in-range token that is not the request's own" in said, said


# ------------------------------ T116e: a value the engine's variant cannot see explains nothing


def _unseen_capture(tmp_path: Path) -> Path:
    """A V2 capture of one ``post_update`` record whose id vocab_size is a request's second of
    four sampled tokens (its count lands in the next slot's row of ``output_bin_counts``, inside
    the buffer), and a crash event."""
    from test_round20_fix20b import counted_past_the_row

    from forensics.store.writer import write_capture

    source = DATA / "v2-vocab-sample.capture"
    manifest = json.loads((source / "manifest.json").read_text())
    event = json.loads((source / "events-w0.jsonl").read_text().splitlines()[0])
    return write_capture(tmp_path / "unseen.capture", [counted_past_the_row()],
                         manifest=manifest, events=[event])


def test_a_crash_is_not_explained_by_a_value_the_variant_cannot_see(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Through ``vllm`` alone the crash is "not judged", saying why; no clause says the
    engine's code finds a value out of range. Through upstream too it is explained."""
    capture = _unseen_capture(tmp_path)
    code, out, err = run_cli(capsys, "known", capture, "--variant", "vllm")
    assert code in (0, 1), err
    said = " ".join(out.split())
    assert "crash verdict not judged" in said and "crash verdict explained" not in said, said
    assert "1 value(s) out of range that the models find lie where it cannot see" in said, said
    assert "the engine's own code (the baseline or unpatched vLLM) finds" not in said, said
    code, out, err = run_cli(capsys, "known", capture, "--variant", "upstream",
                             "--variant", "vllm")
    assert code in (0, 1), err
    assert "crash verdict explained" in " ".join(out.split()), out


# ------------------------------ T116f: a rewrite that drops expectations says so


def test_accept_through_fewer_variants_says_what_it_drops(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Accepting through upstream a capture whose expected.json held upstream and patched says
    that patched's verdicts are dropped, and the command that keeps them; a rewrite through the
    same variants says nothing of the kind."""
    capture = tmp_path / "b.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", capture)
    code, _, err = run_cli(capsys, "check", capture, "--accept")
    assert code == 0 and "dropped" not in err, err
    code, out, err = run_cli(capsys, "check", capture, "--accept", "--variant", "upstream")
    assert code == 0 and "wrote" in out, err
    said = " ".join(err.split())
    assert "the verdicts of variant(s) patched it held are dropped (not replayed: upstream)" \
        in said, said
    assert f"to keep them: forensics check {shlex.quote(str(capture))} --accept " \
        "(in a test suite: --forensics-regen)" in said, said


# ------------------------------ T116g: a crash verdict fewer variants cannot check


def test_an_explained_crash_is_not_checked_by_fewer_variants(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Through upstream alone, an expected.json of upstream and vllm whose crash is explained
    matches for upstream only, saying its crash verdict was not checked; through both, the
    same file's verdict differs."""
    capture = _imported(capsys, tmp_path, CORE_EXCEPTION)
    code, _, err = run_cli(capsys, "check", capture, "--accept", "--variant", "upstream",
                           "--variant", "vllm")
    assert code == 0, err
    path = capture / "expected.json"
    expected = json.loads(path.read_text())
    assert expected["crash_verdict"] == "unexplained"
    path.write_text(json.dumps({**expected, "crash_verdict": "explained"}))
    code, said, _ = run_cli(capsys, "check", capture, "--variant", "upstream")
    said = " ".join(said.split())
    assert code == 0 and "crash verdict: expected" not in said, said
    assert "matches expected.json for upstream only; not checked: the verdicts of variant(s) " \
        "vllm in expected.json, and its crash verdict 'explained', which may rest on them" \
        in said, said
    code, said, _ = run_cli(capsys, "check", capture, "--variant", "upstream", "--variant", "vllm")
    assert code == 1 and "crash verdict: expected 'explained', got 'unexplained'" in said, said


# ------------------------------ T116h: a crash verdict no replayed variant judges


def test_a_crash_verdict_no_variant_judged_is_said_unchecked(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A check through patched alone of a file whose crash verdict says "no crash" (of a capture
    with crash events) matches, saying the crash verdict was not checked and why."""
    capture = tmp_path / "b.capture"
    shutil.copytree(DATA / "incident-b-vocab-sentinel.capture", capture)
    code, _, err = run_cli(capsys, "check", capture, "--accept", "--variant", "patched")
    assert code == 0, err
    path = capture / "expected.json"
    expected = json.loads(path.read_text())
    assert "crash_verdict" not in expected  # patched alone judges none
    path.write_text(json.dumps({**expected, "crash_verdict": "no crash"}))
    code, said, _ = run_cli(capsys, "check", capture)
    said = " ".join(said.split())
    assert code == 0, said
    assert "matches expected.json; not checked: its crash verdict 'no crash', which this replay " \
        "does not judge (it replayed no variant of the engine's code, upstream or vllm)" \
        in said, said
