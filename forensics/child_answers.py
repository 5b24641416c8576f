"""The stream a kernel worker child answers its parent on, kept apart from what the code it
runs prints.

The V2 variant's worker (:mod:`forensics.variants.triton_worker`) and ``forensics kernels``'
replay worker (:mod:`forensics.kernels.replay_worker`) answer one JSON line per request on
their stdout. The code they import and run writes there too: vLLM's logger writes to stdout
(``VLLM_LOGGING_STREAM``'s default), and a diff given as ``vllm+PATH.diff`` may print. Such a
line was read as an answer: the V2 worker's parent ended with a ``JSONDecodeError`` traceback,
the replay worker's said "the replay crashed the interpreter's process". :func:`answer_stream`
gives the worker a copy of its stdout for its answers alone and points its file descriptor 1
(and ``sys.stdout``) at its stderr, which its parent discards.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO


def answer_stream() -> TextIO:
    """The stream to write answers on (this process's stdout as it started, line-buffered);
    from now on anything else written to stdout, by Python or C code, goes to stderr."""
    sys.stdout.flush()
    answers = os.dup(1)  # close-on-exec: a process the worker starts cannot answer
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(answers, "w", buffering=1, encoding="utf-8")
