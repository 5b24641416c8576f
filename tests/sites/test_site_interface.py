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


def _outcome(status: str) -> Outcome:
    return Outcome(status, "", {}, [])


TOY = Site(name="toy", fields=(FieldSpec("index", "tensor"), FieldSpec("size", "int")),
           output_fields=(), summary_bound="size", summary_tensor="table",
           upstream=lambda r: _outcome("upstream"), patched=lambda r: _outcome("patched"),
           outcome_checks=lambda r, o: Checks.empty())


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
        assert site.run_batch is getattr(module, "run_batch", None)
        assert site.check_record is module.check_record
        assert repr(site) == f"Site({module.NAME!r})"


@pytest.mark.parametrize(("change", "message"), [
    ({"name": "no spaces"}, "must be an identifier"),
    ({"fields": [FieldSpec("index", "tensor")]}, "'fields' must be a tuple"),
    ({"fields": (FieldSpec("a", "int"), FieldSpec("a", "int"))}, "names a field twice"),
    ({"fields": (FieldSpec("a", "float"),)}, "unknown kind"),
    ({"output_fields": ("nope",)}, "not fields: ['nope']"),
    ({"summary_bound": ""}, "'summary_bound' must be a non-empty str"),
    ({"outcome_checks": None}, "'outcome_checks' must be a function, got NoneType"),
    ({"check_batch": 3}, "'check_batch' must be a function, got int"),
    ({"prepare_columns": list}, "the columnar run needs 'run_batch' and its input"),
    ({"run_batch": list}, "the columnar run needs 'run_batch' and its input"),
    ({"log_line": "SM70-TEMB"}, "'log_line' must be a LogLine or None"),
])
def test_a_malformed_site_is_refused_naming_the_attribute(change: dict[str, object],
                                                          message: str) -> None:
    with pytest.raises(SiteDefinitionError) as info:
        replace(TOY, **change)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_the_model_of_a_flag() -> None:
    record = Record("toy", 0, fields={"index": np.zeros(1, np.int64), "size": 1})
    assert TOY.model(False)(record).status == "upstream"
    assert TOY.model(True)(record).status == "patched"
    assert TOY.run_records([record], False) is None  # no columnar run


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

    site = replace(TOY, prepare_columns=prepare_columns, run_batch=lambda p, patched: p)
    record = Record("toy", 0, fields={"index": np.zeros(1, np.int64), "size": 3})
    assert site.run_records([record], False) is not None
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
