"""Each importer: a faithful record, and clear errors naming file, record, site and field."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from importer_helpers import (
    SM70_LOG,
    as_dict,
    record_to_npz,
    record_to_safetensors,
    save_safetensors,
    valid_records,
)
from store_helpers import assert_records_equal

from forensics.errors import CaptureFormatError, UnknownSiteError, UnsafeInputError
from forensics.importers import import_sources, read_source
from forensics.store.reader import load


def _torch_dict(record_dict: dict) -> dict:
    return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
            for k, v in record_dict.items()}


def test_pt_list_of_dicts_round_trips(tmp_path: Path) -> None:
    records = valid_records()[:4]
    torch.save([_torch_dict(as_dict(r)) for r in records], tmp_path / "dump.pt")
    imported = read_source(tmp_path / "dump.pt").records
    for i, (a, b) in enumerate(zip(records, imported, strict=True)):
        assert_records_equal(a, b, f"record {i}")
    assert imported[0]["prev_positions"].dtype == np.int64


def test_pt_single_dict_with_tails_and_tensor_step(tmp_path: Path) -> None:
    raw = {"site": "async_output", "step": torch.tensor(7), "req_ids": ["a", "b"],
           "prev_req_id_to_index": {"a": 0, "b": 1},
           "sampled_token_ids_cpu": torch.tensor([[5, -1], [6, 7]], dtype=torch.int32),
           "output_tail": [[-1, -1], [-1]], "output_len": torch.tensor([10, 4], dtype=torch.int32),
           "vocab_size": 100}
    torch.save(raw, tmp_path / "one.pt")
    (record,) = read_source(tmp_path / "one.pt").records
    assert record.step == 7 and record["output_tail"] == [[-1, -1], [-1]]
    assert record["sampled_token_ids_cpu"].dtype == np.int32


class Canary:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (open, (self.path, "w"))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pt_with_pickled_code_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    torch.save({"site": "embedding", "step": 0, "boom": Canary(str(canary))},
               tmp_path / "evil.pt")
    with open(tmp_path / "evil_plain.pt", "wb") as handle:  # a bare pickle, not a zip archive
        pickle.dump([Canary(str(canary))], handle)
    assert not canary.exists()
    for name in ("evil.pt", "evil_plain.pt"):
        with pytest.raises(UnsafeInputError, match="pickled code"):
            read_source(tmp_path / name)
        with pytest.raises(UnsafeInputError):
            import_sources([tmp_path / name], tmp_path / "out.capture")
    assert not canary.exists()
    assert not (tmp_path / "out.capture").exists()


@pytest.mark.parametrize(("change", "match"), [
    ({"site": "nope"}, r"record 1 in 'bad.pt'.*unknown site 'nope'"),
    ({"step": 1.5}, r"record 1 in 'bad.pt' \(site 'embedding'\): 'step' must be"),
    ({"step": None}, r"'step' must be a non-negative integer"),
    ({"input_ids": torch.zeros(3)}, r"record 1 in 'bad.pt' \(site 'embedding'\): field "
                                    r"'input_ids' must be an integer tensor"),
    ({"input_ids": torch.zeros(2, 2, dtype=torch.int32)}, r"'input_ids' must be 1-dim"),
    ({"num_embeddings": None}, r"field 'num_embeddings' must be an integer"),
    ({"extra": 1}, r"unknown field 'extra'"),
])
def test_pt_errors_name_file_record_site_field(tmp_path: Path, change: dict, match: str) -> None:
    good = {"site": "embedding", "step": 0, "input_ids": torch.arange(3, dtype=torch.int32),
            "num_embeddings": 10}
    torch.save([good, {**good, **change}], tmp_path / "bad.pt")
    with pytest.raises((CaptureFormatError, UnknownSiteError), match=match):
        read_source(tmp_path / "bad.pt")


def test_pt_missing_field_is_named(tmp_path: Path) -> None:
    torch.save({"site": "embedding", "step": 0, "num_embeddings": 3}, tmp_path / "m.pt")
    with pytest.raises(CaptureFormatError, match=r"record 0 in 'm.pt'.*missing field 'input_ids'"):
        read_source(tmp_path / "m.pt")


def test_safetensors_round_trip_every_site(tmp_path: Path) -> None:
    for i, record in enumerate(valid_records()[:4]):
        path = record_to_safetensors(tmp_path / f"r{i}.safetensors", record)
        (back,) = read_source(path).records
        assert_records_equal(record, back, path.name)


def test_safetensors_errors(tmp_path: Path) -> None:
    path = save_safetensors(tmp_path / "f.safetensors",
                            {"input_ids": np.zeros(3, np.float32)},
                            {"site": "embedding", "step": "0", "num_embeddings": "5"})
    with pytest.raises(CaptureFormatError, match="'input_ids' must be an integer tensor"):
        read_source(path)
    data = bytearray(path.read_bytes())
    data[:8] = (2**60).to_bytes(8, "little")
    (tmp_path / "huge.safetensors").write_bytes(bytes(data))
    with pytest.raises(CaptureFormatError, match="header claims"):
        read_source(tmp_path / "huge.safetensors")
    bad = save_safetensors(tmp_path / "s.safetensors", {"input_ids": np.zeros(3, np.int32)},
                           {"site": "embedding", "step": "x", "num_embeddings": "5"})
    with pytest.raises(CaptureFormatError, match="'step'"):
        read_source(bad)


def test_npz_round_trip_every_site(tmp_path: Path) -> None:
    for i, record in enumerate(valid_records()[:4]):
        path = record_to_npz(tmp_path / f"r{i}.npz", record)
        (back,) = read_source(path).records
        assert_records_equal(record, back, path.name)


def test_npz_object_arrays_are_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "o.npz", site=np.array("embedding"),
             input_ids=np.array([1, None], dtype=object))
    with pytest.raises(UnsafeInputError, match="object array"):
        read_source(tmp_path / "o.npz")


def test_npz_huge_shape_header_is_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "h.npz", site=np.array("embedding"), step=np.array(0),
             input_ids=np.zeros(4, np.int32), num_embeddings=np.array(5))
    import zipfile

    with zipfile.ZipFile(tmp_path / "h.npz") as src:
        members = {n: src.read(n) for n in src.namelist()}
    members["input_ids.npy"] = members["input_ids.npy"].replace(b"(4,)", b"(999999999999,)")
    with zipfile.ZipFile(tmp_path / "h2.npz", "w") as dst:
        for name, data in members.items():
            dst.writestr(name, data)
    with pytest.raises(CaptureFormatError, match="claims shape"):
        read_source(tmp_path / "h2.npz")


def test_log_lines_become_summary_records_and_events(tmp_path: Path) -> None:
    (tmp_path / "engine.log").write_text(SM70_LOG)
    imported = read_source(tmp_path / "engine.log")
    out, temb, named = imported.records
    assert (out.site, out.step, out.summary) == ("async_output", 0, True)
    assert out.fields["min"] == out.fields["max"] == 248320 and out["vocab_size"] == 248320
    assert out["num_placeholders"] == 5 and out["old_no_spec_end"] == 23997 and out["line"] == 2
    assert (temb.site, temb.step) == ("embedding", 1)
    assert (temb["min"], temb["max"], temb["num_embeddings"]) == (0, 248320, 248320)
    assert (named.step, named.rank, named["min"], named["line"]) == (40, 1, -1, 7)
    kinds = [(e["kind"], e["line"]) for e in imported.events]
    assert kinds == [("cuda_assert", 4), ("cuda_error", 6), ("cuda_assert", 8),
                     ("illegal_memory_access", 9)]
    # line 10's EngineDeadError is the API server's report of line 9's crash (T120a)
    assert imported.events[3]["engine_dead"]["line"] == 10
    first = imported.events[0]
    assert first["count"] == 2 and first["detail"] == "srcIndex < srcSelectDimSize"
    # after a probe line naming no step, the crash's step is its order, said unknown (T119b)
    assert first["location"].endswith("Indexing.cu:1515") and first["step"] == 1
    assert first["step_known"] is False
    assert imported.events[2]["step"] == 40 and "step_known" not in imported.events[2]
    assert "ind >=0" in imported.events[2]["detail"]


def test_import_sources_builds_one_capture(tmp_path: Path) -> None:
    (tmp_path / "engine.log").write_text(SM70_LOG)
    torch.save([_torch_dict(as_dict(r)) for r in valid_records()[:2]], tmp_path / "d.pt")
    record_to_npz(tmp_path / "e.npz", valid_records()[3])
    out = import_sources([tmp_path / "d.pt", tmp_path / "e.npz", tmp_path / "engine.log"],
                         tmp_path / "inc.capture")
    capture = load(out)
    assert len(capture) == 6 and len(capture.events) == 4  # EngineDeadError joins its crash
    assert capture.manifest["sources"] == ["d.pt", "e.npz", "engine.log"]
    assert json.loads(json.dumps(capture.summary()))["sites"]["embedding"] == 3
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(CaptureFormatError, match="unsupported source type"):
        import_sources([tmp_path / "x.csv"], tmp_path / "o.capture")
