"""Hostile input, round 8 (T39a, T39b): what ``check`` says of an ``expected.json`` that wants a
false sentence printed, and what ``plot`` does with a resolution or ``MPLBACKEND`` it cannot
use.

``check`` (and the pytest plugin) compared a crash verdict it never computed: an
``expected.json`` naming no variant that was replayed got "crash verdict: expected
'explained', got None" (exit 1, a difference that is none). It took a ``crash_verdict`` that is
no verdict (``"bogus"``) while refusing a number for not being one of the three, took ``NaN``
and ``Infinity`` (which Python's parser reads) as a first finding's value (a difference no
replay can clear), and showed the keys a first finding did not hold as ``None`` ("expected
None in None at step 13 rank None ...", as if the file said so).

``plot --dpi 0`` (or ``-5``) was matplotlib's internal error, ``--dpi 100000`` "out of memory;
the input is too large for this machine" (the input was not; the resolution was), and a
resolution in between asked for gigabytes. A ``MPLBACKEND`` matplotlib cannot load
(``bogus``, ``module://missing``) was an internal error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.cli import main
from forensics.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "data" / "incident-b-vocab-sentinel.capture"
VERDICTS = {"embedding": "violation", "async_output": "violation", "batch_change": "ok",
            "prepare_input_ids": "ok"}


def _with_expected(tmp_path: Path, expected: str) -> Path:
    """A copy of incident B whose ``expected.json`` is the text ``expected``."""
    capture = tmp_path / "e.capture"
    shutil.copytree(INCIDENT, capture)
    (capture / "expected.json").write_text(expected)
    return capture


def _check(capture: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["check", str(capture), *argv])
    out = capsys.readouterr()
    return code, out.out + out.err


# ------------------------------------------------------------------ 1. check (T39a)


def test_a_crash_verdict_not_computed_is_no_difference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An expected.json of no variant (or a --variant it does not list) replays none of its
    variants: no crash verdict is computed, so none differs; the variants it lacks are said."""
    capture = _with_expected(tmp_path, json.dumps(
        {"format": 1, "verdicts": {}, "first_finding": {}, "crash_verdict": "explained"}))
    code, text = _check(capture, capsys, "--json")
    differences = json.loads(text)["differences"]
    assert code == 1
    assert differences == [  # --accept writes both default models (T109c)
        "variant 'upstream' is not in expected.json; regenerate it with forensics check "
        "--accept (in a test suite: --forensics-regen)",
        "variant 'patched' is not in expected.json; regenerate it with forensics check "
        "--accept (in a test suite: --forensics-regen)"], differences


def test_a_crash_verdict_that_differs_is_still_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The fix above leaves a computed verdict compared: 'no crash' against incident B's
    'explained' is a difference."""
    capture = _with_expected(tmp_path, json.dumps(
        {"format": 1, "verdicts": {"upstream": VERDICTS}, "first_finding": {},
         "crash_verdict": "no crash"}))
    code, text = _check(capture, capsys, "--variant", "upstream")
    assert code == 1 and "crash verdict: expected 'no crash', got 'explained'" in text, text


@pytest.mark.parametrize("field, value, said", [
    ("crash_verdict", '"bogus"', "field 'crash_verdict' must be a verdict string"),
    ("first_finding", '{"upstream": {"value": NaN, "site": "async_output"}}',
     "field 'first_finding.upstream' must be null or an object of plain values"),
    ("first_finding", '{"upstream": {"step": Infinity}}',
     "field 'first_finding.upstream' must be null or an object of plain values"),
    ("first_finding", '{"upstream": {"value": -Infinity}}',
     "field 'first_finding.upstream' must be null or an object of plain values"),
])
def test_an_expected_value_no_replay_gives_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: str,
        said: str) -> None:
    """A crash verdict that is none of the three, and a first finding's number that is not
    finite, are one line naming the file and the field (exit 2), not a difference."""
    verdicts = json.dumps(VERDICTS)
    first = "" if field == "first_finding" else '"first_finding": {}, '  # each key once
    text = f'{{"format": 1, "verdicts": {{"upstream": {verdicts}}}, {first}"{field}": {value}}}'
    capture = _with_expected(tmp_path, text)
    code, out = _check(capture, capsys, "--variant", "upstream")
    assert code == 2, out
    assert said in out and "expected.json" in out and len(out.strip().splitlines()) == 1, out


def test_a_key_an_expected_finding_lacks_is_unknown_never_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A first finding that holds only some keys is compared on those; the others are shown
    as "unknown", never as a None the file does not say."""
    capture = _with_expected(tmp_path, json.dumps(
        {"format": 1, "verdicts": {"upstream": VERDICTS},
         "first_finding": {"upstream": {"site": "async_output", "value": 248321}}}))
    code, text = _check(capture, capsys, "--variant", "upstream")
    [line] = [line for line in text.splitlines() if "first finding changed" in line]
    assert code == 1
    assert "expected unknown in async_output at step unknown rank unknown row unknown " \
           "element unknown (unknown=248321), got out_of_bounds in async_output at step 13" \
           in line, line
    assert "None" not in line and line.endswith("value 248321 -> 248320"), line


# ------------------------------------------------------------------ 2. plot (T39b)


@pytest.mark.parametrize("dpi", ["0", "-5", "100000", "nan", "²", "1201"])
def test_a_resolution_past_its_range_is_one_line_before_the_replay(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], dpi: str) -> None:
    assert main(["plot", str(INCIDENT), "-o", str(tmp_path / "f.png"), f"--dpi={dpi}"]) == 2
    err = capsys.readouterr().err
    assert f"--dpi '{dpi}' is not a resolution from 10 to 1200" in err, err
    assert "internal error" not in err and "out of memory" not in err, err
    assert not list(tmp_path.iterdir())


def test_the_api_holds_a_resolution_to_the_same_range(tmp_path: Path) -> None:
    """``plots.save`` (the API the command calls) refuses what ``--dpi`` refuses, and writes
    nothing."""
    import forensics
    from forensics.present import plots

    result = forensics.replay(forensics.load(INCIDENT), variants=["upstream"])
    for dpi in (0, -1, 1201, 10**6):
        ax = plots.plot(result, "verdicts")
        with pytest.raises(ConfigurationError, match="is not a resolution from 10 to 1200"):
            plots.save(ax, tmp_path / "f.png", dpi=dpi)
    assert not list(tmp_path.iterdir())
    ax = plots.plot(result, "verdicts")
    plots.save(ax, tmp_path / "f.png", dpi=plots.MAX_DPI)
    assert (tmp_path / "f.png").stat().st_size > 0


@pytest.mark.parametrize("backend", ["bogus", "module://forensics_no_such_backend"])
def test_a_backend_matplotlib_cannot_load_is_one_line(
        tmp_path: Path, backend: str) -> None:
    """Run in a process of its own (matplotlib reads ``MPLBACKEND`` once, when imported)."""
    done = subprocess.run(
        [sys.executable, "-m", "forensics.cli", "plot", str(INCIDENT), "-o",
         str(tmp_path / "f.png")], capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "MPLBACKEND": backend})
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"forensics plot: error: MPLBACKEND='{backend}' is no matplotlib "
                           "backend this Python can load"), line
    assert line.endswith("unset it or give one such as Agg"), line
    assert not (tmp_path / "f.png").exists()


# ------------------------------------------------------------------ 3. strict JSON (T39c)


def _strict(text: str) -> object:
    """``text`` parsed as strict JSON (Python's parser takes NaN and Infinity: refused)."""
    def refuse(constant: str) -> object:
        raise AssertionError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("argv", [["replay", "--json"], ["inspect", "--json"],
                                  ["summary", "--format", "json"], ["known", "--json"],
                                  ["check", "--json"]])
def test_every_json_of_a_manifest_of_nan_and_infinity_is_strict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """``replay --json`` copied the manifest's facts (its conclusion's capture section) with
    ``json.dumps``: a manifest's ``NaN`` (which Python's parser reads) came out as ``NaN``, which
    no strict parser takes. Every command's JSON writes it as the text "nan"."""
    capture = tmp_path / "nan.capture"
    shutil.copytree(INCIDENT, capture)
    manifest = json.loads((capture / "manifest.json").read_text())
    manifest["model"].update(vocab_size=float("nan"), num_embeddings=float("inf"),
                             num_speculative_tokens=float("-inf"))
    manifest["versions"]["vllm"] = float("nan")
    manifest.update(notes=float("nan"), runner=float("inf"), created=float("nan"))
    (capture / "manifest.json").write_text(json.dumps(manifest))
    code = main([argv[0], str(capture), *argv[1:]])
    out = capsys.readouterr().out
    assert code in (0, 1)
    _strict(out)
    assert "NaN" not in out and "Infinity" not in out


# ---------------------------------------------- 4. a manifest's NaN in a derived capture (T39d)


@pytest.mark.parametrize("argv", [["shrink"], ["redact"], ["redact", "--keep-manifest", "model"],
                                  ["redact", "--keep-manifest", "notes"]])
def test_a_capture_whose_manifest_holds_nan_is_shrunk_and_redacted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """Every reader takes a manifest's ``NaN``, ``Infinity`` and ``1e400`` (Python's parser
    does), but ``shrink`` and ``redact --keep-manifest`` wrote them again and ended in
    "manifest is not JSON-serialisable: Out of range float values are not JSON compliant" (no
    file, no field, no fix). The manifest reads them as their text, so the derived capture
    is written, holding strict JSON."""
    capture = tmp_path / "nan.capture"
    shutil.copytree(INCIDENT, capture)
    text = (capture / "manifest.json").read_text()
    text = text.replace('"vocab_size": 248320', '"vocab_size": NaN')
    text = text.replace('"max_num_seqs": 4', '"max_num_seqs": 1e400')
    text = text.replace('"notes": "', '"x": -Infinity, "notes": "')
    (capture / "manifest.json").write_text(text)
    out = tmp_path / "out.capture"
    code = main([argv[0], str(capture), "-o", str(out), *argv[1:]])
    err = capsys.readouterr().err
    assert code == 0, err
    written = _strict((out / "manifest.json").read_text())
    assert isinstance(written, dict)
    if argv[0] == "shrink" or "model" in argv:
        assert written["model"]["vocab_size"] == "nan"
        assert written["model"]["max_num_seqs"] == "inf"
    assert main(["inspect", str(out)]) == 0


def test_a_manifest_number_no_json_holds_is_read_as_its_text(tmp_path: Path) -> None:
    """The reader's view of such a manifest (what every command shows): the text, never a
    float that no JSON holds; a finite number is read as before."""
    from forensics.store.manifest import read_manifest

    capture = tmp_path / "nan.capture"
    shutil.copytree(INCIDENT, capture)
    (capture / "manifest.json").write_text(
        '{"format": 1, "model": {"a": NaN, "b": Infinity, "c": -Infinity, "d": 1e400, '
        '"e": 2.5, "f": -0.0, "g": 7}}')
    assert read_manifest(capture)["model"] == {"a": "nan", "b": "inf", "c": "-inf",
                                               "d": "inf", "e": 2.5, "f": -0.0, "g": 7}


@pytest.mark.parametrize("argv", [["shrink"], ["redact", "--keep-manifest", "events.extra"]])
def test_a_capture_whose_events_hold_nan_is_shrunk_and_redacted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """So with an event's field: ``shrink`` and ``redact --keep-manifest events.extra`` of a
    capture whose assert event holds ``"extra": Infinity`` ended in "event is not
    JSON-serialisable"; the event is read (and written) with the text "inf"."""
    capture = tmp_path / "nan.capture"
    shutil.copytree(INCIDENT, capture)
    events = capture / "events-w0.jsonl"
    lines = events.read_text().splitlines()
    lines[0] = lines[0][:-1] + ', "extra": Infinity, "more": NaN}'
    events.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.capture"
    code = main([argv[0], str(capture), "-o", str(out), *argv[1:]])
    err = capsys.readouterr().err
    assert code == 0, err
    written = [_strict(line) for line in (out / "events-w0.jsonl").read_text().splitlines()]
    assert {"extra": "inf"}.items() <= written[0].items(), written  # type: ignore[union-attr]


# ------------------------------------------------------------------ 5. simulate (T39e)


@pytest.mark.parametrize("steps", ["99999999999999999999", "1000001"])
def test_simulate_refuses_steps_past_its_cap_before_drawing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], steps: str) -> None:
    """``simulate --steps`` of 20 digits ran for ever (writing until the disk was full): the
    steps are held to :data:`MAX_STEPS` (four times the soak scenario's) in one line, and
    nothing is written."""
    from forensics.simulator.scenarios import MAX_STEPS, SCENARIOS, configure

    assert max(sc.steps for sc in SCENARIOS.values()) * 4 == MAX_STEPS
    code = main(["simulate", "clean", "-o", str(tmp_path / "s.capture"), "--steps", steps])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--steps '{steps}' is not a number of steps from 1 to 1000000" in err, err
    assert not list(tmp_path.iterdir())
    with pytest.raises(ConfigurationError, match="steps must be at most"):
        configure("soak", steps=MAX_STEPS + 1)
    assert configure("soak", steps=MAX_STEPS).steps == MAX_STEPS


# ------------------------------------------------------------------ 6. findings (T39f)


def test_a_step_range_that_ends_before_it_starts_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``findings --steps 5:1`` kept no step and said "no findings" of a capture whose steps 1
    to 5 may hold some; it is one line naming the range and the fix. A range of one step,
    and an open end, are read as before."""
    code = main(["findings", str(INCIDENT), "--steps", "14:13"])
    out = capsys.readouterr()
    assert code == 2 and "no findings" not in out.out
    assert "--steps '14:13' ends before it starts; give A <= B, such as --steps 13:14" \
        in out.err, out.err
    for steps in ("13:14", "13:13", "13", "13:", ":13"):
        assert main(["findings", str(INCIDENT), "--steps", steps]) == 0
        assert "async_output" in capsys.readouterr().out, steps


# ------------------------------------------- 7. redact keeps what says the engine died (T39g)

CLEAN = ROOT / "data" / "clean.capture"
#: the events the probe writes when its engine fails (none is in the log importer's kinds)
PROBE_FAILURE = [
    {"kind": "probe_start", "pid": 77, "step": 0, "rank": 0},
    {"kind": "engine_exception", "where": "execute_model", "step": 3, "rank": 0,
     "error": "RuntimeError: CUDA error: device-side assert triggered"},
    {"kind": "guard_violation", "step": 4, "rank": 0, "message": "index out of range"},
    {"kind": "crash_dump", "step": 5, "rank": 0, "message": "dump"},
]


def _failed_engine(tmp_path: Path, events: list[dict[str, object]]) -> Path:
    """``clean.capture`` (no finding) whose only events are ``events``."""
    capture = tmp_path / "died.capture"
    shutil.copytree(CLEAN, capture)
    for old in capture.glob("events-*.jsonl"):
        old.unlink()
    (capture / "events-w0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return capture


def _crash_verdict(capture: Path) -> str:
    import forensics
    from forensics.known import crash_verdict_of

    return crash_verdict_of(forensics.replay(forensics.load(capture), variants=["upstream"]))


@pytest.mark.parametrize("events", [PROBE_FAILURE[:1], PROBE_FAILURE[1:2], PROBE_FAILURE[2:3],
                                    PROBE_FAILURE[3:], PROBE_FAILURE])
def test_a_redacted_capture_of_a_failed_engine_says_it_failed(
        tmp_path: Path, events: list[dict[str, object]]) -> None:
    """``redact`` kept only the log importer's event kinds: the probe's own
    ``engine_exception``, a guard's ``guard_violation``, an imported ``crash_dump`` and the
    ``probe_start`` of a process that died became ``redacted``, and the shared capture of an
    engine that died said "no crash" and "the capture shows no failure to report". Their kinds
    are kept (the exception's text through the public error words), so the crash verdict is
    the original's."""
    from forensics.share.redaction import redact

    capture = _failed_engine(tmp_path, events)
    assert _crash_verdict(capture) == "unexplained"
    out = redact(capture, tmp_path / "shared.capture").path
    written = (out / "events-w0.jsonl").read_text()
    kinds = [json.loads(line)["kind"] for line in written.splitlines()]
    assert kinds == [e["kind"] for e in events]
    assert _crash_verdict(out) == "unexplained"
    if PROBE_FAILURE[1] in events:
        assert "RuntimeError: CUDA error: device-side assert triggered" in written


def test_a_derived_capture_whose_crash_verdict_differs_is_not_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a redaction drops, the capture it writes is replayed and compared with the
    original on its crash verdict too (it was compared on verdicts and first findings only):
    one whose failure events went is refused, nothing written."""
    from forensics.share import redaction
    from forensics.share.evidence import EvidenceChangedError

    capture = _failed_engine(tmp_path, PROBE_FAILURE[1:2])
    monkeypatch.setattr(redaction.Redactor, "event",
                        lambda self, event: {"kind": "redacted", "step": event["step"]})
    with pytest.raises(EvidenceChangedError, match="crash verdict: expected 'unexplained', "
                                                   "got 'no crash'"):
        redaction.redact(capture, tmp_path / "shared.capture")
    assert not (tmp_path / "shared.capture").exists()


# --------------------------------------- 8. triage says a failed engine failed, as known does


@pytest.mark.parametrize("events", [PROBE_FAILURE[:1], PROBE_FAILURE[2:3], PROBE_FAILURE[3:]])
def test_triage_groups_a_failed_engine_as_known_judges_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], events: list[dict[str, object]]
        ) -> None:
    """Triage read its own list of crash kinds: a capture whose only sign of failure was an
    imported ``crash_dump``, a guard's ``guard_violation`` or the ``probe_start`` of a process
    that died was grouped "clean" while ``known`` and ``summary`` said "unexplained". Its
    ``crashed`` fact is now the known-issue evidence's."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    capture = _failed_engine(folder, events)
    assert _crash_verdict(capture) == "unexplained"
    assert main(["triage", str(folder), "--format", "json", "--workers", "1"]) == 0
    answer = json.loads(capsys.readouterr().out)
    [group] = answer["groups"]
    died = events == PROBE_FAILURE[:1]  # no crash event: it died, killed or crashed (T165b)
    assert group["title"].endswith(": unexplained death (killed or crashed)" if died
                                   else ": unexplained crash"), group
