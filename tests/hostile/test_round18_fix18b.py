"""Round 18, fix 18b: ``replay --variant vllm+PATH.diff`` held to what it ran (an embedding-only
capture under a diff of other files, the patched copies' imports, one diff given twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.cli import main

DATA = Path(__file__).resolve().parents[2] / "data"
PATCHES = DATA / "patches"

#: a diff that changes a vLLM module no V1 site's replay runs (the sampler), nothing else
SAMPLER_DIFF = (
    "--- a/vllm/v1/sample/sampler.py\n+++ b/vllm/v1/sample/sampler.py\n"
    "@@ -3,3 +3,4 @@\n"
    ' """A layer that samples the next tokens from the model\'s outputs."""\n'
    " \n import torch\n+# the fix of the sentinel, where no V1 site's replay runs it\n")


def _sink_alone(capture: Path, out: Path, runner: str | None = "V1") -> Path:
    """A capture of ``capture``'s ``embedding`` records alone, its manifest kept (stating
    ``runner`` when given: the sink alone does not say which runner wrote it)."""
    from forensics.store.reader import load
    from forensics.store.writer import write_capture

    source = load(capture)
    stated = {} if runner is None else {"runner": runner}
    return write_capture(out, list(source.records(site="embedding")),
                         {**source.manifest, **stated})


@pytest.mark.parametrize("diff", ["sampler", "stale-prev-rows.diff", "v2-index-guard.diff"])
def test_an_embedding_only_capture_under_a_diff_it_does_not_run_is_refused(
        diff: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T105a: incident B's ``embedding`` records alone (a V1 capture: its manifest says so),
    replayed with a diff that leaves the embedding's module as installed (the sampler alone;
    the bundled stale-rows guard, of the batch change and the runner; the V2 guard): T101a
    exempted the sink, so the replay ran the installed embedding under the diff's name and
    judged it as if the diff ran ("vllm+sampler.diff leaves embedding in violation"). Now one
    line names the diff, the file the replay runs and those the diff changes; exit 2."""
    capture = _sink_alone(DATA / "incident-b-vocab-sentinel.capture", tmp_path / "sink.capture")
    path = PATCHES / diff
    if diff == "sampler":
        path = tmp_path / "sampler.diff"
        path.write_text(SAMPLER_DIFF, encoding="utf-8")
    code = main(["replay", str(capture), "--variant", f"vllm+{path}"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "violation" not in out and "resolves" not in out
    assert len(err.strip().splitlines()) == 1
    line = " ".join(err.split())
    assert f"{path.name}: a V1 capture of 'embedding' records alone (no other site's) runs " \
           "vLLM's code in vllm/model_executor/layers/vocab_parallel_embedding.py only, which " \
           "the diff does not change (it changes vllm/" in line
    assert "replay this capture with 'vllm'" in line
    unstated = _sink_alone(DATA / "incident-b-vocab-sentinel.capture", tmp_path / "u.capture",
                           None)
    assert main(["replay", str(unstated), "--variant", f"vllm+{path}"]) == 2
    assert f"{path.name}: a capture of 'embedding' records alone" in capsys.readouterr().err


def test_a_v2_capture_under_the_v2_guard_still_runs(
        capsys: pytest.CaptureFixture[str]) -> None:
    """T105a: a V2 capture (its kernel sites and the sink) under the V2 guard still replays,
    its ``embedding`` records through the installed code (T101a)."""
    guard = f"vllm+{PATCHES / 'v2-index-guard.diff'}"
    assert main(["replay", str(DATA / "v2-vocab-sample.capture"), "--variant", guard]) == 0
    out, err = capsys.readouterr()
    assert "embedding" in out and not err


def _diff_of(path: str, old: str, new: str) -> str:
    """A unified diff of the installed vLLM's ``path`` with ``old`` made ``new``."""
    import difflib

    from forensics.variants.vllm_diff import vllm_root

    text = (vllm_root() / "vllm" / path).read_text(encoding="utf-8")
    assert old in text
    return "".join(difflib.unified_diff(text.splitlines(True),
                                        text.replace(old, new, 1).splitlines(True),
                                        f"a/vllm/{path}", f"b/vllm/{path}"))


@pytest.mark.parametrize("command", ["replay", "summary", "report"])
def test_one_diff_at_two_paths_is_named_as_one_diff_given_twice(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T105c: ``--variant vllm+x/fix.diff --variant vllm+y/fix.diff``, two copies of one diff:
    ``summary`` and ``report`` named both ``vllm+fix.diff@DIGEST`` and failed with "replay
    needs distinct variant names, got ['vllm+fix.diff@...', 'vllm+fix.diff@...']" (``report``
    inside a notebook's traceback), naming neither path; ``replay`` ran the same code twice.
    Now one line names both paths, says they hold the same diff and to give it once; exit 2."""
    text = (PATCHES / "stale-prev-rows.diff").read_text(encoding="utf-8")
    paths = [tmp_path / folder / "fix.diff" for folder in ("x", "y")]
    for path in paths:
        path.parent.mkdir()
        path.write_text(text, encoding="utf-8")
    args = [command, str(DATA / "clean.capture")]
    for path in paths:
        args += ["--variant", f"vllm+{path}"]
    if command == "report":
        args += ["-o", str(tmp_path / "r.html")]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "violation" not in out
    line = " ".join(err.split())
    assert "distinct variant names" not in line and "notebook" not in line
    assert (f"the variants 'vllm+{paths[0]}' and 'vllm+{paths[1]}' hold the same diff "
            "('vllm+fix.diff@") in line
    assert "give it once, or rename one of the files" in line
    assert not (tmp_path / "r.html").exists()


def test_two_diffs_of_one_name_and_one_diff_under_two_names_still_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """T105c: two diffs of one file name but other contents (two shared names) are two
    variants, as before; so is one diff under two file names."""
    guard = (PATCHES / "stale-prev-rows.diff").read_text(encoding="utf-8")
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    (tmp_path / "x" / "fix.diff").write_text(guard, encoding="utf-8")
    (tmp_path / "y" / "fix.diff").write_text("Another fix.\n\n" + guard, encoding="utf-8")
    (tmp_path / "y" / "other.diff").write_text(guard, encoding="utf-8")
    for second in ("fix.diff", "other.diff"):
        assert main(["summary", str(DATA / "clean.capture"), "--variant",
                     f"vllm+{tmp_path / 'x' / 'fix.diff'}", "--variant",
                     f"vllm+{tmp_path / 'y' / second}"]) == 0, capsys.readouterr().err
        assert "vllm+fix.diff@" in capsys.readouterr().out


def test_the_replay_line_says_which_files_of_the_diff_ran(
        capsys: pytest.CaptureFixture[str]) -> None:
    """T105b: ``replay --variant vllm+stale-prev-rows.diff`` of incident A (the bundled diff
    changes ``spec_decode/utils.py`` and ``gpu_model_runner.py``; each patched copy imports the
    installed vLLM's other modules, the installed ``utils.py`` too). Its line named the diff as
    if all of it ran together; it now says which of its files ran and that every other module
    ran as installed, and the V2 guard's line names its kernel files."""
    capture = DATA / "incident-a-stale-prev-rows-confirmed.capture"
    assert main(["replay", str(capture), "--variant",
                 f"vllm+{PATCHES / 'stale-prev-rows.diff'}"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("no unresolved out-of-bounds finding; ran the diff's vllm/v1/spec_decode/utils.py, "
            "vllm/v1/worker/gpu_model_runner.py; every other vLLM module as installed") in text
    assert main(["replay", str(DATA / "v2-vocab-sample.capture"), "--variant",
                 f"vllm+{PATCHES / 'v2-index-guard.diff'}"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("ran the diff's vllm/v1/worker/gpu/input_batch.py, "
            "vllm/v1/worker/gpu/model_runner.py; every other vLLM module as installed") in text


def test_no_v1_sites_call_reaches_a_function_of_another_patched_module() -> None:
    """T105b: what the note rests on. Each V1 site's call (the adapters' callables) names no
    function of another of the four modules the V1 sites' replay patches, so a patched copy
    importing the installed one of another changes nothing a site runs: the runner's call of
    ``update_num_computed_tokens_for_batch_change`` lies in ``_prepare_inputs``, no site's."""
    import dataclasses
    import types

    from forensics.variants.vllm_adapters import MODULES, code_from

    code = code_from({})
    for field in dataclasses.fields(code):
        fn = getattr(code, field.name)
        fn = getattr(fn, "forward", fn) if isinstance(fn, type) else fn
        fn = getattr(fn, "embedding", fn) if isinstance(fn, type) else fn
        codes = [fn.__code__]
        names: set[str] = set()
        while codes:
            one = codes.pop()
            names.update(one.co_names)
            codes.extend(c for c in one.co_consts if isinstance(c, types.CodeType))
        reached = {name for name in names
                   if getattr(fn.__globals__.get(name), "__module__", fn.__module__)
                   in set(MODULES) - {fn.__module__}}
        assert not reached, (field.name, reached)
    runner = code_from({}).runner_prepare_input_ids.__globals__
    assert "update_num_computed_tokens_for_batch_change" in runner["GPUModelRunner"] \
        ._prepare_inputs.__code__.co_names
