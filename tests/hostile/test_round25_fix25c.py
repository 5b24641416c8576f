"""Round 25, fix 25c: a notebook's loop of single-record ``run_kernel()`` calls on a worker
that dies, hangs or answers no answer on each batch."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_round3_caps import post
from test_round25_fix25a import DIED, EXITED, GARBAGE, bad_kernel_worker

#: the limit's reason when the worker outlived its deadline (of 0.25 s) 3 times
HUNG = ("3 answers outlived the child deadline of 0.25 s (FORENSICS_CHILD_TIMEOUT), so no more "
        "were run")


@pytest.mark.parametrize(("does", "held", "why"), [
    ("hang", "timed out after 0.25 s", HUNG), ("exit", EXITED, DIED), ("garbage", GARBAGE, DIED)])
def test_a_loop_of_single_record_calls_has_one_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, does: str, held: str, why: str) -> None:
    """T162a: ``for r in recs: run_kernel(r)`` on a worker that never answers, dies or answers
    garbage on each batch started it once per record (T156c's limit held per call); now 3
    times in all: the records after are ``not judged`` saying why and that the count is the
    worker's, across its direct calls, until it is closed or reset."""
    from forensics.variants import triton_kernels

    starts = tmp_path / "starts"
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "0.25")
    with bad_kernel_worker(monkeypatch, starts, does):
        outcomes = [triton_kernels.run_kernel(post(s)) for s in range(6)]
    assert starts.read_text().count("started") == 3
    kept = ("not judged: " + why + " (counted across this worker's direct calls until it is "
            "closed, close_worker(), or its count reset, worker().reset())")
    assert [(o.status, o.message) for o in outcomes] == (
        [("error", held)] * 3 + [("error", kept)] * 3)


def test_a_reset_or_a_close_starts_the_count_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """T162a: after the limit, the worker's ``reset()`` (or ``close_worker()``) lets the next
    direct call start it again, as the ``not judged`` sentence says; a command's replay, which
    counts on its own clock, is not held back by a notebook's direct calls."""
    from forensics.replaying import replay
    from forensics.store.writer import write_capture
    from forensics.variants import triton_kernels

    starts = tmp_path / "starts"
    with bad_kernel_worker(monkeypatch, starts, "exit"):
        for s in range(4):
            triton_kernels.run_kernel(post(s))
        assert starts.read_text().count("started") == 3
        capture = write_capture(tmp_path / "dies.capture", [post(s) for s in range(2)])
        table = replay(str(capture), variants=["vllm"]).outcomes
        assert list(table[table["variant"] == "vllm"]["message"]) == [EXITED] * 2
        assert starts.read_text().count("started") == 5
        triton_kernels.worker().reset()
        assert triton_kernels.run_kernel(post(9)).message == EXITED
        assert starts.read_text().count("started") == 6
        for s in range(2):
            triton_kernels.run_kernel(post(s))
        assert triton_kernels.run_kernel(post(3)).message.startswith("not judged: ")
        assert starts.read_text().count("started") == 8
        triton_kernels.close_worker()
        assert triton_kernels.run_kernel(post(9)).message == EXITED
        assert starts.read_text().count("started") == 9


#: heads of logs: CJK first lines (上 holds a 0x0a byte, 一 a NUL: neither is a line end),
#: one CJK line alone, a CJK line then Latin ones, a CJK line whose UTF-16LE bytes are ASCII
#: (line 2 was named UTF-16BE), Latin, and mixed lines
HEADS = {
    "CJK": "上一个请求的错误\n引擎核心进程意外退出\n第三行\n",
    "one CJK line": "引擎核心进程意外退出请检查日志\n",
    "CJK then Latin": "上一个请求的错误\n" + "INFO 12-05 10:00:00 engine.py:1] step 3\n" * 3,
    "CJK with CRLF": "上一个请求的错误\r\n第二行上\r\n",
    "CJK whose LE bytes are ASCII": "我是中个在来有\nINFO step 3 is here\n上午\n",
    "Latin": "INFO 12-05 10:00:00 engine.py:1] started\nERROR device-side assert\n",
    "mixed": "INFO 错误 step 3\n第二行 ok\nmore 文本 上\n",
}


@pytest.mark.parametrize("head", list(HEADS))
@pytest.mark.parametrize(("codec", "named"), [("utf-16-le", "UTF-16LE"),
                                              ("utf-16-be", "UTF-16BE")])
def test_a_utf16_log_without_a_mark_is_named_by_its_line_ends(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], head: str, codec: str,
        named: str) -> None:
    """T162b: a UTF-16 log without a byte-order mark whose first line is CJK was read as
    UTF-8 (its lines garbage, its crashes none), refused as text of unknown byte order, or
    its second line named UTF-16BE (after a first line whose LE bytes are ASCII), as
    a CJK character's 0x0a byte, or a single line feed, hid the order its line feeds show;
    now the NULs of its line ends, at even offsets across its head, name the order, in one
    line with the iconv that converts it (exit 2, nothing written)."""
    from forensics.cli import main

    log = tmp_path / "windows.log"
    log.write_bytes(HEADS[head].encode(codec))
    code = main(["import", str(log), "-o", str(tmp_path / "out.capture")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"looks like {named} text without a byte-order mark" in err, err
    assert err.rstrip().endswith(f"convert it first (iconv -f {named} -t UTF-8)"), err
    assert not (tmp_path / "out.capture").exists()


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_a_utf16_log_whose_head_has_no_line_end_is_of_unknown_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], codec: str) -> None:
    """T162b: a UTF-16 log of CJK text with no line end in its head (no order shown) was read
    as UTF-8, garbage; now it is refused in one line as UTF-16 of unknown byte order, giving
    both conversions."""
    from forensics.cli import main

    log = tmp_path / "windows.log"
    log.write_bytes(("引擎核心进程意外退出" * 300).encode(codec))
    code = main(["import", str(log), "-o", str(tmp_path / "out.capture")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "looks like UTF-16 text of unknown byte order" in err, err
    assert err.rstrip().endswith("(iconv -f UTF-16LE -t UTF-8, or -f UTF-16BE -t UTF-8)"), err
