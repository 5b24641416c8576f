"""Work measured in instructions, not seconds: the ruler of the linear-time tests.

A test that times an input and the same input 4x larger fails on a busy machine (one such
test measured 6.07x for linear work: its 4x input no longer fitted the cache). Valgrind's
callgrind counts the instructions a call executes instead: the same count on every run, on any
load. :func:`instructions` runs one child Python under callgrind that imports the test module
and runs each case's first work once to warm lazy imports, all uninstrumented
(``--instr-atstart=no``: about 5x faster than instrumented; importing pandas instrumented took
94 s), then turns instrumentation on (``callgrind_control -i on``) and runs a fresh work per
case through ``operator.call``, the one function callgrind counts inside (``--toggle-collect``)
and dumps after (``--dump-after``): one count per case, in order. The cyclic garbage collector
is run before each counted work and off during it: a full collection walks every object the
process holds, and counted in whichever work crossed its threshold (a linear parse measured
35.6x for 4x its input once, in CI).

The child imports the test module that asks (from its file) and calls its
``make_work(case, size, scratch)``, which returns the work over an input of ``size``
(``scratch``: a folder the parent may have filled). Run as a script, this file is that child.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import operator
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: 4x the input must cost under this many times the instructions, a call's fixed cost aside
#: (linear: 4; quadratic: 13 as :func:`scaling` measures)
LIMIT = 6.0
#: one child's limit (it runs under valgrind, tens of times slower than Python alone)
CHILD_SECONDS = 900
_TOTALS = re.compile(rb"^totals: (\d+)$", re.M)

MakeWork = Callable[[str, int, Path], Callable[[], object]]
#: what :func:`scaling` measured in this process: the counts do not change from run to run
_MEASURED: dict[tuple[str, tuple[tuple[str, int], ...]], dict[str, float]] = {}


def instructions(module: str | Path, cases: list[tuple[str, int]], scratch: Path) -> list[int]:
    """The instructions executed by ``make_work(case, size, scratch)()`` of the test module at
    ``module`` (its ``__file__``) for each ``(case, size)`` of ``cases``, in order, counted by
    callgrind in one child process."""
    valgrind = shutil.which("valgrind")
    assert valgrind, "valgrind is missing: `make system` installs it (scripts/provision_system.py)"
    out = Path(tempfile.mkdtemp(prefix="callgrind-", dir=scratch))
    command = [valgrind, "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
               "--toggle-collect=_operator_call", "--dump-after=_operator_call",
               f"--callgrind-out-file={out / 'run'}", sys.executable, __file__, str(module),
               json.dumps(cases), str(scratch)]
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=CHILD_SECONDS, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    parts = sorted(out.glob("run.*"), key=lambda p: int(p.suffix[1:]))
    counts = [int(_TOTALS.findall(p.read_bytes())[-1]) for p in parts]
    assert len(counts) == len(cases), (len(counts), cases, done.stderr[-2000:])
    return counts


def scaling(module: str | Path, bases: dict[str, int], scratch: Path) -> dict[str, float]:
    """For each case of ``bases``: what 4x its base size costs over what its base size costs,
    in instructions, a call's fixed cost (a file opened, a frame built) taken out of both. That
    cost is where the line through the counts at a quarter of the base size and at the base
    size meets size 0: linear work then gives 4, quadratic work 13, whatever the fixed cost
    (the ``make_work`` of the test module at ``module`` builds the work)."""
    key = (str(module), tuple(bases.items()))
    if key not in _MEASURED:  # a module fixture is built again when xdist runs another file's
        _MEASURED[key] = _scaling(module, bases, scratch)  # tests between those of its own
    return _MEASURED[key]


def _scaling(module: str | Path, bases: dict[str, int], scratch: Path) -> dict[str, float]:
    sizes = {case: (max(1, base // 4), base, 4 * base) for case, base in bases.items()}
    counts = iter(instructions(module, [(c, s) for c, three in sizes.items() for s in three],
                               scratch))
    ratios = {}
    for case, (quarter, base, _) in sizes.items():
        at_quarter, at_base, at_four = next(counts), next(counts), next(counts)
        fixed = at_base - (at_base - at_quarter) / (base - quarter) * base
        ratios[case] = (at_four - fixed) / max(at_base - fixed, 1.0)
    return ratios


def assert_linear(ratio: float) -> None:
    """4x the input cost under :data:`LIMIT` times the instructions."""
    assert ratio < LIMIT, f"4x the input took {ratio:.2f}x the instructions: not linear"


def assert_scales_linearly(module: str | Path, case: str, base: int, scratch: Path) -> None:
    """4x ``base`` costs under :data:`LIMIT` times the instructions of ``base`` (see
    :func:`scaling`) in ``make_work(case, ...)`` of the test module at ``module``."""
    assert_linear(scaling(module, {case: base}, scratch)[case])


def _child(module: Path, cases: list[tuple[str, int]], scratch: Path) -> None:
    sys.path.insert(0, str(module.parent))  # as pytest imports a test file: its folder first
    spec = importlib.util.spec_from_file_location(module.stem, module)
    assert spec is not None and spec.loader is not None, module
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    make_work: MakeWork = tests.make_work
    first: dict[str, int] = {}
    for case, size in cases:
        first.setdefault(case, size)
    for case, size in first.items():  # lazy imports, compiled patterns: once per case
        make_work(case, size, scratch)()
    _instrument()
    for case, size in cases:
        work = make_work(case, size, scratch)
        gc.collect()  # uncounted, and none while counting: a full collection's walk over every
        gc.disable()  # object the process holds landed in whichever case crossed its threshold
        operator.call(work)  # counted: a fresh work, nothing cached   (35.6x for 4x once in CI)
        gc.enable()


def _instrument() -> None:
    """Turn callgrind's instrumentation on in this process (it started without, see
    :func:`instructions`): only instrumented code is counted."""
    control = shutil.which("callgrind_control")
    assert control, "callgrind_control is missing: it comes with valgrind (`make system`)"
    done = subprocess.run([control, "-i", "on", str(os.getpid())], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, f"callgrind_control -i on failed: {done.stdout}{done.stderr}"


if __name__ == "__main__":
    _child(Path(sys.argv[1]), [tuple(c) for c in json.loads(sys.argv[2])], Path(sys.argv[3]))
