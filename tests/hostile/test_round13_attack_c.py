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


# ------------------------------------- 2. the text of an unrecorded argument, a pointer's table


@pytest.mark.parametrize("field, value", [
    ("unrecorded", {"max_num_reqs": "x" * 301}),         # was written whole into the reason
    ("unrecorded", {"not a name\n": "a list"}),          # a line break in the reason
    ("pointer_of", "idx\x1b[2Jtable"),                   # ESC into the 'not replayed' line
])
def test_the_text_of_unrecorded_arguments_and_pointer_tables_is_checked(
        field: str, value: Any) -> None:
    """``unrecorded``'s names and reasons, and a tensor's ``pointer_of``, were the only texts
    of a launch record read unchecked: the replay worker wrote them raw into the launch's
    reason ('argument NAME was not recorded (WHY)', 'tensor T points from TABLE, not
    recorded'), so a name held a line break, a reason ran to any length, and ESC and the text
    ``\\x1b`` read alike on the 'not replayed' line. Each is held to a name (and a reason to
    300 characters), refused in one line naming the field, as every other text of a launch."""
    from forensics.errors import CaptureFormatError
    from forensics.kernels.format import check_launch

    event = launch()
    if field == "unrecorded":
        event["unrecorded"] = value
    else:
        event["tensors"]["idx_mapping_ptr"].update(pointer_of=value, pointer_index=0)
    with pytest.raises(CaptureFormatError) as raised:
        check_launch(event, "capture 'k.capture' kernel_launch event 0")
    line = str(raised.value)
    assert f"field {field!r}" in line and len(line.splitlines()) == 1 and "\x1b" not in line


def test_an_unrecorded_arguments_reason_is_escaped_as_a_value(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reason an argument was not recorded stands in the replay's reason escaped as a
    value: ESC and the text ``\\x1b`` read apart on the 'not replayed' line (through
    ``inert``, which leaves backslashes as they are, both read ``\\x1b``)."""
    from forensics.escaping import inert
    from forensics.kernels import replay_worker

    reasons = []
    for why in ("a \x1b[2J list", "a \\x1b[2J list"):
        event = launch()
        event["unrecorded"] = {"max_num_reqs": why}
        event["scalars"] = {}  # one part per parameter (T89c)
        monkeypatch.setattr(replay_worker, "_kernel", lambda launch: type("K", (), {
            "arg_names": ["idx_mapping_ptr", "max_num_reqs"], "fn": None})())
        reasons.append(inert(replay_worker.answer(json.dumps(event))["reason"]))
    assert reasons[0] != reasons[1], reasons


# ------------------------------------- 3. a masked row's slot (-1) is no broken contract


def test_a_masked_rows_slot_is_not_a_broken_contract() -> None:
    """vLLM marks a masked row of ``idx_mapping`` with ``-1`` (a dummy or CUDA-graph padding
    request, a row filtered out: ``postprocess_sampled``'s "May include -1 for masked
    entries"), and its kernels skip it (``_post_update_kernel``: ``if req_state_idx < 0:
    return``; ``_compute_slot_mappings_kernel``, the Gumbel sampler: ``mask=req_state_idx >=
    0``). The contract held every entry to ``[0, max_num_reqs)``, so a genuine launch with a
    masked row was a ``kernel_contract`` finding ('request slot [-1], outside [0, 4)') and
    ``forensics kernels`` exited 1. A slot past the bound is still one."""
    from forensics.kernels import contracts
    from forensics.kernels.format import check_launch

    masked = launch(data=b64(np.array([0, -1], dtype=np.int32)))
    assert contracts.check(check_launch(masked, "test"), {}) == []
    past = launch(data=b64(np.array([-1, 4], dtype=np.int32)))
    found = contracts.check(check_launch(past, "test"), {})
    assert [(f["elements"], f["values"], f["count"]) for f in found] == [([1], [4], 1)], found


# ------------------------------------- 4. a bad FORENSICS_KERNELS_* setting


@pytest.mark.parametrize("name, value", [("FORENSICS_KERNELS_KEEP", "zero"),
                                         ("FORENSICS_KERNELS_BUDGET", "-1")])
def test_a_bad_kernel_setting_is_refused_before_the_probe_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    """The flight recorder's settings were read last, once the probe had made its capture
    folder and installed its session, hooks, exit and SIGTERM handlers: the ConfigurationError
    left them all in place, and a second ``register()`` in the process returned quietly with
    the probe recording and no flight recorder. The setting is refused before anything is
    started now: no session, no capture folder."""
    from forensics.errors import ConfigurationError
    from forensics.probe import plugin

    monkeypatch.setenv("FORENSICS_DIR", str(tmp_path / "caps"))
    monkeypatch.setenv("FORENSICS_WRITER", "thread")
    monkeypatch.setenv("FORENSICS_KERNELS", "all")
    monkeypatch.setenv(name, value)
    for var in ("FORENSICS_CAPTURE", "FORENSICS_CAPTURE_OWNER", "FORENSICS_ENGINE_ID"):
        monkeypatch.delenv(var, raising=False)
    try:
        with pytest.raises(ConfigurationError, match=name):
            plugin.register()
        assert plugin.session() is None
        assert not (tmp_path / "caps").exists() or not any((tmp_path / "caps").iterdir())
    finally:
        plugin.stop()


# ------------------------------------- 5. a load through an empty tensor's null pointer


def test_a_load_through_an_empty_tensor_is_its_own(tmp_path: Path) -> None:
    """Torch's ``data_ptr()`` of an empty tensor is 0 (the live launch was handed a null
    pointer too), so the replay's loads through an empty ``x_ptr`` were at addresses 0 and 4,
    which the replay attributed to the tensor nearest them: 'out_ptr element(s)
    [-23539152564992, -23539152564991]', another argument at elements nothing holds. An access
    through the null pointer of the launch's one empty tensor is that tensor's, at its
    elements 0 and 1 (its storage holds 2 elements: the view is empty)."""
    from tests.hostile.test_round9_attack9a import replayed, scale

    event = scale(2.0)
    event["tensors"]["x_ptr"].update(shape=[0], strides=[1], offset=0)
    [answer] = replayed(tmp_path, [event])
    assert answer["status"] == "replayed", answer
    assert [(a["argument"], a["op"], a["elements"], a["count"]) for a in answer["accesses"]] \
        == [("x_ptr", "load", [0, 1], 2)], answer
