"""Hostile input, round 17 (attack 17): ``kernels``, ``check``, ``plot``, ``findings``,
``known``, ``triage`` and the pytest plugin against hostile captures."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.test_round4_kernels import launch

pytest_plugins = ["pytester"]

# ------------------------------------- T94a: an empty view of a huge dimension, sharing memory


@pytest.mark.parametrize("shape", [[0, 2**40], [2**40, 0], [3, 0, 2**40]])
def test_an_empty_shared_view_of_a_huge_dimension_is_read_without_allocating(
        shape: list[int]) -> None:
    """A ``view`` record of no element (a dimension of 0) holds no bytes, its other dimensions
    are sized by nothing it holds; with a ``storage_id`` its elements' bytes were placed in the
    memory it shares by ranging over every dimension first: ``[0, 2**28]`` made ``forensics
    kernels`` allocate 2 GiB (the worker reads the record too: 2.8 GB resident), past the 1 GiB
    budget, and ``[0, 2**40]`` ended it in 'out of memory'. An empty view holds no element: it
    is read in the little memory its record takes."""
    from forensics.kernels.format import check_launch

    event = launch(shape=shape, strides=[1] * len(shape), contents="view", data="",
                   storage=8, storage_id=0)
    tracemalloc.start()
    try:
        found = check_launch(event, "capture 'k.capture' kernel_launch event 0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.tensors["idx_mapping_ptr"].shape == tuple(shape)
    assert peak < 1 << 20, peak


def test_an_empty_shared_view_within_numpy_reach_allocates_nothing_of_its_size() -> None:
    """The same with ``[0, 2**24]``, which numpy can allocate (128 MiB, once): no allocation
    follows a dimension of an empty view."""
    from forensics.kernels.format import check_launch, element_starts

    event = launch(shape=[0, 2**24], strides=[1, 1], contents="view", data="", storage=8,
                   storage_id=0)
    tracemalloc.start()
    try:
        arg = check_launch(event, "test").tensors["idx_mapping_ptr"]
        starts = element_starts(arg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert starts.size == 0
    assert peak < 1 << 20, peak


# ------------------------------ T94b: a line break in expected.json's text begins no line of check


def _accepted_capture(root: Path) -> Path:
    """A small capture (two clean steps of two requests, one id past the vocabulary) with the
    expected.json ``check --accept`` writes."""
    from forensics.cli import main
    from forensics.store.writer import write_capture
    from tests.incident_records import by_site, clean_step

    records = clean_step(0, ["a", "b"]) + clean_step(1, ["a", "b"])
    by_site(records, "embedding", 1).fields["input_ids"][1] = 248320
    capture = write_capture(root / "c.capture", records, manifest={"notes": "n"})
    assert main(["check", str(capture), "--accept"]) == 0
    return capture


def test_a_line_break_in_expected_json_begins_no_line_of_check(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``check`` prints a difference per line; a site of ``verdicts`` and a first finding's
    value read from ``expected.json`` were put in them as written, so a line break in one began
    a line of the author's (``c.capture: matches expected.json``, ``ALL CHECKS PASSED``) in
    the output of a check that failed (and in the pytest plugin's failure). Each is written
    inert, its line break as ``\\x0a``."""
    from forensics.cli import main

    capture = _accepted_capture(tmp_path)
    path = capture / "expected.json"
    data = json.loads(path.read_text())
    data["verdicts"]["upstream"]["x\nc.capture: matches expected.json\n"] = "ok"
    data["first_finding"]["upstream"]["tensor"] = "t\nALL CHECKS PASSED"
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["check", str(capture)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "c.capture: replay differs from expected.json:", lines
    assert all(line.startswith("  ") for line in lines[1:]), lines
    assert any("upstream/x\\x0ac.capture: matches expected.json\\x0a: expected verdict 'ok'"
               in line for line in lines), lines
    assert any("(t\\x0aALL CHECKS PASSED=248320)" in line for line in lines), lines


# --------------------------------- T94c: a folder of captures that names none fails, never passes


@pytest.mark.parametrize("root", ["gone", "emptied"])
def test_a_captures_folder_that_names_none_fails_its_run(
        tmp_path: Path, pytester: pytest.Pytester, root: str) -> None:
    """``pytest --forensics-captures DIR`` (or the ``forensics_captures`` ini option) of a
    folder that does not exist (a typo; a shared folder another user renamed) or holds no
    capture (emptied) collected no item and said nothing: the suite passed ("1 passed") with
    its regression captures gone. The folder is an item that fails, in one line naming it."""
    folder = tmp_path / root
    if root == "emptied":
        (folder / "notes").mkdir(parents=True)
    pytester.makepyfile(test_other="def test_other():\n    assert True\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-o", "forensics_captures=",
                                          "--forensics-captures", str(folder),
                                          "--forensics-captures", f"{folder}/")
    result.assert_outcomes(passed=1, failed=1)  # one item, however often it is named
    text = "\n".join(result.outlines)
    assert (f"'{folder}' (--forensics-captures, or the forensics_captures ini option) does not "
            "exist or holds no NAME.capture folder") in text, text


def test_a_captures_folder_beside_one_that_names_none_is_still_collected(
        tmp_path: Path, pytester: pytest.Pytester) -> None:
    """The folder that names none fails alone: the captures of another are items as before."""
    capture = _accepted_capture(tmp_path / "fleet")
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--collect-only", "-q", "-o", "forensics_captures=",
        "--forensics-captures", str(tmp_path / "gone"), "--forensics-captures",
        str(capture.parent))
    ids = [line for line in result.outlines if line.endswith(("c.capture", "gone"))]
    assert len(ids) == 2, result.outlines


# ----------------------- T94d: records that ended in errors are not "no findings"


class _Raising:
    """``upstream``, except that every embedding record raises (as the real code's kernel
    worker does when it times out or fails: an ``error`` outcome, no finding)."""

    name = "raising"

    def __init__(self) -> None:
        from forensics.variants.models import UpstreamVariant

        self.upstream = UpstreamVariant()

    def run(self, record: Any) -> Any:
        """Raise at an embedding record, else run upstream."""
        if record.site == "embedding":
            raise RuntimeError("the replay worker timed out after 600 s")
        return self.upstream.run(record)


@pytest.mark.parametrize("output", [None, "f.csv"])
def test_findings_names_the_records_that_ended_in_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        output: str | None) -> None:
    """A record whose replay ended in an error (the ``vllm`` variant's kernel worker timed out
    on a capture of many requests: ``replay`` said "2 record(s) were not judged") holds no
    finding; ``findings`` printed "no findings" alone (or wrote an empty file and said "0
    findings"). It says which records no variant judged, as it does for sites not known."""
    from forensics.cli import main
    from forensics.variants import registry

    monkeypatch.setitem(registry._entries, "raising", _Raising)
    capture = Path(__file__).resolve().parents[2] / "data" / "clean.capture"
    args = ["findings", str(capture), "--variant", "raising", "--site", "embedding"]
    args += ["-o", str(tmp_path / output)] if output else []
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("no findings" if output is None else
                        f"0 findings -> {tmp_path / output}"), lines
    errors = int(_embedding_records(capture))
    assert lines[1:] == [f"not judged: {errors} record(s) of raising ended in errors, so hold "
                         "no finding; forensics replay names why"], lines


def _embedding_records(capture: Path) -> int:
    """The embedding records of ``capture``."""
    import forensics

    return sum(1 for r in forensics.load(capture) if r.site == "embedding")


# --------------------------------------------- T94e: triage's "wrote" lines are inert


def test_triage_names_the_files_it_wrote_inert(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``triage -o`` and ``--html`` said ``wrote PATH`` as the path was given, where ``plot``
    and ``findings`` write it inert: a folder named of a capture's name (a script's ``-o``)
    holding an escape sequence or a bidi override reached the terminal as written."""
    from forensics.cli import main

    capture = _accepted_capture(tmp_path / "fleet")
    out = tmp_path / "run \x1b[2J\u202e"
    out.mkdir()
    assert main(["triage", str(capture.parent), "--workers", "1", "-o", str(out / "t.csv"),
                 "--html", str(out / "html")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\u202e" not in err, err
    assert f"wrote {tmp_path}/run \\x1b[2J\\u202e/t.csv" in err, err
    assert (out / "t.csv").is_file() and (out / "html" / "index.html").is_file()


# ------------------------- T94f: a capture of kernel launches alone is not "no failure to report"


def test_a_capture_of_launches_alone_is_not_said_to_show_no_failure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A capture of one recorded kernel launch and no site record, the launch's ``idx_mapping``
    holding request slot 7 of 4 (``forensics kernels`` finds it, exit 1): ``summary`` and
    ``known`` said "No known signature matches, and the capture shows no failure to report."
    Nothing was judged: they say whether it shows a failure is not known."""
    from forensics.cli import main
    from forensics.kernels import contracts
    from forensics.kernels.format import check_launch
    from tests.hostile.test_round4_kernels import b64, write_capture

    event = launch(data=b64(b"\0\0\0\0\7\0\0\0"))
    assert [f["values"] for f in contracts.check(check_launch(event, "test"), {})] == [[7]]
    capture = write_capture(tmp_path / "k.capture", [event])
    for command in ("summary", "known"):
        assert main([command, str(capture)]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "no failure to report" not in text, text
        assert ("No known signature matches, and the capture holds no record to judge: whether "
                "it shows a failure to report is not known.") in text, text
