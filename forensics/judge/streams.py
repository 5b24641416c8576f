"""Each runner's records as a :class:`~forensics.judge.continuity.Stream` of tokens.

V1 (async scheduling): per step, the ``embedding`` record holds the ids the model read and
their ``positions``; ``prepare_input_ids`` the rows (``req_ids``, ``cu_num_tokens``,
``num_draft_tokens``), the ids it wrote before ``_preprocess``'s clamp
(``input_ids_device_after``), each previous row's last sampled id (``prev_sampled_token_ids``)
and the drafts proposed for it (``draft_token_ids``); ``batch_change`` the previous rows'
requests (``prev_req_ids`` or ``prev_req_id_to_index``: a discarded row has none) and how many
ids each accepted (``valid_sampled_token_count``). A previous row's last id was sampled at the
step before, at the position after its last verified token plus its count less one.

V2: per step, the ``embedding`` record holds the ids the model read; ``combine_tokens`` the
rows (``req_ids``, ``query_start_loc``, ``cu_num_logits``: a row's drafts are its logits rows
but one) and each slot's drafts (``draft_tokens``, ``idx_mapping``); ``post_update`` each slot's
computed tokens before the step (the position of the row's first token), and the ids sampled
(``sampled_tokens``, ``num_sampled``), placed after the row's last verified token. V2's drafts are
judged against the slot's ``draft_tokens`` as ``combine_tokens`` received them.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from forensics.digits import plain_int
from forensics.judge.continuity import (
    INT64,
    Continuity,
    Judging,
    Recorded,
    Span,
    Stream,
)
from forensics.judge.keyed import by_key
from forensics.records import Record
from forensics.sites import SINK
from forensics.sites.runners import v1_sites, v2_sites

RecordsOf = Callable[[str], Iterable[Record]]
Key = tuple[int, int]  # (step, rank)


def _read(stream: Stream, records_of: RecordsOf,
          sites: list[tuple[str, str | None]]) -> list[dict[Key, Record]]:
    """Each site's records by (step, rank); a site without any is noted as needed (with what
    it holds) unless its note is None. A (step, rank) where some site holds more than one
    record (two engines claiming one rank, a step number repeated) is read at no site: which
    record goes with which is unknown, so its tokens are not judged."""
    found: list[dict[Key, Record]] = []
    repeated: set[Key] = set()
    for site, holds in sites:
        held, twice = by_key(((r.step, r.rank), r) for r in records_of(site) if not r.summary)
        if not held and holds is not None:
            stream.need(f"{site}{holds}")
        found.append(held)
        repeated.update(twice)
    for held in found:
        for key in repeated:
            held.pop(key, None)
    return found


def v1_stream(records_of: RecordsOf, clamps: bool | None = None, why: str = "",
              judging: Judging | None = None) -> Stream:
    """The token stream of a V1 capture (see the module); ``judging``: judge each step's
    tokens as it is read (the stream then keeps none)."""
    stream = Stream("v1", clamps=clamps, clamp_reason=why)
    sink, staging, change_site = v1_sites()
    embedded, prepared, changed = _read(stream, records_of, [
        (sink, ".input_ids"), (staging, " (rows, drafts and sampled ids)"), (change_site, None)])
    last: dict[tuple[int, str], tuple[int, int]] = {}  # (rank, req) -> (step, last verified)
    if embedded and all("positions" not in r for r in embedded.values()):
        stream.need(f"{sink}.positions")  # nothing is judged without them: skip the walk
        return stream
    for key in sorted(embedded):
        prep, change = prepared.get(key), changed.get(key)
        if prep is None and prepared:
            # the probe records the staging call only at steps that carry ids over from the
            # previous step (prev_sampled_token_ids set): nothing there came from async state
            continue
        if prep is not None:
            _v1_expected(stream, key, prep, change, last)
        _v1_fed(stream, key, embedded[key], prep, last)
        if judging is not None:
            judging.take(stream)
    return stream


def _v1_expected(stream: Stream, key: Key, prep: Record, change: Record | None,
                 last: dict[tuple[int, str], tuple[int, int]]) -> None:
    """Each previous row's last sampled id (at its position) and its drafts, from ``prep``."""
    step, rank = key
    sampled = _rows(prep["prev_sampled_token_ids"])
    drafts = prep.get("draft_token_ids")
    drafts = None if drafts is None else _rows(drafts)
    names = _prev_names(stream, change, max(len(sampled), 0 if drafts is None else len(drafts)))
    if names is None:
        return
    counts = None if change is None else \
        np.asarray(change["valid_sampled_token_count"]).reshape(-1).tolist()
    firsts = sampled[:, 0].tolist() if sampled.shape[1] else []  # each row's last sampled id
    proposals = None if drafts is None else drafts.tolist()
    for i, name in enumerate(names):
        if name is None:
            continue
        before = last.get((rank, name))
        if (counts is not None and i < len(counts) and i < len(firsts) and before is not None
                and before[0] == step - 1 and int(counts[i]) > 0):
            stream.accept(rank, name, before[1] + int(counts[i]), Recorded(
                int(firsts[i]), prep.site, step, "prev_sampled_token_ids", f"[{i}, 0]",
                step - 1))
        if proposals is not None and i < len(proposals) and step > 0:  # step 0 follows none
            stream.proposed[(rank, step, name)] = (proposals[i], prep.site, step,
                                                   "draft_token_ids", i, step - 1)
    if counts is None:
        stream.need(f"{v1_sites()[2]}.valid_sampled_token_count")


def _prev_names(stream: Stream, change: Record | None, rows: int) -> list[str | None] | None:
    """The requests of the ``rows`` previous rows ``prepare_input_ids`` holds, from
    ``batch_change`` (None: a discarded row, a row out of that range, or a request the record
    names at more than one row, which no engine does: its rows are not judged)."""
    if change is None:
        stream.need(f"{v1_sites()[2]}.prev_req_ids")
        return None
    names = change.get("prev_req_ids")
    if names is not None:
        pairs = [(name, row) for row, name in enumerate(names[:rows]) if name is not None]
    else:
        index = change.get("prev_req_id_to_index")
        if not isinstance(index, dict):
            stream.need(f"{change.site}.prev_req_ids")
            return None
        pairs = [(name, int(row)) for name, row in index.items()]
    out: list[str | None] = [None] * rows
    held = collections.Counter(name for name, _ in pairs)
    held.update(row for _, row in pairs)  # a row two requests claim (str and int never equal)
    for name, row in pairs:
        if 0 <= row < rows and held[name] == 1 and held[row] == 1:
            out[row] = name
    return out


def _v1_fed(stream: Stream, key: Key, emb: Record, prep: Record | None,
            last: dict[tuple[int, str], tuple[int, int]]) -> None:
    """The tokens of ``emb`` (the model's ids), before the clamp where ``prep`` recorded them."""
    step, rank = key
    read = np.asarray(emb["input_ids"]).reshape(-1)
    rows = prep if prep is not None else emb
    names, cu = rows.get("req_ids"), rows.get("cu_num_tokens")
    drafts = prep.get("num_draft_tokens") if prep is not None else None
    positions = emb.get("positions")
    if names is None or cu is None or drafts is None or positions is None:
        staging = v1_sites()[1]
        for field, value in ((f"{staging}.req_ids", names), (f"{staging}.cu_num_tokens", cu),
                             (f"{staging}.num_draft_tokens", drafts),
                             (f"{emb.site}.positions", positions)):
            if value is None:
                stream.need(field)
        return
    after = prep.get("input_ids_device_after") if prep is not None else None
    before = [] if after is None else np.asarray(after).reshape(-1).tolist()
    ids, pos = read.tolist(), np.asarray(positions).reshape(-1).tolist()
    ends = np.asarray(cu).reshape(-1).astype(np.int64).tolist()
    counts = np.asarray(drafts).reshape(-1).tolist()
    # the id prepare_input_ids wrote (before the clamp) where recorded and negative, else read
    span = functools.partial(Span, step, rank, bound=_bound(emb), read_at=(SINK, "input_ids"),
                             written_at=(v1_sites()[1], "out.input_ids_device"))
    once = _held_once(names)
    for i, (name, end) in enumerate(zip(names, ends, strict=False)):
        start, d = max(ends[i - 1] if i else 0, 0), counts[i]  # no element before the first
        stop = max(start, min(end, len(ids)))
        if name not in once:  # a request at two rows: neither row is its (not judged)
            last.pop((rank, name), None)
            name = None
        stream.spans.append(span(name, i, start, ids[start:stop], draft_from=end - d - start,
                                 positions=pos[start:stop], written=before[start:stop]))
        if name is not None and start <= end - d - 1 < len(pos):
            last[(rank, name)] = (step, pos[end - d - 1])
    tail = max(ends[-1], 0) if ends else 0
    if tail < len(ids):
        stream.spans.append(span(None, None, tail, ids[tail:], padding=True,
                                 written=before[tail:]))


def v2_stream(records_of: RecordsOf, judging: Judging | None = None) -> Stream:
    """The token stream of a V2 capture (see the module); ``judging`` as :func:`v1_stream`."""
    stream = Stream("v2", clamps=False, clamp_reason="Model Runner V2 does not clamp input ids")
    sink, combining, updating = v2_sites()
    embedded, combined, updated = _read(stream, records_of, [
        (sink, ".input_ids"), (combining, " (rows and drafts)"),
        (updating, " (positions and sampled ids)")])
    for key in sorted(embedded):
        comb, post = combined.get(key), updated.get(key)
        if comb is None or post is None:
            continue
        verified = _v2_fed(stream, key, embedded[key], comb, post)
        _v2_sampled(stream, key, post, verified)
        if judging is not None:
            judging.take(stream)
    return stream


def _v2_fed(stream: Stream, key: Key, emb: Record, comb: Record, post: Record
            ) -> dict[str, int]:
    """The tokens of ``emb``; returns each request's last verified position. A row whose span
    in ``query_start_loc`` is not within the ids after the rows before it (a negative or
    decreasing offset), or whose slot another row shares, is not judged."""
    step, rank = key
    read = np.asarray(emb["input_ids"]).reshape(-1)
    qsl = np.asarray(comb["query_start_loc"]).reshape(-1).astype(np.int64).tolist()
    logits = np.diff(np.asarray(comb["cu_num_logits"]).reshape(-1).astype(np.int64))
    slots = np.asarray(comb["idx_mapping"]).reshape(-1).astype(np.int64).tolist()
    computed = np.asarray(post["num_computed_tokens"]).reshape(-1)
    drafts = np.asarray(comb["draft_tokens"])
    names = comb.get("req_ids")
    if names is None:
        stream.need(f"{comb.site}.req_ids")
        return {}
    shared, once = collections.Counter(slots), _held_once(names)
    ids = read.tolist()
    span = functools.partial(Span, step, rank, bound=_bound(emb), read_at=(SINK, "input_ids"))
    verified: dict[str, int] = {}
    done = 0  # the end of the rows so far: a row starts at or after it
    for i, name in enumerate(names[:max(len(qsl) - 1, 0)]):
        start, end, slot = qsl[i], qsl[i + 1], slots[i] if i < len(slots) else -1
        if not done <= start <= end:
            continue
        done = end
        d = max(int(logits[i]) - 1, 0) if i < len(logits) else 0
        own = 0 <= slot and shared[slot] == 1 and name in once
        name = name if name in once else None  # a request at two rows: not judged
        first = int(computed[slot]) if own and slot < len(computed) else None
        if first is not None and not 0 <= first <= INT64[1] - (end - start):
            first = None  # no position an int64 holds
        if d and own and name is not None and slot < len(drafts) and step > 0:  # 0: none before
            stream.proposed[(rank, step, name)] = (drafts[slot].reshape(-1).tolist(), comb.site,
                                                   step, "draft_tokens", slot, step - 1)
        stream.spans.append(span(name, i, start, ids[start:max(start, min(end, len(ids)))],
                                 draft_from=end - d - start, first=first))
        if first is not None and name is not None:
            verified[name] = first + (end - d - 1 - start)
    tail = qsl[len(names)] if len(qsl) > len(names) and qsl[len(names)] >= done else len(ids)
    if tail < len(ids):
        stream.spans.append(span(None, None, tail, ids[tail:], padding=True))
    return verified


def _bound(emb: Record) -> int | None:
    """The ids' bound of the embedding record ``emb`` (its rows), None when not recorded."""
    bound = emb.get("num_embeddings")
    return int(bound) if isinstance(bound, int) else None


def _v2_sampled(stream: Stream, key: Key, post: Record, verified: dict[str, int]) -> None:
    """The ids ``post`` stores for each row, after the row's last verified position."""
    step, rank = key
    names: Sequence[Any] | None = post.get("req_ids")
    if names is None:
        stream.need(f"{post.site}.req_ids")
        return
    sampled = np.asarray(post["sampled_tokens"])
    counts = np.asarray(post["num_sampled"]).reshape(-1)
    once = _held_once(names)
    for i, name in enumerate(names):
        if name not in verified or name not in once or i >= len(counts):
            continue
        for j in range(min(int(counts[i]), sampled.shape[1])):
            stream.accept(rank, name, verified[name] + 1 + j, Recorded(
                int(sampled[i, j]), post.site, step, "sampled_tokens", f"[{i}, {j}]", step))


def _held_once(names: Iterable[Any]) -> set[Any]:
    """The request ids ``names`` holds at exactly one row (a request at two rows of one step,
    which no engine schedules, is no request whose tokens can be told apart)."""
    held = collections.Counter(name for name in names if name is not None)
    return {name for name, count in held.items() if count == 1}


def _rows(value: Any) -> np.ndarray:
    """``value`` as a 2-D array, one row per previous row (a 1-D array: one column)."""
    array = np.asarray(value)
    if array.ndim < 2:
        return array.reshape(-1, 1)
    return array.reshape(array.shape[0], int(np.prod(array.shape[1:])))


def continuity_of(records_of: RecordsOf, sites: Iterable[str],
                  manifest: dict[str, Any] | None = None) -> Continuity:
    """The continuity check of a capture's records (``sites``: the sites it holds; the
    manifest names its runner, vLLM version and drafts: one it does not name is unknown), or
    of in-memory records (no manifest: the installed vLLM says whether it clamps)."""
    from forensics.judge.clamp import clamps
    from forensics.manifest_facts import runner_of

    present = set(sites)
    version = None if manifest is None else _vllm_named(manifest)
    manifest = manifest or {}
    judging = Judging()
    v2 = runner_of(manifest) == "v2" or bool(present & set(v2_sites()[1:]))
    if v2:
        return judging.result(v2_stream(records_of, judging))
    speculative = _speculative(manifest, records_of)
    known, why = clamps(version, "v1", speculative)
    return judging.result(v1_stream(records_of, known, why, judging))


def _vllm_named(manifest: dict[str, Any]) -> str:
    """The vLLM version a capture's manifest names (``""``: none, unknown, or one
    :func:`~forensics.manifest_facts.vllm_version` refuses: a capture never falls back on the
    installed vLLM, which need not be the one that ran it)."""
    from forensics.manifest_facts import UNKNOWN, vllm_version

    version, _ = vllm_version(manifest)
    return "" if version in (None, UNKNOWN) else str(version)


def _speculative(manifest: dict[str, Any], records_of: RecordsOf) -> bool:
    """Whether the engine drafted: the manifest's ``num_speculative_tokens`` (null: no
    drafter), else (absent, or no int: a string, a list, a bool) the staging records'."""
    drafts = (manifest.get("model") or {}).get("num_speculative_tokens", "")
    if drafts is None:
        return False
    if plain_int(drafts):
        return drafts > 0
    return any(int(r.get("prev_num_spec_tokens") or 0) > 0 for r in records_of(v1_sites()[1]))
