"""Round 13 (issue 38): every number the command line takes is read by one reader
(:mod:`forensics.commands._numbers`), and the vLLM version a capture declares is read once,
with checks (:mod:`forensics.manifest_facts`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
CLEAN = str(ROOT / "data" / "clean.capture")
#: text ``int()`` or ``float()`` took as a number: digits of other scripts, a superscript,
#: underscores, a sign, spaces, an exponent, ``nan`` and ``inf``
NOT_ASCII_NUMBERS = ["\u0663", "\u0661\u0665", "\uff13", "1_000", "+3", " 3", "3\n", "1e3",
                     "nan", "inf", "0x10"]
#: every numeric option: (command words before it, option, a value in range)
COUNTS = [(["simulate", "clean", "-o", "{out}"], "--steps", "3"),
          (["simulate", "clean", "-o", "{out}"], "--batch", "3"),
          (["simulate", "clean", "-o", "{out}"], "--spec-tokens", "2"),
          (["simulate", "clean", "-o", "{out}"], "--vocab", "1000"),
          (["simulate", "clean", "-o", "{out}"], "--seed", "7"),
          (["triage", CLEAN], "--workers", "1"),
          (["triage", CLEAN], "--split-records", "5000"),
          (["plot", CLEAN, "-o", "{out}.png"], "--dpi", "100"),
          (["repro", CLEAN, "-o", "{out}.py"], "--deadline", "30")]
SECONDS = (["kernels", CLEAN], "--deadline", "1.5")


def _argv(words: list[str], option: str, value: str, out: Path) -> list[str]:
    return [w.format(out=out) for w in words] + [option, value]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``argv``: exit 2 and one line on stderr, nothing on stdout; that line."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("text", NOT_ASCII_NUMBERS)
@pytest.mark.parametrize(("words", "option", "good"), [*COUNTS, SECONDS])
def test_a_number_not_in_ascii_digits_is_refused_in_one_line(
        words: list[str], option: str, good: str, text: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``int('٣')`` is 3 and ``float('١.٥')`` 1.5: ``simulate --steps ٣`` ran 3 steps,
    ``kernels --deadline ١.٥`` waited 1.5 s. Every numeric option takes ASCII digits only: one
    line naming the option, the value and the range, exit 2, nothing written."""
    line = _refused(_argv(words, option, text, tmp_path / "o"), capsys)
    assert line.startswith(f"forensics {words[0]}: error: {option} '"), line
    assert " is not " in line and " from " in line and " in ASCII digits" in line, line
    assert line.endswith(f"; give one, e.g. {option} " + line.rsplit(" ", 1)[1]), line
    assert "\n" not in line and not list(tmp_path.iterdir())


@pytest.mark.parametrize(("words", "option", "value"), [
    (COUNTS[0][0], "--steps", "0"), (COUNTS[0][0], "--steps", "1000001"),
    (COUNTS[0][0], "--batch", "65537"), (COUNTS[0][0], "--spec-tokens", "-1"),
    (COUNTS[0][0], "--vocab", "1"), (COUNTS[0][0], "--vocab", str(2**24 + 1)),
    (COUNTS[0][0], "--seed", str(2**63)), (COUNTS[0][0], "--seed", "-1"),
    (["triage", CLEAN], "--workers", "0"), (["triage", CLEAN], "--workers", "100000"),
    (["triage", CLEAN], "--split-records", "1"),
    (["triage", CLEAN], "--split-records", "1000000001"),
    (["repro", CLEAN, "-o", "{out}.py"], "--deadline", "3601"),
    (["kernels", CLEAN], "--deadline", "0"), (["kernels", CLEAN], "--deadline", "86400.001"),
    (["kernels", CLEAN], "--deadline", "0.0001"), (["kernels", CLEAN], "--deadline", "1e308"),
    (["kernels", CLEAN], "--deadline", "-1"), (["plot", CLEAN, "-o", "{out}.png"], "--dpi", "5")])
def test_a_number_past_its_range_is_refused_before_anything_runs(
        words: list[str], option: str, value: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A count that sizes a loop (``--split-records 1``: a piece per step, each opening the
    capture), a seed past 64 bits, a deadline of a day and more: refused at the command line,
    naming the range."""
    line = _refused(_argv(words, option, value, tmp_path / "o"), capsys)
    assert f"error: {option} '{value}' is not " in line, line
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("words", "option", "good"), [*COUNTS, SECONDS])
def test_a_number_in_range_is_read_as_that_number(words: list[str], option: str, good: str,
                                                   tmp_path: Path) -> None:
    args = build_parser().parse_args(_argv(words, option, good, tmp_path / "o"))
    value = getattr(args, option.lstrip("-").replace("-", "_"))
    assert value == (float(good) if option == "--deadline" and words[0] == "kernels"
                     else int(good))


@pytest.mark.parametrize("value", ["3\x1b]0;owned\x07", "\u202e3", "3\u200b", "3'x"])
def test_the_refused_value_is_inert(value: str, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The value stands escaped between quotes (``escaping.quoted``): it cannot set the
    terminal's title, reorder the line or end its quotes."""
    line = _refused(_argv(COUNTS[0][0], "--steps", value, tmp_path / "o"), capsys)
    assert value not in line and "\x1b" not in line and "\u202e" not in line
    assert line.count("'") == 2, line


def test_a_huge_value_is_cut_in_the_message(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``int()`` of 4,300 digits and more raised, and argparse quoted the value whole."""
    line = _refused(_argv(COUNTS[0][0], "--steps", "9" * 100_000, tmp_path / "o"), capsys)
    assert len(line) < 400 and "more characters" in line, line


@pytest.mark.parametrize("kind", ["timeline", "heatmap", "histogram", "verdicts"])
def test_the_coarsest_resolution_draws_every_kind(kind: str, tmp_path: Path) -> None:
    """``--dpi 1`` to ``5`` was in range and FreeType's error in the middle of the save
    (``invalid ppem value``, an internal error): the coarsest resolution taken now draws every
    kind, and one below it is refused by the API too."""
    import forensics
    from forensics.errors import ConfigurationError
    from forensics.present import plots
    from forensics.present.style import MIN_DPI

    result = forensics.replay(forensics.load(CLEAN), variants=["upstream"])
    plots.save(plots.plot(result, kind), tmp_path / "f.png", dpi=MIN_DPI)
    assert (tmp_path / "f.png").stat().st_size > 0
    with pytest.raises(ConfigurationError, match=f"from {MIN_DPI} to"):
        plots.save(plots.plot(result, kind), tmp_path / "g.png", dpi=5)


# ------------------------------------------------ the vLLM version a capture declares (T55c-d)

#: versions a capture may declare that name no release: the wrong type, control characters,
#: another script's digits, full-width digits, 10 KB of text, a long local label on a release
HOSTILE_VERSIONS = [{"x": [1]}, ["0.32.0"], 32, 0.32, True, "0.32.0\x1b]0;owned\x07",
                    "\u0660.\u0663\u0662.\u0660", "\uff10.\uff13\uff12.\uff10",
                    "0.32." + "9" * 10_000, "0.32.0+" + "a" * 10_000, "0.32.0\n0.31.0"]


def _manifest(version: object) -> dict[str, object]:
    return {"versions": {"vllm": version, "torch": "2.14.0"},
            "model": {"num_speculative_tokens": 2}}


@pytest.mark.parametrize("version", HOSTILE_VERSIONS, ids=range(len(HOSTILE_VERSIONS)))
def test_every_reader_takes_a_malformed_version_as_unknown(version: object) -> None:
    """Triage's row checked the version's type and length only (an escape sequence or another
    script's digits stood as the version); the known-issue evidence, the clamp judgement and
    the conclusion read ``versions.vllm`` raw. One reading now: unknown for all four."""
    from forensics.fleet.facts import manifest_facts
    from forensics.known.evidence import facts_of
    from forensics.manifest_facts import vllm_version

    assert vllm_version(_manifest(version)) == (
        "unknown", "manifest field versions.vllm is not a string naming a version as vLLM's "
                   "releases spell it (such as 0.33.0, in ASCII digits, at most 256 "
                   "characters): read as unknown")
    facts, refused = manifest_facts(_manifest(version))
    assert facts["vllm"] == "unknown" and "versions.vllm" in refused
    assert "vllm" not in facts_of(_manifest(version))


@pytest.mark.parametrize("version", ["0.32.0", "0.33.1.dev5+g1234.d20260101", "0.32.0+cpu"])
def test_a_version_as_releases_spell_it_is_read_by_every_reader(version: str) -> None:
    from forensics.fleet.facts import manifest_facts
    from forensics.known.evidence import facts_of

    assert manifest_facts(_manifest(version)) == (manifest_facts(_manifest(version))[0], {})
    assert manifest_facts(_manifest(version))[0]["vllm"] == version
    assert facts_of(_manifest(version))["vllm"] == version


@pytest.mark.parametrize("version", [None, "", "unknown"])
def test_a_version_missing_or_named_unknown_is_no_refusal(version: object) -> None:
    """An imported capture names its version ``unknown`` until ``--set`` gives one: unknown,
    never refused (and never compared with a catalogue's version as if it were one)."""
    from forensics.fleet.facts import manifest_facts
    from forensics.known.evidence import facts_of

    facts, refused = manifest_facts(_manifest(version))
    assert facts["vllm"] == "unknown" and refused == {}
    assert "vllm" not in facts_of(_manifest(version))


@pytest.mark.parametrize("version", [v for v in HOSTILE_VERSIONS if isinstance(v, str)])
def test_a_crash_dumps_malformed_version_states_none(version: str) -> None:
    from forensics.known.evidence import dump_facts

    event = {"kind": "crash_dump", "config": {"vllm": version, "model": "m"}}
    assert dump_facts([event]) == {"model": "m"}
    assert dump_facts([{**event, "config": {"vllm": "0.32.0"}}]) == {"vllm": "0.32.0"}


def test_a_long_version_never_decides_the_clamp() -> None:
    """``0.32.0+`` and 10,000 letters is a release's spelling: vLLM 0.32 clamps, so the -1 the
    embedding read as 0 was named "clamped to token 0" on the word of a version no vLLM
    writes. Past 256 characters it is unknown whether it clamps, and no finding says so."""
    from test_round6_judge import _clamped_capture

    assert _clamped_capture("0.32.0+cpu").clamps is True  # the same, named as vLLM does
    result = _clamped_capture("0.32.0+" + "a" * 10_000)
    assert result.clamps is None and result.findings == []


def test_the_clamp_of_an_unknown_version_says_it_is_unknown() -> None:
    """The reason named no version "its manifest names no vLLM version" also when the
    manifest named one of the wrong type."""
    from forensics.judge.clamp import clamps

    known, why = clamps("", "v1", True)
    assert known is None and "its vLLM version is unknown" in why


@pytest.mark.parametrize("version", HOSTILE_VERSIONS, ids=range(len(HOSTILE_VERSIONS)))
def test_the_conclusion_says_the_version_is_unknown(version: object) -> None:
    """``The capture comes from vLLM {'x': [1]}``, ``... from vLLM ٠.٣٢.٠`` (read as 0.32.0),
    10 KB of a version twice: the conclusion said what the manifest held as the version."""
    from forensics.present.capture_facts import facts_sentence, summary_facts, version_sentence
    from forensics.store.reader import load

    summary = load(CLEAN).summary()
    summary["manifest"] = {**summary["manifest"], **_manifest(version)}
    facts = summary_facts(summary)
    assert facts["vllm"] == "unknown" and facts["torch"] == "2.14.0"
    # round 15 (T78a): an unknown version is said to be unknown, never named
    said = version_sentence(facts, ["upstream", "patched"])
    assert said.startswith("The vLLM version of the capture is unknown") and len(said) < 400
    sentence = facts_sentence(facts)
    assert "vllm unknown;" in sentence and len(sentence) < 1000, sentence
