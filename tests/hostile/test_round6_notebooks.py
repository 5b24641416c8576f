"""Hostile input, round 6, on notebooks and the report's child processes (issue 38's
standard): a cell stuck where no signal handler runs (signals blocked, as native code may
leave them) is ended from outside at its deadline with its whole process group; a
``forensics report`` ended by a real signal leaves no notebook process behind; what a capture
puts into a notebook's parameters stays data.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forensics.cli import main
from tests.conftest import DATA, embedding_records

CAPTURE = DATA / "v2-negative-draft.capture"
#: a cell that no in-process deadline can stop: every signal a handler could use is blocked
#: (as native code can leave them) before it waits
STUCK = ("import signal, time\n"
         "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGINT, "
         "signal.SIGTERM, signal.SIGHUP})\n"
         "time.sleep(3600)")


def write_notebook(path: Path, *sources: str) -> Path:
    """A v4 notebook at ``path``: a ``parameters`` cell ``capture = None``, then ``sources``."""
    cells = [("capture = None", ["parameters"]), *((source, []) for source in sources)]
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "execution_count": None, "id": f"c{i}", "outputs": [],
         "metadata": {"tags": tags}, "source": source}
        for i, (source, tags) in enumerate(cells)]}), encoding="utf-8")
    return path


def notebook(path: Path, pids: Path) -> Path:
    """A notebook at ``path`` whose cells start a helper process, write the notebook's pid and
    the helper's to ``pids``, then get stuck (:data:`STUCK`)."""
    return write_notebook(path, "import os, subprocess\n"
                                "helper = subprocess.Popen(['sleep', '300'])\n"
                                f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} "
                                "{helper.pid}')", STUCK)


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` has ended (reaped, or a zombie) within ``within`` seconds."""
    stop = time.monotonic() + within
    while time.monotonic() < stop:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def read_pids(path: Path, within: float = 120.0) -> list[int]:
    """The pids a notebook wrote to ``path`` (waited for up to ``within`` seconds)."""
    stop = time.monotonic() + within
    while True:
        if path.is_file() and len(text := path.read_text().split()) == 2:
            return [int(pid) for pid in text]
        if time.monotonic() > stop:
            break
        time.sleep(0.05)
    raise AssertionError(f"the notebook never wrote {path}")


def kill_left(pids: list[int]) -> None:
    """Kill whatever of ``pids`` is left (a failed test leaves nothing running)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# ----------------------------------- 1. a cell stuck where no signal reaches is killed outside


@pytest.mark.timeout(120, method="thread")
def test_a_cell_no_signal_reaches_is_killed_from_outside_with_its_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """``forensics report`` on a notebook whose cell blocks every signal and waits ends at the
    deadline (``FORENSICS_CHILD_TIMEOUT=1``) in one line naming the notebook, the cell and
    ``timed out after 1 s``, exit 2; the notebook's process and the process its cell started
    are gone, and no report is written."""
    monkeypatch.setenv("FORENSICS_CHILD_TIMEOUT", "1")
    pids_file, out = tmp_path / "pids", tmp_path / "r.html"
    nb = notebook(tmp_path / "stuck.ipynb", pids_file)
    started = time.monotonic()
    code = main(["report", str(CAPTURE), "-o", str(out), "--notebook", str(nb)])
    took = time.monotonic() - started
    pids = read_pids(pids_file, within=0)
    try:
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1, (code, err)
        assert "stuck.ipynb" in err and "cell 4: timed out after 1 s" in err, err
        assert all(gone(pid) for pid in pids), pids
        assert not out.exists() and took < 60, took
    finally:
        kill_left(pids)


# ------------------------------------- 2. a report ended by a signal leaves no notebook behind


def _as_from_a_shell() -> None:
    """In the child before it runs: ``SIGINT`` as an interactive shell leaves it (a test run
    started in the background, ``nohup ... &``, ignores it, and an ignored ``SIGINT`` is
    inherited: Python then never raises ``KeyboardInterrupt``, and the report goes on)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_report_ended_by_a_signal_leaves_no_notebook_process(
        tmp_path: Path, signum: int) -> None:
    """A real ``forensics report`` process, sent ``signum`` while its notebook's cell is stuck
    (:data:`STUCK`), ends within seconds, and so do the notebook's process and the process
    its cell started (``SIGKILL``: the notebook's process only, ended by the kernel); no
    report is left at its name, nor a part of one beside it."""
    pids_file, out = tmp_path / "pids", tmp_path / "r.html"
    nb = notebook(tmp_path / "stuck.ipynb", pids_file)
    env = {**os.environ, "FORENSICS_CHILD_TIMEOUT": "600"}
    report = subprocess.Popen([sys.executable, "-m", "forensics.cli", "report", str(CAPTURE),
                               "-o", str(out), "--notebook", str(nb)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              preexec_fn=_as_from_a_shell)
    pids: list[int] = []
    try:
        pids = read_pids(pids_file)
        report.send_signal(signum)
        report.wait(timeout=60)  # seconds at most; minutes only on a machine under load
        ended = pids[:1] if signum == signal.SIGKILL else pids
        assert all(gone(pid) for pid in ended), pids
        assert report.returncode in (-signum, 128 + signum, 130), report.returncode
        assert not out.exists() and not [p for p in os.listdir(tmp_path) if ".r.html" in p]
    finally:
        report.kill()
        report.wait()
        kill_left(pids)


# ------------------------------------------------ 3. a capture's path reaches a cell as data

#: what could end a string literal, a line or a docstring, or is no UTF-8
HOSTILE_PATHS = ['/x/a"""b\'\'\'c\\', '/x/\nimport os; os._exit(3)\n#', "/x/\\N{BEL}\\x1b{x}",
                 os.fsdecode(b"/x/\xff\xfe.capture"), "/x/\u202e\x00"]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_a_capture_path_is_one_literal_of_the_parameters_cell(path: str) -> None:
    """The cell injected into a report's notebook assigns the capture's path (and the
    variants) as literals holding exactly the text given, whatever it holds: quotes,
    newlines, backslashes, bytes that are no UTF-8 (surrogate escapes) or NUL."""
    from forensics.present.notebook_exec import Node, inject_parameters
    from forensics.present.report import _parameters

    nb = Node(cells=[Node(cell_type="code", source="capture = None",
                          metadata=Node(tags=["parameters"]))])
    inject_parameters(nb, _parameters(Path(path), [path]))
    tree = ast.parse(nb.cells[1].source)
    assert [type(s).__name__ for s in tree.body] == ["Assign", "Assign"], nb.cells[1].source
    values = {s.targets[0].id: ast.literal_eval(s.value) for s in tree.body  # type: ignore
              if isinstance(s, ast.Assign)}
    assert values == {"capture": str(Path(path)), "variants": [path]}, values


# ------------------------------------------- 4. a hostile capture name through the notebooks

#: a folder name of quotes, a docstring's end, a backslash, a newline, ESC, markup, bytes that
#: are no UTF-8, a bidi override and a noncharacter
HOSTILE_NAME = (b'x"""\'\\\n\x1b[31m<script>alert(1)<\\script>\xff\xfe\xe2\x80\xae'
                b'\xef\xb7\x90.capture')


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of :data:`CAPTURE` under :data:`HOSTILE_NAME`."""
    target = os.path.join(os.fsencode(tmp_path_factory.mktemp("hostile")), HOSTILE_NAME)
    shutil.copytree(os.fsencode(CAPTURE), target)
    return Path(os.fsdecode(target))


def test_the_quickstart_report_of_a_hostile_name_is_inert(hostile: Path, tmp_path: Path
                                                          ) -> None:
    """The report of ``00_quickstart`` (the one the command's help names; it displayed bare
    pandas tables, which the report refuses as raw HTML) on a capture named
    :data:`HOSTILE_NAME` is written, and shows the name as escaped text only."""
    from test_round5_present import RAW

    from forensics.present.report import write_report

    page = write_report(hostile, tmp_path / "r.html", notebook="00_quickstart").read_text(
        encoding="utf-8")
    assert RAW.search(page) is None, RAW.search(page)
    assert "<script" not in page.lower() and "&lt;script&gt;alert(1)" in page


@pytest.mark.parametrize(("cell", "said"), [
    ("raise ValueError(capture * 2)", "in cell 3: ValueError: "),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
     "the notebook's process was killed by SIGKILL in cell 3 without an answer")])
def test_a_failing_cell_on_a_hostile_name_is_one_inert_line(
        hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], cell: str,
        said: str) -> None:
    """A cell that raises with the capture's path in its message, or kills its own process,
    ends ``forensics report`` in one line (exit 2) that says so, naming the capture with no
    control character, bidi control or noncharacter raw; no report is written."""
    from test_round5_present import RAW

    nb = write_notebook(tmp_path / "fails.ipynb", cell)
    out = tmp_path / "r.html"
    code = main(["report", str(hostile), "-o", str(out), "--notebook", str(nb)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, (code, err)
    assert said in err and "\\x1b[31m" in err and RAW.search(err) is None, err
    assert not out.exists()


# ------------------------------------------------- 5. the progress bar's label is inert text


def test_a_progress_label_naming_a_hostile_file_is_inert() -> None:
    """The progress bar's label (``import`` shows each source file's name) is drawn with no
    control character, bidi control or noncharacter raw: only the bar's own carriage return
    and its line's end."""
    import io

    from test_round5_present import RAW

    from forensics.progress import Progress

    stream = io.StringIO()
    bar = Progress(2, "import", stream=stream, force=True)
    bar.advance(0, os.fsdecode(b"\x1b]0;pwn\x07\x1b[2J\xe2\x80\xae\n\r\xff.log"))
    bar.advance(1)
    bar.close()
    drawn = stream.getvalue()
    assert drawn.count("\r") == 2 and drawn.count("\n") == 1 and drawn.endswith("\n"), drawn
    assert RAW.search(drawn.replace("\r", "").replace("\n", "")) is None, drawn


def test_an_output_json_has_no_type_for_comes_back_as_its_value(tmp_path: Path) -> None:
    """What a cell displays that JSON has no type for (a numpy scalar or array, any other
    object in a display's data or metadata) comes back from the notebook's process as its
    value or its text, not as a failed report."""
    from forensics.present.notebook_exec import as_node
    from forensics.present.notebook_process import execute_in_child

    nb = as_node({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": (
        "import numpy as np\nfrom IPython.display import display\n"
        "display({'application/json': {'n': np.int64(7), 'a': np.arange(2), 'p': object}},"
        " metadata={'x': np.float32(0.5)}, raw=True)")}]})
    data = execute_in_child(nb, tmp_path).cells[0].outputs[0]
    assert data["data"]["application/json"] == {"n": 7, "a": [0, 1], "p": "<class 'object'>"}
    assert data["metadata"] == {"x": 0.5}, data


# ------------------------------- 6. triage --html: one group's failed report leaves the others


def test_one_groups_report_past_its_deadline_leaves_the_others_written(
        tmp_path: Path) -> None:
    """``triage --html``: when one group's report fails (its notebook ran past its deadline:
    the error a real one gives), the other groups' reports are still written, the index says
    that group's error (escaped) in place of its link, and the command then ends in one line
    naming it."""
    from forensics.errors import ForensicsError
    from forensics.fleet.output import write_html
    from forensics.fleet.triage import triage
    from forensics.present.report import NotebookExecutionError
    from forensics.store.writer import write_capture

    paths = [str(write_capture(tmp_path / f"{name}.capture", embedding_records(bad)))
             for name, bad in (("clean", None), ("bad", 2))]
    result = triage(paths, workers=1)
    assert len(result.groups) == 2, result.groups
    written: list[str] = []

    def report(capture: str, out: Path) -> None:
        if not written:
            written.append("")
            raise NotebookExecutionError(
                "notebook '03_triage.ipynb' on capture '\x1b[2J<b>': cell 7: timed out after 1 s")
        out.write_text("<html></html>")
        written.append(out.name)

    with pytest.raises(ForensicsError) as raised:
        write_html(result, tmp_path / "html", report=report)
    line = str(raised.value)
    assert len(line.splitlines()) == 1 and "group-000.html: " in line, line
    assert "timed out after 1 s" in line and "\x1b" not in line, line
    index = (tmp_path / "html" / "index.html").read_text(encoding="utf-8")
    assert written[1:] == ["group-001.html"] and (tmp_path / "html" / "group-001.html").exists()
    assert 'href="group-001.html"' in index and 'href="group-000.html"' not in index
    assert "error: notebook" in index and "&lt;b&gt;" in index and "\x1b" not in index


# ------------------------------------------------ 7. a file that is no notebook is one line

NO_NOTEBOOKS = {"list": b"[]", "not json": b"not json", "not utf-8": b"\xff\xfe{}",
                "cells not a list": b'{"nbformat": 4, "cells": 5}',
                "cell without source": b'{"nbformat": 4, "cells": [{"cell_type": "code"}]}',
                "source of numbers": b'{"nbformat": 4, "cells": [{"cell_type": "code", '
                                     b'"source": ["x = 1", 5]}]}',
                "tags not a list": b'{"nbformat": 4, "cells": [{"cell_type": "code", '
                                   b'"source": "x = 1", "metadata": {"tags": 5}}]}',
                "old and invalid": b'{"nbformat": 3}'}


@pytest.mark.parametrize("content", NO_NOTEBOOKS.values(), ids=NO_NOTEBOOKS.keys())
def test_a_file_that_is_no_notebook_is_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    """``report --notebook FILE`` where FILE is no notebook (not JSON, not UTF-8, cells of
    another kind, nbformat's refusal) ends in one line naming the file and saying what a
    notebook needs (exit 2), not an internal error."""
    nb = tmp_path / "bad.ipynb"
    nb.write_bytes(content)
    code = main(["report", str(CAPTURE), "-o", str(tmp_path / "r.html"), "--notebook", str(nb)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, (code, err)
    assert f"notebook '{nb}' cannot be run: " in err and "internal error" not in err, err
