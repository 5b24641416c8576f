"""Site ``embedding``: the token-embedding lookup of the model's ``input_ids`` (the sink).

With one GPU (``tp_size`` absent or 1) an id outside ``[0, num_embeddings)`` raises (on the GPU:
the ``indexSelectSmallIndex`` / ``vectorized_gather_kernel`` asserts; on CPU an IndexError).
With tensor parallelism each rank masks ids outside its shard, so such an id is silently zeroed.
There is no patch: ``patched`` is ``upstream``. ``cu_num_tokens`` and ``req_ids``, when given,
map each token to its batch row and request.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from forensics.outcome import INDEX_ERROR, STATUSES, Outcome
from forensics.records import COUNT, POSITIVE, FieldSpec, Record
from forensics.sites._common import (
    BatchColumns,
    RecordColumns,
    RowValues,
    RunColumns,
    require,
    require_len,
    row_last,
    row_steps,
    rows_with_any,
)
from forensics.sites._fields import REQ_IDS
from forensics.sites.core import EMBEDDING_ROWS, BatchRun, Checks, rows_of_slots
from forensics.sites.scan_counts import IndexCount, ScanColumns, outside

NAME = "embedding"
FIELDS = (
    FieldSpec("input_ids", "tensor", rank_shared=True, doc="[t]", token_ids=True),
    FieldSpec("num_embeddings", "int", doc="rows of the weight being indexed",
              token_bound=True, limits=COUNT),
    FieldSpec("tp_size", "int", required=False, limits=POSITIVE),
    REQ_IDS,
    FieldSpec("cu_num_tokens", "tensor", required=False, doc="[n] token -> row mapping"),
    FieldSpec("positions", "tensor", required=False,
              doc="[t] the position of each id in its request (token continuity)"),
)
OUTPUT_FIELDS: tuple[str, ...] = ()
SUMMARY_BOUND = "num_embeddings"
SUMMARY_TENSOR = "input_ids"
_MESSAGE = "IndexError: index out of range in self"


def check_record(record: Record, where: str) -> None:
    """Cross-field checks (the bound's and tensor-parallel size's ranges are the schema's
    ``limits``): a row mapping that covers at
    most the ids and names one request per row.

    Raises:
        CaptureFormatError: naming the field and what was expected.
    """
    cu = record.get("cu_num_tokens")
    if cu is not None:
        require_len(record, "req_ids", len(cu), where, "one per entry of 'cu_num_tokens'")
        cu = np.asarray(cu, dtype=np.int64)
        require(bool((np.diff(cu, prepend=0) >= 0).all()), where, "cu_num_tokens",
                "must be non-decreasing and >= 0")
        require(len(cu) == 0 or cu[-1] <= len(record["input_ids"]), where, "cu_num_tokens",
                "must not count more tokens than 'input_ids' holds")


def check_batch(cols: BatchColumns) -> np.ndarray:
    """:func:`check_record` on a whole batch at once: the records it may reject."""
    bad = np.zeros(cols.rows, dtype=bool)
    has_cu = cols.present("cu_num_tokens")
    if not has_cu.any():
        return bad
    cu, counts = cols.flat("cu_num_tokens")
    bad |= has_cu & cols.present("req_ids") & (cols.length("req_ids") != counts)
    bad |= has_cu & rows_with_any(row_steps(cu, counts) < 0, counts)
    return bad | (has_cu & (counts > 0) & (row_last(cu, counts) > cols.length("input_ids")))


def _ids(cols: RunColumns) -> Checks:
    """Every id of every record's ``input_ids`` checked against ``[0, num_embeddings)``; the
    row from ``cu_num_tokens`` (unknown without it or past its last row). Both stay at their
    captured width: the ids are only compared, ``rows_of_slots`` widens the offsets it adds."""
    ids, lengths = cols.flat("input_ids", widen=False)
    cu, counts = cols.flat("cu_num_tokens", widen=False)
    return Checks.of_runs("input_ids", lengths, ids, 0, cols.ints("num_embeddings"),
                          lambda rec, element: rows_of_slots(cu, counts, rec, element)
                          ).naming(None, EMBEDDING_ROWS)


def prepare_columns(cols: RunColumns) -> BatchRun:
    """The lookup on every record at once: ``index_error`` for an id outside the weight with
    one GPU, ``ok`` otherwise (masked with tensor parallelism); the ids checked. The same for
    every variant: the run itself."""
    checks = _ids(cols)
    has_bad = np.zeros(cols.rows, dtype=bool)
    has_bad[checks.bad_records()] = True
    single = ~cols.present("tp_size") | (cols.ints("tp_size") == 1)
    status = np.where(has_bad & single, STATUSES.index(INDEX_ERROR), 0).astype(np.int8)
    return BatchRun(status, {int(i): _MESSAGE for i in np.flatnonzero(status)},
                    Checks.concat([checks]), RowValues(cols, "req_ids"))


def run_batch(prepared: BatchRun, patched: bool) -> BatchRun:
    """The run of a prepared batch (:func:`prepare_columns`): there is no patch. No outputs;
    no accesses beyond the ids, which the judge checks for every variant."""
    return prepared


def outcome_checks(record: Record, outcome: Outcome) -> Checks:
    """The checks of one record, the same for every variant's outcome: each id of
    ``input_ids`` against ``[0, num_embeddings)`` (tensor ``input_ids``, element its
    position)."""
    return _ids(RecordColumns([record]))


def scan_indices(cols: ScanColumns) -> list[IndexCount]:
    """The captured index checks (see :mod:`forensics.sites.scan_counts`): every id of
    ``input_ids`` in ``[0, num_embeddings)``, the rule of :func:`outcome_checks`."""
    ids, sizes, _ = cols.tensor("input_ids")
    return [IndexCount("input_ids", len(ids), outside(ids, cols.ints("num_embeddings"), sizes,
                                                      cols.bools("compare", len(ids))))]


def log_fields(match: re.Match[str], number: Callable[[str], int]) -> dict[str, Any]:
    """The summary record of a ``SM70-TEMB`` probe line (:data:`LOG_LINE`): ``min``/``max``
    of the ids, ``num_embeddings`` (the weight's rows), ``num_tokens`` (the input's size, its
    dimensions multiplied; past int64 it stops growing, and the importer refuses it)."""
    tokens = 1
    for size in re.findall(r"\d+", match["shape"]):
        tokens = min(tokens * number(size), 2**63)
    return {"min": number(match["min"]), "max": number(match["max"]),
            "num_embeddings": number(match["rows"]), "num_tokens": tokens,
            "dtype": match["dtype"]}


from forensics.sites.base import LogLine, Site  # noqa: E402  (the SITE declaration closes it)

#: the SM70 fork's probe line: ``SM70-TEMB: rows=R input=(T,) dtype=D min=A max=B``
LOG_LINE = LogLine(re.compile(r"SM70-TEMB:\s*rows=(?P<rows>\d+)\s+input=\((?P<shape>[\d,\s]*)\)"
                              r"\s+dtype=(?P<dtype>\S+)\s+min=(?P<min>-?\d+)\s+max=(?P<max>-?\d+)"),
                   log_fields, counts=("num_tokens",))

#: this module's site: its schema and operations (the registry holds it)
#: ``forensics repro``: the vLLM function a standalone test calls with one record ``r``,
#: and the test body that calls it (``{lower}``/``{upper}``: the first finding's bound)
REPRO = ('vllm.model_executor.layers.vocab_parallel_embedding.VocabParallelEmbedding.forward',
         '''    from vllm.model_executor.layers.vocab_parallel_embedding import (
        UnquantizedEmbeddingMethod,
        VocabParallelEmbedding,
    )

    rows = r["num_embeddings"]  # one real row seen as `rows` rows: nothing sized by the data
    layer = NS(tp_size=1, quant_method=UnquantizedEmbeddingMethod(),
               weight=torch.zeros(1, 1).expand(rows, 1))
    VocabParallelEmbedding.forward(layer, r["input_ids"].clone())
    return []
''')


SITE = Site(name=NAME, fields=FIELDS, output_fields=OUTPUT_FIELDS, summary_bound=SUMMARY_BOUND,
            summary_tensor=SUMMARY_TENSOR,
            adapter="forensics.variants.vllm_adapters:run_embedding_forward",
            hook="vllm.v1.worker.gpu_model_runner:GPUModelRunner._model_forward",
            repro=REPRO,
            checks=outcome_checks, scan_indices=scan_indices,
            check_record=check_record, check_batch=check_batch, prepare_columns=prepare_columns,
            run_batch=run_batch, log_line=LOG_LINE)
