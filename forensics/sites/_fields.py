"""The fields several sites declare alike, each written once: a site's ``FIELDS`` names these
where its record holds the same value (numpy-free: ``import forensics.sites`` stays light)."""

from __future__ import annotations

from forensics.records import COUNT, FieldSpec

#: the vocabulary that bounds a record's token ids (redaction permutes the ids below it)
VOCAB_SIZE = FieldSpec("vocab_size", "int", token_bound=True, limits=COUNT,
                       doc="ids must lie in [0, vocab_size)")
#: the request of each batch row, when the probe knows them (findings name them)
REQ_IDS = FieldSpec("req_ids", "str_list", required=False, doc="requests of the batch rows")
#: the previous step's requests of V1's persistent batch: request id -> previous row, and the
#: request of each previous row
PREV_REQUESTS = (FieldSpec("prev_req_id_to_index", "index_map", required=False),
                 FieldSpec("prev_req_ids", "opt_str_list", required=False))
#: Model Runner V2's per-slot prompt length (``max_num_reqs`` entries)
PREFILL_LEN = FieldSpec("prefill_len", "tensor", doc="[m] per slot")
