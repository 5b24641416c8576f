"""Captures as data: ``Capture.to_frame(site)`` carries the values (list columns) and
``Capture.to_arrow(site)`` is a pyarrow Table that DuckDB queries with SQL."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

import forensics
from forensics.records import Record
from forensics.store.writer import write_capture

INCIDENT_B = Path(__file__).resolve().parents[2] / "data" / "incident-b-vocab-sentinel.capture"


def test_to_frame_has_values_and_lengths(tmp_path: Path) -> None:
    records = [Record("embedding", s, 0, {"input_ids": np.arange(s + 1, dtype=np.int32),
                                          "num_embeddings": 50, "req_ids": ["a"]})
               for s in range(3)]
    write_capture(tmp_path / "v.capture", records)
    frame = forensics.load(tmp_path / "v.capture").to_frame("embedding")
    assert frame["input_ids"].tolist() == [[0], [0, 1], [0, 1, 2]]
    assert frame["input_ids_len"].tolist() == [1, 2, 3]
    assert frame["req_ids"].tolist() == [["a"]] * 3


def test_to_arrow_types_and_values() -> None:
    capture = forensics.load(INCIDENT_B)
    table = capture.to_arrow("async_output")
    assert isinstance(table, pa.Table) and table.num_rows == len(capture.records("async_output"))
    assert table.schema.field("sampled_token_ids_cpu").type == pa.list_(pa.list_(pa.int64()))
    assert table.schema.field("req_ids").type == pa.list_(pa.string())
    record = capture.records("async_output")[0]
    assert table.column("sampled_token_ids_cpu")[0].as_py() == \
        record.fields["sampled_token_ids_cpu"].tolist()


def test_to_arrow_types_an_absent_field_from_the_site_schema(tmp_path: Path) -> None:
    """A field no record holds is a null column of its schema type (a tensor a list of int64,
    a str_list a list of strings, an index_map a map), not an int64 null column."""
    records = [Record("embedding", s, 0, {"input_ids": np.arange(3, dtype=np.int32),
                                          "num_embeddings": 50}) for s in range(2)]
    write_capture(tmp_path / "bare.capture", records)
    table = forensics.load(tmp_path / "bare.capture").to_arrow("embedding")
    schema = table.schema
    assert schema.field("cu_num_tokens").type == pa.list_(pa.int64())
    assert schema.field("req_ids").type == pa.list_(pa.string())
    assert schema.field("tp_size").type == pa.int64()
    assert schema.field("cu_num_tokens_len").type == pa.int64()
    assert table.column("cu_num_tokens").null_count == 2
    bundled = forensics.load(INCIDENT_B)
    assert bundled.to_arrow("prepare_input_ids").schema.field("input_ids_device").type == \
        pa.list_(pa.int64())
    assert bundled.to_arrow("batch_change").schema.field("prev_req_id_to_index").type == \
        pa.map_(pa.string(), pa.int64())


def test_duckdb_sql_over_a_capture() -> None:
    embedding = forensics.load(INCIDENT_B).to_arrow("embedding")  # noqa: F841 (read by SQL)
    rows = duckdb.sql(
        "SELECT step, rank, id FROM (SELECT step, rank, unnest(input_ids) AS id, "
        "num_embeddings FROM embedding) WHERE id >= num_embeddings ORDER BY step").fetchall()
    assert rows == [(14, 0, 248320)]
