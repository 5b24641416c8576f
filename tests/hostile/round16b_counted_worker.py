"""The Model Runner V2 kernel worker, made to answer the first ``FORENSICS_TEST_ANSWERS``
requests (default 1) and then hang on every other, never exiting by itself (a worker cut by
a replay's overall deadline after some answers)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from forensics.variants import triton_worker

_answer = triton_worker.answer
_left = [int(os.environ.get("FORENSICS_TEST_ANSWERS", "1"))]


def answer(kernels: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The real answer while answers are left; then no answer, ever."""
    if _left[0] <= 0:
        while True:
            time.sleep(60)
    _left[0] -= 1
    return _answer(kernels, request)


triton_worker.answer = answer  # type: ignore[assignment]

if __name__ == "__main__":
    sys.exit(triton_worker.main())
