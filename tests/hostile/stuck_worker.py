"""The Model Runner V2 kernel worker, made to hang on every record of step 1 (a stuck child
for the deadline tests: it never answers those records, and never exits by itself)."""

from __future__ import annotations

import sys
import time
from typing import Any

from forensics.variants import triton_worker

_answer = triton_worker.answer


def answer(kernels: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The real answer, except for step 1: no answer, ever."""
    if " at step 1," in str(request.get("where")):
        while True:
            time.sleep(60)
    return _answer(kernels, request)


triton_worker.answer = answer  # type: ignore[assignment]

if __name__ == "__main__":
    sys.exit(triton_worker.main())
