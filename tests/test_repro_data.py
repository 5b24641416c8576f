"""``forensics repro`` writes a capture as data, never as code: a capture whose every string
(its folder's name, request ids, manifest notes and keys) holds code-breaking text gives a
pytest file with none of it, which runs nothing but the repro in a sandboxed folder; the data
file's loader refuses what the generator never writes; a call past its deadline fails with
"timed out after N s"; without vLLM the tests skip, saying why."""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import subprocess
import sys
import tokenize
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from incident_records import VOCAB, by_site, clean_step  # noqa: E402

from forensics.cli import main  # noqa: E402
from forensics.share.repro import script_text  # noqa: E402

#: a payload that leaves a file named PWNED in the working folder if it ever runs
PAYLOAD = "open('PWNED', 'w').close()"
#: text that ends every kind of Python string or comment, then runs PAYLOAD
BREAKERS = ('"""\n' + PAYLOAD + '\n"""', "'''\n" + PAYLOAD + "\n'''", "'\n" + PAYLOAD + "#",
            '"\n' + PAYLOAD + "#", "\\\n" + PAYLOAD, "\u2028" + PAYLOAD, "\u2029" + PAYLOAD,
            "\x0c\x0b\r" + PAYLOAD, "}}{0}{__import__('os')}" + PAYLOAD,
            "\x01\x1b[2J\x7f\x85\u202e\u2066\u200f" + PAYLOAD, "# -*- coding: rot13 -*-" + PAYLOAD)
HOSTILE = "".join(BREAKERS)
#: runs pytest with ``forensics`` unimportable: the repro must stand alone
WITHOUT_FORENSICS = ("import sys; sys.modules['forensics'] = None; import pytest; "
                     "sys.exit(pytest.main(sys.argv[1:]))")
#: the same, with ``vllm`` unimportable too
WITHOUT_VLLM = WITHOUT_FORENSICS.replace("import pytest;", "sys.modules['vllm'] = None; "
                                         "import pytest;")


def _hostile_records() -> list[Any]:
    """Two decode steps of three requests whose ids are hostile text; at step 1 a stale
    previous row (batch_change, prepare_input_ids) and the vocab_size sentinel (embedding)."""
    reqs = [f"req-{i}-{HOSTILE}" for i in range(3)]
    records = clean_step(0, reqs) + clean_step(1, reqs)
    for site in ("batch_change", "prepare_input_ids"):
        by_site(records, site, 1).fields["prev_positions"][1] = 3  # 3 previous rows
    by_site(records, "embedding", 1).fields["input_ids"][2] = VOCAB
    return records


def _all_text(source: str) -> list[str]:
    """Every string constant and comment of ``source``."""
    strings = [node.value for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    comments = [token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
                if token.type == tokenize.COMMENT]
    return strings + comments


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``forensics repro`` of a capture whose name, request ids and manifest are hostile."""
    from forensics.store.writer import write_capture

    folder = tmp_path_factory.mktemp("hostile")
    name = "x" + BREAKERS[0] + BREAKERS[1] + BREAKERS[-2] + ".capture"  # under 255 bytes
    capture = write_capture(folder / name, _hostile_records(), manifest={
        "notes": HOSTILE, "model": {"name": HOSTILE, "vocab_size": VOCAB},
        "simulation": {HOSTILE: HOSTILE}})
    sandbox = tmp_path_factory.mktemp("sandbox")
    script = sandbox / "test_repro.py"
    assert main(["repro", str(capture), "-o", str(script)]) == 0
    return script


def test_the_repro_of_a_hostile_capture_holds_none_of_its_text(hostile: Path) -> None:
    source = hostile.read_text(encoding="utf-8")
    assert source == script_text()  # the same file for every capture
    assert "PWNED" not in source and "req-0" not in source
    assert not [text for text in _all_text(source) if "PWNED" in text]
    data = json.loads(hostile.with_suffix(".json").read_text(encoding="utf-8"))
    assert hostile.with_suffix(".json").read_bytes().isascii()
    cases = data["cases"]
    assert [c["site"] for c in cases] == ["batch_change", "prepare_input_ids", "embedding"]
    # the hostile ids are data, kept exactly
    assert cases[0]["record"]["req_ids"]["value"] == [f"req-{i}-{HOSTILE}" for i in range(3)]


def test_the_repro_of_a_hostile_capture_runs_nothing_but_the_repro(hostile: Path) -> None:
    """Plain pytest on it in its sandbox folder, forensics unimportable: the three sites in
    violation fail on vLLM's own out-of-range access, and no payload ran."""
    sandbox = hostile.parent
    run = subprocess.run([sys.executable, "-c", WITHOUT_FORENSICS, "-p", "no:forensics",
                          "-p", "no:cacheprovider", "-q", "--junitxml=junit.xml",
                          "test_repro.py"], cwd=sandbox, capture_output=True, text=True,
                         timeout=1800, env={"PATH": "/usr/bin:/bin", "HOME": str(sandbox)})
    assert run.returncode == 1 and "3 failed" in run.stdout, run.stdout[-3000:]
    assert not list(sandbox.rglob("PWNED")) and not list(Path.cwd().glob("PWNED"))
    cases = ET.parse(sandbox / "junit.xml").getroot().iter("testcase")
    messages = {case.get("name"): (case.find("failure").get("message") or "")  # type: ignore
                for case in cases}
    assert (
        "out-of-range access in vllm.v1.spec_decode.utils.update_num_computed_tokens_for_"
        "batch_change: index 3 is out of bounds for dimension 0 with size 3; the capture's "
        "prev_positions[1] = 3 is outside [0, 3)"
    ) in messages["test_index_stays_in_range[batch_change-step1-rank0]"]
    assert "the capture's input_ids[2] = 248320 is outside [0, 248320)" in \
        messages["test_index_stays_in_range[embedding-step1-rank0]"]


# ------------------------------------------------------------- without vLLM: fake packages


def _fake_vllm(root: Path, version: str, forward: str) -> Path:
    """A ``vllm`` package of ``version`` under ``root`` whose embedding forward is ``forward``
    (the body of ``forward(self, input_)``)."""
    package = root / "vllm" / "model_executor" / "layers"
    package.mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    for folder in (root / "vllm" / "model_executor", package):
        (folder / "__init__.py").write_text("")
    (package / "vocab_parallel_embedding.py").write_text(
        "import time\n\n\nclass UnquantizedEmbeddingMethod:\n    pass\n\n\n"
        f"class VocabParallelEmbedding:\n    def forward(self, input_):\n        {forward}\n")
    return root


def _embedding_repro(folder: Path, deadline: int = 300) -> Path:
    """The pytest file with one embedding case (the vocab_size sentinel at input_ids[2])."""
    ids = [1, 2, VOCAB, 3]
    case = {"site": "embedding", "function": "VocabParallelEmbedding.forward", "step": 4,
            "rank": 0, "facts": {"vocab_size": VOCAB},
            "record": {"input_ids": {"kind": "tensor", "value": {
                           "dtype": "int64", "shape": [4], "values": ids}},
                       "num_embeddings": {"kind": "int", "value": VOCAB}},
            "finding": {"text": "the vocab_size sentinel", "tensor": "input_ids", "element": 2,
                        "value": VOCAB, "lower": 0, "upper": VOCAB, "indexed": "embedding rows"}}
    data = {"format": 1, "vllm": {"needed": "0.33", "capture": "0.33.0"},
            "deadline_s": deadline, "cases": [case]}
    (folder / "test_repro.json").write_text(json.dumps(data))
    (folder / "test_repro.py").write_text(script_text())
    return folder / "test_repro.py"


def _run(folder: Path, pythonpath: Path | None) -> subprocess.CompletedProcess[str]:
    """Plain pytest on ``folder``'s repro with the fake vLLM under ``pythonpath`` (None: vLLM
    unimportable), forensics unimportable."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder)}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    launcher = WITHOUT_FORENSICS if pythonpath is not None else WITHOUT_VLLM
    return subprocess.run([sys.executable, "-c", launcher, "-p", "no:forensics",
                           "-p", "no:cacheprovider", "-q", "-rs", "test_repro.py"], cwd=folder,
                          capture_output=True, text=True, timeout=600, env=env)


def test_a_call_past_its_deadline_fails_with_timed_out(tmp_path: Path) -> None:
    """The embedding's forward never returns: the test fails after the data's 2 s deadline."""
    repro = _embedding_repro(tmp_path, deadline=2)
    fake = _fake_vllm(tmp_path / "site", "0.33.0", "time.sleep(3600)")
    run = _run(repro.parent, fake)
    assert run.returncode == 1 and "1 failed" in run.stdout, run.stdout[-3000:]
    assert ("timed out after 2 s in vllm.model_executor.layers.vocab_parallel_embedding."
            "VocabParallelEmbedding.forward") in run.stdout  # the site's function (T109e)


def test_a_fixed_call_passes_and_a_raising_one_names_the_element(tmp_path: Path) -> None:
    for forward, outcome in (("return input_", "1 passed"),
                             ("raise IndexError('index out of range in self')", "1 failed")):
        folder = tmp_path / outcome.replace(" ", "-")
        folder.mkdir()
        run = _run(_embedding_repro(folder).parent, _fake_vllm(folder / "site", "0.33.1",
                                                              forward))
        assert outcome in run.stdout, run.stdout[-3000:]
    assert ("out-of-range access in vllm.model_executor.layers.vocab_parallel_embedding."
            "VocabParallelEmbedding.forward: index out of range in self; the capture's "
            "input_ids[2] = 248320 is outside [0, 248320), the valid indices of embedding "
            "rows") in run.stdout  # the site's function, not the data file's words (T109e)


@pytest.mark.parametrize(("version", "reason"), [
    (None, "vLLM is not installed (import of vllm halted; None in sys.modules); this repro "
           "needs vLLM 0.33.x"),
    ("0.34.0", "this repro needs vLLM 0.33.x (the version that reproduced the capture's "
               "failure); installed: vLLM 0.34.0")])
def test_without_the_vllm_it_needs_the_repro_skips_saying_why(
        tmp_path: Path, version: str | None, reason: str) -> None:
    repro = _embedding_repro(tmp_path)
    fake = None if version is None else _fake_vllm(tmp_path / "site", version, "return input_")
    run = _run(repro.parent, fake)
    assert run.returncode == 0 and "1 skipped" in run.stdout, run.stdout[-3000:]
    assert reason in run.stdout


# ------------------------------------------------------------------- the guarded loader


def _load(folder: Path, data: str | bytes) -> Exception:
    """Import the generated file beside ``data``; return what its loader raised."""
    (folder / "test_repro.py").write_text(script_text())
    raw = data.encode() if isinstance(data, str) else data
    (folder / "test_repro.json").write_bytes(raw)
    spec = importlib.util.spec_from_file_location("repro_under_test", folder / "test_repro.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(Exception) as caught:
        spec.loader.exec_module(module)
    return caught.value


def _data(**change: Any) -> str:
    data = {"format": 1, "vllm": {"needed": "0.33", "capture": None}, "deadline_s": 5,
            "cases": []}
    return json.dumps({**data, **change})


def _case(**record: Any) -> dict[str, Any]:
    return {"site": "embedding", "function": "f", "step": 0, "rank": 0, "record": record,
            "facts": {"vocab_size": None},
            "finding": {"text": "", "tensor": None, "element": None, "value": None,
                        "lower": None, "upper": None, "indexed": None}}


@pytest.mark.parametrize(("data", "says"), [
    (b"\xff\xfe", "not JSON"),
    ("[1, 2]", "expected an object with the keys"),
    (_data(format=2), "format: 2 is outside [1, 1]"),
    (_data(deadline_s=float("nan")), "holds NaN"),
    (_data(deadline_s=10**9), "deadline_s: 1000000000 is outside [1, 3600]"),
    (_data(cases=[{**_case(), "site": "__import__('os')"}]), "cases[0].site: not a site"),
    (_data(cases=[{**_case(), "step": True}]), "cases[0].step: expected an integer"),
    (_data(cases=[_case(x=[1])]), "cases[0].record['x']: expected an object"),
])
def test_the_loader_refuses_what_the_generator_never_writes(
        tmp_path: Path, data: str | bytes, says: str) -> None:
    error = _load(tmp_path, data)
    assert type(error).__name__ == "BadData" and says in str(error), error
    assert str(error).startswith("test_repro.json: ") and "\n" not in str(error)


@pytest.mark.parametrize(("field", "says"), [
    ({"kind": "tensor", "value": {"dtype": "object", "shape": [1], "values": [1]}},
     "dtype 'object' is not one of"),
    ({"kind": "tensor", "value": {"dtype": "int64", "shape": [3], "values": [1]}},
     "1 values for the shape [3]"),
    ({"kind": "tensor", "value": {"dtype": "int64", "shape": [1], "values": ["1"]}},
     "expected an integer, got str"),
    ({"kind": "code", "value": "print(1)"}, "unknown kind 'code'"),
])
def test_a_record_field_decodes_only_to_plain_values(tmp_path: Path, field: dict[str, Any],
                                                     says: str) -> None:
    """The fields are checked when a test decodes them: the file loads, the field refuses."""
    (tmp_path / "test_repro.py").write_text(script_text())
    (tmp_path / "test_repro.json").write_text(_data(cases=[_case(input_ids=field)]))
    spec = importlib.util.spec_from_file_location("repro_fields", tmp_path / "test_repro.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(module.BadData, match=None) as caught:
        module.record(module.DATA["cases"][0])
    assert says in str(caught.value)


def test_the_data_holds_numbers_as_numbers() -> None:
    from forensics.share.repro import field_data

    encoded = field_data("tensor", np.array([[1, 2], [3, 4]], dtype=np.int32))
    assert encoded == {"kind": "tensor", "value": {"dtype": "int32", "shape": [2, 2],
                                                   "values": [1, 2, 3, 4]}}


def test_help_says_what_is_written_and_the_deadline(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["repro", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "holds no text of the capture and reads the JSON at run time" in text
    assert "--deadline SECONDS" in text and "timed out after N s" in text
    assert "the tests skip, saying why" in text
    assert "Triton-kernel sites get a test each too" in text and "--case N" in text


@pytest.mark.parametrize(("args", "says"), [
    (["-o", "t.txt"], "does not end in .py"),
    (["-o", "t.py", "--deadline", "0"],
     "--deadline '0' is not a number of seconds from 1 to 3600")])
def test_bad_arguments_are_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str) -> None:
    args = [str(tmp_path / a) if a.startswith("t.") else a for a in args]
    capture = Path(__file__).parent.parent / "data" / "clean.capture"  # a capture: its path passes
    assert main(["repro", str(capture), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err
    assert not list(tmp_path.iterdir())


def test_the_vocabulary_comes_from_the_record_then_the_manifest() -> None:
    from forensics.records import Record
    from forensics.share.repro import vocab_fact

    with_field = Record("prepare_input_ids", 0, 0, {"vocab_size": np.int64(32000)})
    without = Record("batch_change", 0, 0, {})
    assert vocab_fact(with_field, {"model": {"vocab_size": 7}}) == 32000
    assert vocab_fact(without, {"model": {"vocab_size": 32000}}) == 32000
    assert vocab_fact(without, {"model": {"vocab_size": "32000"}}) is None
    assert vocab_fact(without, {"model": {"vocab_size": True}}) is None
    assert vocab_fact(without, {}) is None
