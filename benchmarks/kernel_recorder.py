"""The kernel flight recorder's CPU per launch (issue 41, point 4).

Times :class:`forensics.probe.kernels.FlightRecorder` recording launches of the real
``_prepare_pos_seq_lens_kernel`` of the installed vLLM (a decode step of 64 requests in 256
slots: five integer tensors, 3,076 bytes in all) on CPU tensors: ``before`` (layouts, one copy
of each storage) and ``after`` (one more copy) per launch, the kernel itself not run (in
Triton's interpreter it takes milliseconds, which would bury the figure). Also: the bytes one
launch's ``kernel_launch`` event takes, and the CPU to encode it (paid when the recorder writes,
not per launch). Prints one JSON object; ``--launches N`` sets the count.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    """Record ``--launches`` launches; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--launches", type=int, default=20_000)
    args = parser.parse_args()
    os.environ.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
    import torch
    from vllm.v1.worker.gpu.input_batch import _prepare_pos_seq_lens_kernel as kernel

    from forensics.probe.kernels import FlightRecorder, event_fields

    class Steps:
        """The probe session's step and rank (a new step every 8 launches)."""
        step, rank = 0, 0

    steps = Steps()
    recorder = FlightRecorder(("*",), 32, 64 << 10, steps)
    recorder._torch = torch
    i32 = torch.int32
    tensors = (torch.zeros(64, dtype=torch.int64), torch.zeros(256, dtype=i32),
               torch.arange(64, dtype=i32), torch.arange(65, dtype=i32),
               torch.zeros(256, dtype=i32))
    launch_args = (*tensors, 256)
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    meta = recorder.kernel(kernel)
    assert meta.wanted
    with torch.inference_mode():
        for _ in range(200):  # warm up
            recorder.after(recorder.before(meta, launch_args, {"BLOCK_SIZE": 1024}, (65,)))
        start = time.process_time()
        for n in range(args.launches):
            steps.step = n // 8
            pending = recorder.before(meta, launch_args, {"BLOCK_SIZE": 1024}, (65,))
            recorder.after(pending)
        per_launch = (time.process_time() - start) / args.launches
    kept = recorder.take()
    start = time.process_time()
    encoded = [json.dumps(event_fields(p)) for p in kept]
    encode = (time.process_time() - start) / max(len(kept), 1)
    print(json.dumps({"launches": args.launches, "tensor_bytes": nbytes,
                      "cpu_us_per_launch": round(per_launch * 1e6, 2),
                      "launches_kept": len(kept),
                      "event_bytes_per_launch": round(sum(map(len, encoded)) / len(kept)),
                      "encode_us_per_launch": round(encode * 1e6, 2),
                      "torch_threads": torch.get_num_threads()}, indent=1))


if __name__ == "__main__":
    main()
