"""The ``Site`` interface: what a malformed declaration is refused with, and the operations
derived from a site's functions (the model of a flag, the many-record and columnar runs)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from forensics.outcome import Outcome
from forensics.records import FieldSpec, Record
from forensics.schema import SiteDefinitionError
from forensics.sites import (
    SITES,
    async_output,
    batch_change,
    combine_tokens,
    embedding,
    get_site,
    post_update,
    prepare_input_ids,
    rejection_drafts,
)
from forensics.sites.base import Site
from forensics.sites.core import BatchRun, Checks


def _toy_run(cols: Any, patched: bool) -> BatchRun:
    """Record i of a toy run: ``index_error`` when unpatched, ``ok`` patched."""
    status = np.full(cols.rows, 0 if patched else 1, dtype=np.int8)
    return BatchRun(status, {i: "unpatched" for i in np.flatnonzero(status).tolist()},
                    Checks.concat([]), [None] * cols.rows)


TOY = Site(name="toy", fields=(FieldSpec("index", "tensor"), FieldSpec("size", "int")),
           output_fields=(), summary_bound="size", summary_tensor="table",
           run_batch=_toy_run, checks=lambda r, o: Checks.empty())


def test_each_built_in_module_declares_the_site_the_registry_holds() -> None:
    modules = (batch_change, prepare_input_ids, async_output, rejection_drafts, post_update,
               combine_tokens, embedding)
    assert SITES == tuple(m.NAME for m in modules)
    for module in modules:
        site = get_site(module.NAME)
        assert site is module.SITE
        assert (site.fields, site.output_fields, site.summary_bound, site.summary_tensor) == (
            module.FIELDS, module.OUTPUT_FIELDS, module.SUMMARY_BOUND, module.SUMMARY_TENSOR)
        assert site.prepare_columns is getattr(module, "prepare_columns", None)
        assert site.run_batch is module.run_batch
        assert site.check_record is module.check_record
        assert repr(site) == f"Site({module.NAME!r})"


@pytest.mark.parametrize(("change", "message"), [
    ({"name": "no spaces"}, "must be 1-64 characters of a-z 0-9 _"),
    ({"fields": [FieldSpec("index", "tensor")]}, "'fields' must be a tuple"),
    ({"fields": (FieldSpec("a", "int"), FieldSpec("a", "int"))}, "names a field twice"),
    ({"fields": (FieldSpec("a", "float"),)}, "unknown kind"),
    ({"output_fields": ("nope",)}, "not fields: ['nope']"),
    ({"summary_bound": ""}, "'summary_bound' must be a non-empty str"),
    ({"checks": None}, "'checks' must be a function, got NoneType"),
    ({"run_batch": None}, "'run_batch' must be a function, got NoneType"),
    ({"check_batch": 3}, "'check_batch' must be a function, got int"),
    ({"prepare_columns": 3}, "'prepare_columns' must be a function, got int"),
    ({"log_line": "SM70-TEMB"}, "'log_line' must be a LogLine or None"),
])
def test_a_malformed_site_is_refused_naming_the_attribute(change: dict[str, object],
                                                          message: str) -> None:
    with pytest.raises(SiteDefinitionError) as info:
        replace(TOY, **change)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_the_model_of_a_flag_is_the_run_on_a_batch_of_one() -> None:
    record = Record("toy", 0, fields={"index": np.zeros(1, np.int64), "size": 1})
    upstream, patched = TOY.model(False)(record), TOY.model(True)(record)
    assert (upstream.status, upstream.message) == ("index_error", "unpatched")
    assert (patched.status, patched.message, patched.outputs) == ("ok", "", {})
    assert TOY.upstream(record).status == "index_error" and TOY.patched(record).status == "ok"
    assert upstream.checks is not None and upstream.accesses == []  # judged from its run


def test_a_run_that_gives_outcomes_is_the_per_record_form() -> None:
    """``BatchRun.outcome`` gives the per-record form its outputs and accesses."""
    made = Outcome("ok", "", {"out": 1}, [])

    def run_batch(cols: Any, patched: bool) -> BatchRun:
        run = _toy_run(cols, True)
        run.outcome = lambda i: made
        return run

    outcome = replace(TOY, run_batch=run_batch).upstream(
        Record("toy", 0, fields={"index": np.zeros(1, np.int64), "size": 1}))
    assert outcome.outputs == {"out": 1} and outcome.checks is not None


def test_the_columnar_run_of_records_is_run_batch_of_prepare() -> None:
    site = get_site("embedding")
    record = Record("embedding", 0, fields={"input_ids": np.array([0, 7]),
                                            "num_embeddings": 4})
    run = site.run_records([record], patched=True)
    assert run is not None
    assert [f["value"] for f in run.checks.findings(run.req_ids)[0]] == [7]
    assert site.field_specs().keys() == {s.name for s in site.fields}
    assert "num_computed_tokens_after" in get_site("batch_change").field_specs()


def test_the_run_of_records_reads_them_as_columns() -> None:
    """The run of Records reads them through ``prepare_columns`` (a batch of Records)."""
    seen = []

    def prepare_columns(cols: Any) -> Any:
        seen.append(cols.ints("size").tolist())
        return cols

    site = replace(TOY, prepare_columns=prepare_columns)
    record = Record("toy", 0, fields={"index": np.zeros(1, np.int64), "size": 3})
    assert site.run_records([record], False).status.tolist() == [1]
    assert seen == [[3]]


def test_the_run_of_records_resolves_records_inherited_from_another_run() -> None:
    """A columnar run that takes some records from another run (``base``, ``inherited``)
    comes out of ``run_records`` whole: its checks and statuses are every record's own."""
    site = get_site("embedding")
    records = [Record("embedding", 0, fields={"input_ids": np.array(ids),
                                              "num_embeddings": 4}) for ids in ([7], [1])]
    upstream = site.run_records(records, False)
    assert upstream is not None

    def run_batch(prepared: Any, patched: bool) -> BatchRun:
        clean = BatchRun(np.zeros(2, np.int8), {}, Checks.concat([]), prepared.req_ids)
        return BatchRun(clean.status, {}, clean.checks, clean.req_ids, prepared,
                        np.array([True, False]))

    inheriting = replace(site, run_batch=run_batch)
    run = inheriting.run_records(records, True)
    assert run is not None and run.base is None
    assert run.status.tolist() == [upstream.status[0], 0]
    assert list(run.checks.findings(run.req_ids)) == [0]
