"""Kernel records (the flight recorder's launches) and the offline sanitizer.

- :mod:`forensics.kernels.format`: a ``kernel_launch`` event's fields, encoded and decoded
  (numpy only; the probe writes them, the reader checks them);
- :mod:`forensics.kernels.sanitizer`: replays recorded launches in Triton's interpreter (in a
  worker process, :mod:`forensics.kernels.replay_worker`) and turns what it observed into
  findings;
- :mod:`forensics.kernels.interpreter`: Triton's interpreter with every masked load and store
  checked first (the replay worker's and the ``vllm`` variant's Triton worker's one hook);
- :mod:`forensics.kernels.bounds`: which lanes of an access lie inside the launch's tensors
  (both workers' one out-of-bounds judgement);
- :mod:`forensics.kernels.coverage`: the Triton kernels of the installed vLLM's worker packages,
  read from their source (nothing imported).

Importing this package imports neither torch, vLLM nor Triton.
"""

from __future__ import annotations
