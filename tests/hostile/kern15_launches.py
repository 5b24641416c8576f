"""Launch REAL vLLM kernels on CPU with the flight recorder on (round 15, kern15): views of one
storage, storages that partly overlap, and ``_compute_slot_mappings_kernel`` under context
parallelism. Run as ``kern15_launches.py DIR CASES.json``, as
:mod:`tests.kernels.record_launches` (whose recording loop it reuses, these cases added)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernels"))
import record_launches  # noqa: E402  (sets the probe's environment first)


def shared_views(case: dict[str, Any]) -> None:
    """``prepare_pos_seq_lens`` of two requests whose int32 arguments are views of ONE storage
    (``idx_mapping`` 0-1, ``query_start_loc`` 2-4, ``num_computed_tokens`` 5-8, ``seq_lens``
    9-12): the kernel writes ``seq_lens`` through one view of the memory the others see."""
    import torch
    from vllm.v1.worker.gpu.input_batch import prepare_pos_seq_lens

    buf = torch.tensor([1, 0, 0, 1, 2, 5, 7, 9, 11, 0, 0, 0, 0, 0, 0, 0], dtype=torch.int32)
    prepare_pos_seq_lens(buf[0:2], buf[2:5], buf[5:9], torch.zeros(4, dtype=torch.int64),
                         buf[9:13])


def overlapping(case: dict[str, Any]) -> None:
    """The same launch on storages that partly overlap (each made by numpy over one array):
    ``num_computed_tokens``' storage is elements 1-11, ``seq_lens``' 8-15: the kernel's write
    of ``seq_lens`` (elements 9-12) changes bytes of ``num_computed_tokens``' storage. (No two
    storages start at one address: Triton's interpreter keys its copies by a storage's
    address, and took one for the other.)"""
    import numpy as np
    import torch
    from vllm.v1.worker.gpu.input_batch import prepare_pos_seq_lens

    b = np.array([1, 0, 0, 1, 2, 5, 7, 9, 11, 0, 0, 0, 0, 0, 0, 0], dtype=np.int32)
    idx, qsl = torch.from_numpy(b[0:2]), torch.from_numpy(b[2:5])
    nct, seq_lens = torch.from_numpy(b[1:12])[4:8], torch.from_numpy(b[8:16])[1:5]
    prepare_pos_seq_lens(idx, qsl, nct, torch.zeros(4, dtype=torch.int64), seq_lens)


def cp_slots(case: dict[str, Any]) -> None:
    """``_compute_slot_mappings_kernel`` under context parallelism (2 ranks, interleave 1, the
    case's ``rank``), one sharded KV group of block size 4 and rows of 3 blocks, one request
    at the case's positions."""
    import torch
    from vllm.v1.worker.gpu.block_table import _compute_slot_mappings_kernel

    block_table = torch.arange(12, dtype=torch.int32).reshape(4, 3) + 100
    ptrs = torch.tensor([block_table.data_ptr()], dtype=torch.int64)
    pos = torch.tensor(case["pos"], dtype=torch.int64)
    qsl = torch.tensor([0, len(case["pos"])], dtype=torch.int32)
    out = torch.zeros(1, 16, dtype=torch.int64)
    _compute_slot_mappings_kernel[(1, 2)](
        out.shape[1], torch.tensor([0], dtype=torch.int32), qsl, pos, ptrs,
        torch.tensor([3], dtype=torch.int32), torch.tensor([4], dtype=torch.int32),
        torch.ones(1, dtype=torch.bool), torch.ones(1, dtype=torch.bool), out, out.stride(0),
        case["rank"], CP_SIZE=2, CP_INTERLEAVE=1, PAD_ID=-1, TRITON_BLOCK_SIZE=16)


if __name__ == "__main__":
    for case in (shared_views, overlapping, cp_slots):
        setattr(record_launches, case.__name__, case)
    record_launches.main()
