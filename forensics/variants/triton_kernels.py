"""The real-code variant of Model Runner V2's sites: vLLM's own Triton kernels, on CPU.

V2's index math is in Triton kernels (``vllm.v1.worker.gpu.input_batch``). They run here in
Triton's interpreter, which must be switched on (``TRITON_INTERPRET=1``) before vLLM's kernels
are decorated, and vLLM's Triton check must accept a machine without a GPU driver: neither can
be arranged in a process that may have imported vLLM already, so the kernels run in a worker
process (:mod:`forensics.variants.triton_worker`), started on first use and kept. Records go
to it as ``.npz`` files (no pickle) and outputs come back the same way.

The worker observes every load and store of the kernel: one outside the buffers handed to the
launch is reported as ``index_error`` (observed, not modelled) and not performed, so the replay
is never corrupted. A worker that dies anyway is restarted and the record's outcome is
``index_error`` with what it printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

import numpy as np

from forensics.errors import MissingDependencyError
from forensics.outcome import INDEX_ERROR, OK, Outcome
from forensics.records import Record

_START_TIMEOUT = 600.0


class KernelWorker:
    """One worker process and its scratch directory (see the module)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="forensics-triton-")
        self._count = 0

    def _start(self) -> subprocess.Popen[str]:
        env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
        process = subprocess.Popen([sys.executable, "-m", "forensics.variants.triton_worker"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True, env=env)
        hello = _read_line(process.stdout)
        if not hello or not json.loads(hello).get("ready"):
            process.kill()
            why = json.loads(hello).get("message") if hello else "it exited"
            raise MissingDependencyError(
                f"vLLM's Triton kernels cannot run in Triton's interpreter here ({why}); the "
                f"'vllm' variant of Model Runner V2 sites needs vLLM and Triton installed")
        return process

    def run(self, record: Record) -> Outcome:
        """Run ``record`` through vLLM's kernel of its site; return its Outcome."""
        return self.run_many([record])[0]

    def run_many(self, records: list[Record]) -> list[Outcome]:
        """Run ``records`` in one exchange with the worker; their Outcomes, in order. A
        worker that dies gives every record of the exchange the crash's ``index_error``."""
        if self._process is None or self._process.poll() is not None:
            self._process = self._start()
        requests = []
        for record in records:
            self._count += 1
            base = Path(self._dir.name) / f"r{self._count}"
            request = {"site": record.site, "inputs": f"{base}-in.npz",
                       "outputs": f"{base}-out.npz"}
            np.savez(request["inputs"], **_arrays(record))
            requests.append(request)
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps({"batch": requests}) + "\n")
            self._process.stdin.flush()
            line = _read_line(self._process.stdout)
        except OSError:
            line = ""
        if not line:
            self._process = None
            return [Outcome(INDEX_ERROR, "IndexError: the Triton kernel crashed the "
                                         "interpreter's process (an illegal memory access)")
                    for _ in records]
        return [_outcome(answer, request)
                for answer, request in zip(json.loads(line)["batch"], requests, strict=True)]

    def close(self) -> None:
        """End the worker and remove the scratch directory."""
        if self._process is not None and self._process.stdin is not None:
            self._process.stdin.close()
            self._process.wait(timeout=30)
        self._process = None
        self._dir.cleanup()


def _outcome(answer: dict[str, Any], request: dict[str, str]) -> Outcome:
    """The Outcome of one answer (its files removed)."""
    produced: dict[str, Any] = {}
    if answer["status"] == OK:
        with np.load(answer["outputs"], allow_pickle=False) as data:
            produced = {name: data[name] for name in data.files}
    for path in (request["inputs"], request["outputs"]):
        Path(path).unlink(missing_ok=True)
    return Outcome(answer["status"], answer["message"], produced)


def _read_line(stream: IO[str] | None) -> str:
    return stream.readline().strip() if stream is not None else ""


def _arrays(record: Record) -> dict[str, Any]:
    """The record's tensor and int fields as arrays (request ids are not needed)."""
    return {name: np.asarray(value) for name, value in record.fields.items()
            if not isinstance(value, (list, dict)) and not name.endswith("_after")}


_WORKER: KernelWorker | None = None


def run_kernel(record: Record) -> Outcome:
    """The ``vllm`` variant of a Model Runner V2 site on one record (one shared worker)."""
    global _WORKER
    if _WORKER is None:
        _WORKER = KernelWorker()
    return _WORKER.run(record)


def run_kernels(records: list[Record]) -> list[Outcome]:
    """:func:`run_kernel` on many records in one exchange with the shared worker."""
    global _WORKER
    if _WORKER is None:
        _WORKER = KernelWorker()
    return _WORKER.run_many(records)
