"""Launch real vLLM kernels on CPU (Triton's interpreter) with the flight recorder on, one
case per line of a JSON cases file, into a capture under DIR (run as a script:
``record_launches.py DIR CASES.json``). Each case begins a new engine step."""

from __future__ import annotations

import json
import os
import sys

os.environ.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="", FORENSICS_KERNELS="all",
                  FORENSICS_WRITER="thread", FORENSICS_DIR=sys.argv[1])


def pos_seq_lens(case: dict) -> None:
    """``prepare_pos_seq_lens`` over 4 request slots with the case's ``idx_mapping``."""
    import torch
    from vllm.v1.worker.gpu.input_batch import prepare_pos_seq_lens

    idx = torch.tensor(case["idx"], dtype=torch.int32)
    lens = [1 + i % 3 for i in range(len(case["idx"]))]
    qsl = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32)
    nct = torch.tensor([5, 7, 9, 11], dtype=torch.int32)
    pos = torch.zeros(int(qsl[-1]) + 2, dtype=torch.int64)
    seq_lens = torch.zeros(4, dtype=torch.int32)
    prepare_pos_seq_lens(idx, qsl, nct, pos, seq_lens)


def slot_mappings(case: dict) -> None:
    """``_compute_slot_mappings_kernel`` for one KV group (block size 4, 3 blocks a row, 4
    request slots) at the case's positions, one request per ``idx`` entry."""
    import torch
    from vllm.v1.worker.gpu.block_table import _compute_slot_mappings_kernel

    block_table = torch.arange(12, dtype=torch.int32).reshape(4, 3) + 100
    ptrs = torch.tensor([block_table.data_ptr()], dtype=torch.int64)
    idx = torch.tensor(case["idx"], dtype=torch.int32)
    pos = torch.tensor(case["pos"], dtype=torch.int64)
    per = len(case["pos"]) // len(case["idx"])
    qsl = torch.tensor([i * per for i in range(len(case["idx"]) + 1)], dtype=torch.int32)
    out = torch.zeros(1, 16, dtype=torch.int64)
    one = torch.ones(1, dtype=torch.int32)
    _compute_slot_mappings_kernel[(1, len(case["idx"]) + 1)](
        out.shape[1], idx, qsl, pos, ptrs, torch.tensor([3], dtype=torch.int32),
        torch.tensor([4], dtype=torch.int32), one.bool(), torch.zeros(1, dtype=torch.bool),
        out, out.stride(0), 0, CP_SIZE=1, CP_INTERLEAVE=1, PAD_ID=-1, TRITON_BLOCK_SIZE=16)


def combine(case: dict) -> None:
    """``combine_sampled_and_draft_tokens``: two decode requests with one draft each."""
    import torch
    from vllm.v1.worker.gpu.input_batch import combine_sampled_and_draft_tokens

    i32 = torch.int32
    combine_sampled_and_draft_tokens(
        torch.zeros(4, dtype=i32), torch.tensor(case["idx"], dtype=i32),
        torch.tensor([[11], [12], [13], [14]], dtype=torch.int64),
        torch.tensor([0, 2, 4], dtype=i32), torch.tensor([8, 9], dtype=i32),
        torch.tensor([3, 3, 3, 3], dtype=i32),
        torch.tensor([[21, 0], [22, 0], [23, 0], [24, 0]], dtype=torch.int64),
        torch.tensor([0, 2, 4], dtype=i32), 4)


def main() -> None:
    """Record every case, one step each, then stop the probe (the recorder writes)."""
    from forensics.probe import plugin

    plugin.register()
    session = plugin.session()
    for line in open(sys.argv[2], encoding="utf-8"):
        case = json.loads(line)
        session.begin_step()
        globals()[case["kernel"]](case)
    print(session.settings.capture)
    plugin.stop()


if __name__ == "__main__":
    main()
