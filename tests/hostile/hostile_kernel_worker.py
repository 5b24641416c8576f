"""A stand-in for the kernel sanitizer's replay worker (stdlib only, no vLLM): it says it is
ready, then answers each launch as replayed with nothing found, except a launch of step 1
(it never answers, and never exits by itself) and of step 2 (it dies without an answer)."""

from __future__ import annotations

import json
import sys
import time

print(json.dumps({"ready": True, "note": ""}), flush=True)
for line in sys.stdin:
    step = json.loads(line).get("step")
    if step == 1:
        while True:
            time.sleep(60)
    if step == 2:
        sys.exit(9)
    print(json.dumps({"status": "replayed", "reason": "", "accesses": [], "overflows": [],
                      "differs": []}), flush=True)
