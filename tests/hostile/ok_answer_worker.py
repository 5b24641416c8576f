"""A stand-in for Model Runner V2's kernel worker (stdlib only, no vLLM): it says it is ready,
then answers each record ``index_error``, except a record of step 1: it answers ``ok`` naming
the outputs file of ``FORENSICS_TEST_OK_OUTPUTS`` (``asked``: its request's), holding the text
of ``FORENSICS_TEST_OK_BYTES`` where that is set (else none is written)."""

from __future__ import annotations

import json
import os
import sys

print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    for request in json.loads(line)["batch"]:
        if " at step 1," not in request["where"]:
            print(json.dumps({"status": "index_error", "message": "IndexError: stand-in"}),
                  flush=True)
            continue
        named = os.environ["FORENSICS_TEST_OK_OUTPUTS"]
        named = request["outputs"] if named == "asked" else named
        if "FORENSICS_TEST_OK_BYTES" in os.environ:
            with open(named, "w") as file:
                file.write(os.environ["FORENSICS_TEST_OK_BYTES"])
        print(json.dumps({"status": "ok", "message": "", "outputs": named}), flush=True)
