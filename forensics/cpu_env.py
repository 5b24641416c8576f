"""The environment vLLM's code runs under in a CPU replay, declared once: what the process
importing vLLM sets first, and what a child running vLLM's Triton kernels is given."""

from __future__ import annotations

import os

#: vLLM 0.33 imports the optional ``humming`` package, and importing it starts two background
#: Python processes that compile CUDA helpers (an NVRTC binary, a kernel launcher). A CPU replay
#: never uses them; they cost about 10 s of CPU for every process that imports vLLM. A value the
#: user set is kept.
VLLM_IMPORT_ENV = {"HUMMING_DISABLE_PARALLEL_BUILD": "1"}
#: a child that runs vLLM's Triton kernels: Triton's interpreter, no GPU visible
TRITON_CHILD_ENV = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}


def before_vllm_import() -> None:
    """Set :data:`VLLM_IMPORT_ENV` in this process (and so its children) unless already set."""
    for name, value in VLLM_IMPORT_ENV.items():
        os.environ.setdefault(name, value)


def triton_child_env() -> dict[str, str]:
    """The environment of a child process running vLLM's Triton kernels on the CPU."""
    before_vllm_import()
    return {**os.environ, **TRITON_CHILD_ENV}
