"""Hostile input, round 17 (fix17b): a small foreign dump that cost a lot before a check
refused it. A ``.safetensors`` header of 1.37 million ``__metadata__`` keys is counted before
it is parsed (T93a); a ``.pt`` pickle's record dict of 900,000 keys is counted from its opcodes
before torch is imported or loads it (T93b)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_round4_importers import refused

from forensics.importers import read_source
from forensics.validate import max_fields

# ------------------------------------------------------------------ T93a: a header's items


def _header_file(path: Path, header: dict[str, object]) -> Path:
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text)
    return path


def test_a_safetensors_header_of_many_keys_is_refused_before_it_is_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A header of 1.37 million ``__metadata__`` keys (16 MB, within the header's cap) was
    parsed whole (400 MB, 1.4 s) before the field count refused it; its strings and commas are
    now counted first, no further than one record's needs, and the file is refused unparsed
    in one line naming it, the header and the fix."""
    from forensics.importers import safetensors_

    parsed: list[str] = []
    monkeypatch.setattr(safetensors_, "strict_json", lambda text: parsed.append(text[:40]))
    meta = {"site": "embedding", "step": "1", **{f"k{i}": "" for i in range(20_000)}}
    source = _header_file(tmp_path / "many.safetensors", {"__metadata__": meta})
    cap = safetensors_.HEADER_ITEMS * (max_fields() + 1)
    refused(source, tmp_path, capsys, f"header holds more than {cap} JSON strings",
            "one record per file")
    assert parsed == []


def test_a_safetensors_header_of_many_list_items_is_refused_before_it_is_parsed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A shape of a million dims (a list JSON builds a million items of) is refused by the
    same count, from its commas outside strings."""
    from forensics.importers import safetensors_

    monkeypatch.setattr(safetensors_, "strict_json", lambda text: pytest.fail("parsed"))
    source = _header_file(tmp_path / "dims.safetensors", {
        "__metadata__": {"site": "embedding", "step": "1"},
        "input_ids": {"dtype": "I64", "shape": [0] * 1_000_000, "data_offsets": [0, 0]}})
    refused(source, tmp_path, capsys, "JSON commas outside strings", "long lists as tensors")


def test_keys_and_commas_inside_metadata_strings_are_not_counted(tmp_path: Path) -> None:
    """A ``batch_change`` record of 3,000 requests written by the ``safetensors`` package:
    its ``prev_req_id_to_index`` and ``req_ids`` are JSON texts in ``__metadata__`` strings,
    thousands of escaped quotes, commas and colons (ids holding a quote and a backslash too),
    none of them counted: it imports whole."""
    from safetensors.numpy import save_file

    n = 3_000
    ids = [f'r"{i}\\' if i % 2 else f"req-{i}" for i in range(n)]
    tensors = {name: np.zeros(n, np.int32) for name in (
        "prev_positions", "valid_sampled_token_count", "num_computed_tokens",
        "num_accepted_tokens", "prev_num_draft_tokens", "cpu_num_computed_tokens")}
    meta = {"site": "batch_change", "step": "3", "req_ids": json.dumps(ids),
            "prev_req_id_to_index": json.dumps({r: i for i, r in enumerate(ids)})}
    source = tmp_path / "wide.safetensors"
    save_file(tensors, str(source), metadata=meta)
    (record,) = read_source(source).records
    assert record.fields["req_ids"] == ids and len(record.fields["prev_req_id_to_index"]) == n


@pytest.mark.parametrize("tensors", [0, 1, max_fields()])
def test_the_header_count_passes_every_header_of_a_records_fields(tensors: int,
                                                                 tmp_path: Path) -> None:
    """The most one record's header holds, as the ``safetensors`` package writes it: as many
    fields as any site declares, tensors of 8 long dims or ``__metadata__`` keys, passes the
    count (the fields are judged after it, by their names)."""
    from safetensors.numpy import save_file

    from forensics.importers import safetensors_

    meta = {f"field_{i}": json.dumps(list(range(100))) for i in range(max_fields() - tensors)}
    save_file({f"tensor_{i}": np.zeros((1,) * 8, np.int64) for i in range(tensors)},
              str(tmp_path / "most.safetensors"), metadata=meta or None)
    raw = (tmp_path / "most.safetensors").read_bytes()
    size = int.from_bytes(raw[:8], "little")
    safetensors_._check_items(raw[8:8 + size], tmp_path / "most.safetensors")
