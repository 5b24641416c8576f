"""Hostile input, round 13 (attack C): ``forensics kernels`` (its launch records, the replay
worker's messages, the index contracts) and the probe's reading of its settings.

Each test is an attack a capture author or a local user made that once worked. No test here
imports vLLM; the tests of the replay worker run Triton's interpreter on a tiny kernel of their
own (as :mod:`tests.hostile.test_round9_attack9a` does).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.hostile.test_round4_kernels import launch


def b64(array: np.ndarray) -> str:
    """``array``'s bytes as base64 text."""
    return base64.b64encode(array.tobytes()).decode("ascii")


# ------------------------------------- 1. a stride over a dimension of one element


@pytest.mark.parametrize("view", [
    {"shape": [1], "strides": [2**62]},            # once: OverflowError, an internal error
    {"shape": [1, 2], "strides": [-(2**62), 1]},
    {"shape": [0, 2], "strides": [1, 2**62]},      # an empty view: every stride steps nowhere
])
def test_a_stride_over_one_element_is_read_as_nothing(view: dict[str, Any]) -> None:
    """A stride over a dimension of one element (or any stride of an empty view) steps over
    nothing, so the format's check of the view's reach let 2**62 through; the contracts read
    the storage through numpy with that stride in bytes (2**64: past int64) and ``forensics
    kernels`` ended in 'internal error OverflowError'. The stride is read as 0 now: the launch
    is judged as the same view (a slot past ``max_num_reqs`` still found)."""
    from forensics.kernels import contracts
    from forensics.kernels.format import check_launch

    event = launch(**view)
    event["tensors"]["idx_mapping_ptr"]["data"] = b64(np.array([7, 1], dtype=np.int32))
    found = contracts.check(check_launch(event, "test"), {})
    expected = [] if 0 in view["shape"] else [([0], [7])]
    assert [(f["elements"], f["values"]) for f in found] == expected, found
