"""A stand-in for Model Runner V2's kernel worker (stdlib only, no vLLM): it says it is ready,
then answers each record ``index_error``, except a record of step 1: its answer is the line in
``FORENSICS_TEST_BAD_ANSWER`` (cut off, or no answer), and it goes on running; its first line is
``FORENSICS_TEST_BAD_HELLO`` where that is set."""

from __future__ import annotations

import json
import os
import sys

print(os.environ.get("FORENSICS_TEST_BAD_HELLO", json.dumps({"ready": True})), flush=True)
for line in sys.stdin:
    for request in json.loads(line)["batch"]:
        if " at step 1," in request["where"]:
            print(os.environ["FORENSICS_TEST_BAD_ANSWER"], flush=True)
        else:
            print(json.dumps({"status": "index_error", "message": "IndexError: stand-in"}),
                  flush=True)
