"""GPU check of the probe's asynchronous copy path (needs a CUDA device; NOT run in CI).

Run on a machine with a GPU:  .venv/bin/python scripts/gpu_probe_check.py [--calls 200]

It wraps a plain copy of vLLM 0.33.0's ``update_num_computed_tokens_for_batch_change`` (no vLLM
import), calls it on CUDA tensors in record mode, and checks that:
1. no ``synchronize()`` (device, stream or event) happens on the recording path;
2. after the final flush, every record's inputs and ``*_after`` fields equal a CPU re-run;
3. it prints the host-side cost per recorded call against an unwrapped call.
Exit 0 when all checks pass, 1 otherwise, 2 without a CUDA device.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from forensics.probe import hooks, plugin
from forensics.probe.reference import batch_change_reference
from forensics.probe.settings import Settings

plain = batch_change_reference


def inputs(step: int, device: str) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(step)
    n, m = 64, 256
    i32 = torch.int32
    return tuple(t.to(device) for t in (
        torch.randint(0, 1000, (m,), generator=g, dtype=i32), torch.ones(n, dtype=i32),
        torch.randint(-1, n, (n,), generator=g), torch.randint(0, 4, (n,), generator=g,
                                                              dtype=i32),
        torch.randint(0, 3, (m,), generator=g, dtype=i32),
        torch.randint(0, 1000, (n,), generator=g, dtype=i32)))


class SyncCounter:
    """Counts synchronize() calls of the device, streams and events while armed."""

    def __init__(self) -> None:
        self.count, self.armed, self._saved = 0, False, []

    def __enter__(self) -> SyncCounter:
        for owner, name in ((torch.cuda, "synchronize"), (torch.cuda.Event, "synchronize"),
                            (torch.cuda.Stream, "synchronize")):
            original = getattr(owner, name)
            self._saved.append((owner, name, original))
            setattr(owner, name, self._counting(original))
        return self

    def _counting(self, original):
        def counted(*args, **kwargs):
            if self.armed:
                self.count += 1
            return original(*args, **kwargs)
        return counted

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in self._saved:
            setattr(owner, name, original)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    calls = parser.parse_args().calls
    if not torch.cuda.is_available():
        print("gpu_probe_check: no CUDA device; this check needs a GPU", file=sys.stderr)
        return 2
    import forensics

    capture = Path(tempfile.mkdtemp()) / "gpu-check.capture"
    wrapped = hooks.wrap_batch_change(plain)
    bare = [inputs(s, "cuda") for s in range(calls)]
    torch.cuda.synchronize()
    start = time.perf_counter()
    for args in bare:
        plain(*args)
    bare_s = (time.perf_counter() - start) / calls
    session = plugin.start(Settings(directory=capture.parent, capture=capture, ring=4096,
                                    flush_every=64))
    device_args = [inputs(s, "cuda") for s in range(calls)]
    torch.cuda.synchronize()
    with SyncCounter() as syncs:
        syncs.armed = True
        start = time.perf_counter()
        for args in device_args:
            session.begin_step()
            wrapped(*args)
        probe_s = (time.perf_counter() - start) / calls
        syncs.armed = False
        plugin.stop()
    records = list(forensics.load(capture))
    failures = [] if syncs.count == 0 else [f"{syncs.count} synchronize() calls while recording"]
    failures += check_records(records, calls)
    print(f"records {len(records)}/{calls}; host cost per call: bare {bare_s * 1e6:.1f} us, "
          f"recorded {probe_s * 1e6:.1f} us (+{(probe_s - bare_s) * 1e6:.1f} us); "
          f"probe counters {session.counts}")
    for failure in failures:
        print("FAIL:", failure)
    print("gpu_probe_check:", "ok" if not failures else "FAILED")
    return 0 if not failures else 1


def check_records(records: list, calls: int) -> list[str]:
    failures = [] if len(records) == calls else [f"{len(records)} records for {calls} calls"]
    for record in records:
        args = inputs(record.step, "cpu")
        for name, tensor in zip(("num_computed_tokens", "num_accepted_tokens", "prev_positions",
                                 "valid_sampled_token_count", "prev_num_draft_tokens",
                                 "cpu_num_computed_tokens"), args, strict=True):
            if not torch.equal(record.tensor(name), tensor):
                failures.append(f"step {record.step}: input {name} differs")
        plain(*args)
        for name, tensor in (("num_computed_tokens_after", args[0]),
                             ("num_accepted_tokens_after", args[1])):
            if not torch.equal(record.tensor(name), tensor):
                failures.append(f"step {record.step}: {name} differs from a CPU re-run")
    return failures[:20]


if __name__ == "__main__":
    sys.exit(main())
