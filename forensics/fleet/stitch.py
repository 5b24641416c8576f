"""One engine across captures: its ranks' records aligned by step, and the first rank divergence.

Ranks of one tensor-parallel group see the same batch, so the ids below must be equal on every
rank at every step. Captures are stitched by the engine id the probe writes into each manifest,
but a claimed id alone is no proof (any capture can write any id): two captures are one engine
only when the claim is corroborated, by the same host and run start, or by the same step history
(per site, the same first and last step and records per rank). A capture without an id, or
whose claim nothing corroborates, is an engine of its own (its ranks are still compared). Each
rank of an engine is one process writing one capture: two captures of one claimed engine that
both hold a rank contradict each other (one of them, at least, is a copy or a forgery, and the
data cannot say which), so neither is stitched to the engine (:func:`_uncontested`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.fleet.piece import CaptureChanged

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds



def shared_ids(site: str) -> tuple[str, ...]:
    """The id tensors of ``site`` every rank of one engine must hold alike, in the order
    compared (the fields its schema flags ``rank_shared``)."""
    from forensics.sites import get_site

    return tuple(f.name for f in get_site(site).fields if f.rank_shared)


#: an engine's key in :func:`engines`: ``("engine", id, cluster)`` or ``("capture", path)``,
#: never text joined (an id claiming ``capture:PATH`` once took the key of a capture
#: ``PATH#0``, its captures stitched in that one's stead, its rank divergence then unseen)
EngineKey = tuple[str | int, ...]


def engines(rows: Iterable[dict[str, Any]], contested: dict[str, str] | None = None
            ) -> dict[EngineKey, list[str]]:
    """``{engine: [capture, ...]}`` for readable rows: captures of one claimed engine id whose
    claims corroborate each other (:func:`corroborated`), else each capture alone.
    ``contested``: given, it gets ``{capture: sentence}`` for each capture left out of its
    engine because another capture of that engine holds one of its ranks
    (:func:`_uncontested`), the sentence naming the rank and the other captures."""
    claims: dict[str, list[dict[str, Any]]] = {}
    out: dict[EngineKey, list[str]] = {}
    for row in rows:
        if row.get("error"):
            continue
        engine = row.get("engine_id")
        if engine and engine != "unknown":
            claims.setdefault(str(engine), []).append(row)
        else:
            out[("capture", row["capture"])] = [row["capture"]]
    for engine, claimed in claims.items():
        for number, cluster in enumerate(_clusters(claimed)):
            kept, shared = _uncontested(cluster, engine, contested)
            if kept:
                out[("engine", engine, number)] = [row["capture"] for row in kept]
            out.update({("capture", row["capture"]): [row["capture"]] for row in shared})
    return out


def _ranks(row: dict[str, Any]) -> list[str]:
    """The ranks a row holds (none when unknown), in order."""
    text = str(row.get("ranks") or "")
    return [] if text in ("", "unknown") else sorted(set(text.split(",")),
                                                     key=lambda r: (len(r), r))


def _uncontested(cluster: list[dict[str, Any]], engine: str,
                 contested: dict[str, str] | None = None
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``cluster`` (captures of ``engine``, corroborated) split into the captures whose ranks
    no other capture of it holds, and those that share a rank with another (each then an
    engine of its own); a capture whose ranks are unknown shares none. Where a rank is shared,
    every capture of the cluster gets its sentence in ``contested`` (:func:`contested_text`):
    a rank of its engine was compared with no other."""
    holders: dict[str, list[str]] = {}
    for row in cluster:
        for rank in _ranks(row):
            holders.setdefault(rank, []).append(row["capture"])
    twice = sorted((rank for rank, held in holders.items() if len(held) > 1),
                   key=lambda r: (len(r), r))
    kept: list[dict[str, Any]] = []
    shared: list[dict[str, Any]] = []
    for row in cluster:
        mine = [rank for rank in _ranks(row) if len(holders[rank]) > 1]
        (shared if mine else kept).append(row)
        if twice and contested is not None:
            contested[row["capture"]] = contested_text(row["capture"], mine or twice,
                                                       holders, engine, bool(mine))
    return kept, shared


#: the captures of a contested rank a row names (the rest counted)
NAMED_HOLDERS = 3


def contested_text(capture: str, ranks: list[str], holders: dict[str, list[str]],
                   engine: str, own: bool) -> str:
    """Why ``capture``'s ranks were not compared with all of its engine's: the first of
    ``ranks`` (held by more than one capture of ``engine``, per ``holders``; ``own``: one of
    ``capture``'s, else of another) and at most :data:`NAMED_HOLDERS` of the others that hold
    it, each escaped as a value inside a sentence (:func:`~forensics.escaping.spanless`: its
    backticks open no code span of the Markdown table)."""
    from forensics.escaping import capped, spanless

    rank = ranks[0]
    others = [c for c in holders[rank][:NAMED_HOLDERS + 1] if c != capture][:NAMED_HOLDERS]
    more = len(holders[rank]) - own - len(others)
    named = " and ".join(f"'{spanless(c)}'" for c in others) + (
        f" and {more} more" if more else "")
    also = f" (and {len(ranks) - 1} other rank(s) so)" if len(ranks) > 1 else ""
    shown, of = spanless(capped(rank, 40)), f"engine '{spanless(capped(engine, 200))}'"
    said = (f"its rank {shown} is claimed by {named} too{also}, of {of}" if own else
            f"rank {shown} of {of} is claimed by {named}{also}")
    return (f"rank divergence not judged: {said} (the claims corroborated); two captures of "
            "one rank contradict each other, one at least a copy or a forgery, so "
            f"{'it is' if own else 'they are'} compared with no other capture of the engine")


def corroborated(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two rows claiming one engine id are one engine beyond the claim: the same known
    host and run start, or the same known step history (a key of :func:`_keys` in common)."""
    return bool(set(_keys(a)) & set(_keys(b)))


def _clusters(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``rows`` (one claimed engine) split into groups linked by :func:`corroborated`, in time
    linear in the rows: rows sharing a corroborating key (:func:`_keys`) are joined through
    that key, never compared pairwise."""
    parent = list(range(len(rows)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[Any, ...], int] = {}
    for i, row in enumerate(rows):
        for key in _keys(row):
            j = first.setdefault(key, i)
            parent[root(i)] = root(j)
    clusters: dict[int, list[dict[str, Any]]] = {}
    for i, row in enumerate(rows):
        clusters.setdefault(root(i), []).append(row)
    return [sorted(c, key=lambda r: r["capture"]) for c in clusters.values()]


def _keys(row: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The keys two rows must share to be :func:`corroborated`: host and run start (both
    known), and step history (known)."""
    def known(value: Any) -> bool:
        return bool(value) and value != "unknown"

    keys: list[tuple[Any, ...]] = []
    if known(row.get("host")) and known(row.get("started")):
        keys.append(("run", row.get("host"), row.get("started")))
    if known(row.get("history")):
        keys.append(("history", row.get("history")))
    return keys


def first_divergence(captures: Sequence[str], held: Mapping[str, str] | None = None
                     ) -> dict[str, Any] | None:
    """The first step at which two ranks of ``captures`` (one engine) hold different shared
    ids: ``{step, site, tensor, element, ranks, values, captures}``, or None when they agree
    (or only one rank is there). Sites at one step are taken in pipeline order. A capture that
    cannot be read is left out, unless ``held`` gives what each capture's replay read (its
    row's ``held``, :class:`~forensics.fleet.piece.Held`).

    Raises:
        CaptureChanged: with ``held``, a capture that no longer holds it, when opened or once
            compared (replaced, written to, rewritten in place: :func:`~forensics.fleet.piece.
            check_held`) or can no longer be read: it would be compared as another capture
            than the one its row replayed.
    """
    from forensics.fleet.dataset import fit_together
    from forensics.sites import SITES, site_order
    from forensics.store.arrow_codec import SHAPE_SUFFIX

    found: list[tuple[int, int, int, dict[str, Any]]] = []
    unpaired: list[tuple[int, int, int, dict[str, Any]]] = []
    opened = _opened(captures, held)
    keep = {site: {"step", "rank", "summary", *ids, *(i + SHAPE_SUFFIX for i in ids)}
            for site in SITES if (ids := shared_ids(site))}  # read, not mapped: no SIGBUS
    datasets = fit_together(_read(opened, keep, held), SITES, "skip")
    spans = _rank_steps(datasets.values())
    for site, dataset in datasets.items():
        for number, tensor in enumerate(shared_ids(site)):
            hits = _first_in(dataset, site, tensor, spans) \
                if tensor in dataset.schema.names else ()
            for hit in hits:
                (unpaired if hit.get("unpaired") else found).append(
                    (hit["step"], site_order(site), number, hit))
    if held is not None:  # each still the file compared: none written to meanwhile
        _check_all(opened, held)
    return _first(found, unpaired)


def _first(found: list[tuple[int, int, int, dict[str, Any]]],
           unpaired: list[tuple[int, int, int, dict[str, Any]]]) -> dict[str, Any] | None:
    """The first of ``found`` (divergences, keyed by step, site order and tensor), with the
    first of ``unpaired`` (steps not compared: the ranks held unlike numbers of records) as its
    ``before`` where that comes earlier (it is then no proven first); else the first of
    ``unpaired`` itself (nothing diverged where compared, yet the ranks are not alike); None
    when both are empty."""
    def key(f: tuple[int, int, int, dict[str, Any]]) -> tuple[int, int, int]:
        return f[:3]

    first = min(found, key=key) if found else None
    skipped = min(unpaired, key=key) if unpaired else None
    if first is None:
        return skipped[3] if skipped else None
    if skipped is not None and key(skipped) < key(first):
        return {**first[3], "before": skipped[3]}
    return first[3]


def _opened(captures: Sequence[str], held: Mapping[str, str] | None) -> dict[str, Any]:
    """Each capture, opened once and checked against ``held`` (raises as
    :func:`first_divergence`)."""
    from forensics.errors import one_line
    from forensics.fleet.paths import openable
    from forensics.fleet.piece import changed
    from forensics.store.reader import load

    out: dict[str, Any] = {}
    for path in captures:
        try:
            out[str(path)] = load(openable(str(path)), mapped=False)  # no SIGBUS
        except Exception as exc:  # noqa: BLE001  (left out, or its row's error)
            if held is None:
                continue
            raise CaptureChanged(path, changed(path, f"it can no longer be read "
                                                     f"({one_line(exc)})")) from None
    if held is not None:
        _check_all(out, held)
    return out


def _read(opened: Mapping[str, Any], keep: Mapping[str, set[str]],
          held: Mapping[str, str] | None) -> dict[str, dict[str, list[pa.RecordBatch]]]:
    """The batches of each capture of ``opened``, of the sites and columns ``keep`` names,
    read into this process's memory (:func:`~forensics.fleet.dataset.batches_of`). One that
    cannot be read is left out, or, with ``held``, raises CaptureChanged naming it (a segment
    cut or replaced since its replay read it: "changed while the triage ran")."""
    from forensics.errors import one_line
    from forensics.fleet.dataset import batches_of
    from forensics.fleet.piece import changed

    out: dict[str, dict[str, list[pa.RecordBatch]]] = {}
    for path, capture in opened.items():
        try:
            out[path] = batches_of(capture, keep)
        except Exception as exc:  # noqa: BLE001  (left out, or its row's error)
            if held is None:
                continue
            raise CaptureChanged(path, changed(path, f"it can no longer be read "
                                                     f"({one_line(exc)})")) from None
    return out


def _check_all(opened: Mapping[str, Any], held: Mapping[str, str]) -> None:
    """Refuse a capture of ``opened`` that does not hold what its row's replay read
    (:func:`~forensics.fleet.piece.check_held`)."""
    from forensics.fleet.piece import Held, changed, check_held

    for path, capture in opened.items():
        then = Held.parse(held.get(path))
        if then is None:
            raise CaptureChanged(path, changed(path, "its row does not say what its replay "
                                                     "read"))
        check_held(capture, path, then, "when its replay read it")


#: a rank's first and last step (of any site) and its capture: :func:`_rank_steps`
RankSteps = dict[int, tuple[int, int, str]]


def _rank_steps(datasets: Iterable[ds.Dataset]) -> RankSteps:
    """``{rank: (first step, last step, capture)}`` over the records of every site of
    ``datasets`` (one engine's)."""
    out: RankSteps = {}
    for dataset in datasets:
        table = dataset.to_table(columns=["step", "rank", "capture"])
        if not table.num_rows:
            continue
        steps, ranks = table["step"].to_numpy(), table["rank"].to_numpy()
        order = np.lexsort((steps, ranks))
        everyone, starts = np.unique(ranks[order], return_index=True)
        ends = np.r_[starts[1:], len(order)] - 1
        for rank, start, end in zip(everyone.tolist(), starts.tolist(), ends.tolist(),
                                    strict=True):
            lo, hi = int(steps[order[start]]), int(steps[order[end]])
            was = out.get(rank, (lo, hi, str(table["capture"][int(order[start])])))
            out[rank] = (min(lo, was[0]), max(hi, was[1]), was[2])
    return out


def _absent(steps: np.ndarray, ranks: np.ndarray, spans: RankSteps, site: str, tensor: str
            ) -> dict[str, Any] | None:
    """Of ``tensor``'s rows (sorted by step, then rank): the first step at which a rank of
    the engine (``spans``) that holds no row of it at all holds records of another site
    around it, as an ``unpaired`` hit (that rank holds 0; the lowest rank there its count),
    or None. Its records were compared with none: the site was never compared on it."""
    present = set(np.unique(ranks).tolist())
    absent = [r for r in spans if r not in present]
    if not absent:
        return None
    rank_of = np.array(absent, dtype=np.int64)
    lo = np.array([spans[r][0] for r in absent], dtype=np.int64)
    hi = np.array([spans[r][1] for r in absent], dtype=np.int64)
    at = np.searchsorted(steps, lo)  # the first of its rows at or after the rank's first step
    inside = at < len(steps)
    inside[inside] = steps[at[inside]] <= hi[inside]
    if not inside.any():
        return None
    step = int(steps[at[inside]].min())
    rank = int(rank_of[inside][steps[at[inside]] == step].min())
    held = ranks[steps == step]
    low = int(held.min())
    sides = sorted([(low, int((held == low).sum())), (rank, 0)])
    return {"step": step, "site": site, "tensor": tensor, "element": None, "unpaired": True,
            "absent": True, "values": [n for _, n in sides], "ranks": [r for r, _ in sides],
            "captures": [spans[r][2] for r, _ in sides]}


def _first_in(dataset: ds.Dataset, site: str, tensor: str, spans: RankSteps
              ) -> list[dict[str, Any]]:
    """The first divergence of ``tensor`` at ``site`` across ranks and the first step whose
    ranks hold unlike numbers of its records (:func:`_unpaired`, marked ``unpaired``: its
    records not compared), each where there is one; and, of ``spans`` (the engine's ranks),
    the first step at which a rank holding none of its records holds others
    (:func:`_absent`)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pds

    from forensics.store.arrow_codec import SHAPE_SUFFIX

    shape = tensor + SHAPE_SUFFIX
    shaped = [shape] if shape in dataset.schema.names else []
    table = dataset.to_table(columns=["step", "rank", "capture", tensor, *shaped],
                             filter=~pds.field("summary") & pds.field(tensor).is_valid())
    if table.num_rows == 0:
        return []
    table = table.sort_by([("step", "ascending"), ("rank", "ascending")])
    steps = table["step"].to_numpy()
    ranks = table["rank"].to_numpy()
    absent = _absent(steps, ranks, spans, site, tensor)
    missing = [absent] if absent is not None else []
    if len(pc.unique(table["rank"])) < 2:
        return missing
    values, offsets = _flat(table[tensor])
    shapes = table[shape].to_pylist() if shaped else None
    bounds = np.flatnonzero(np.diff(steps)) + 1
    everyone, first, last, captures = _spans(steps, ranks, table["capture"], spans)
    out: list[dict[str, Any]] = []
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(steps)], strict=True):
        unlike = _unpaired(lo, hi, ranks, everyone if first <= steps[lo] <= last else None)
        if unlike is not None:
            if not out:  # the first step not compared; a divergence after it still sought
                a, na, b, nb = unlike
                out.append({"step": int(steps[lo]), "site": site, "tensor": tensor,
                            "element": None, "unpaired": True, "values": [na, nb],
                            "ranks": [a, b], "captures": [captures[a], captures[b]]})
            continue
        hit = _compare_step(values, offsets, lo, hi, ranks, shapes)
        if hit is not None:
            a, b, element, va, vb = hit
            found = {"step": int(steps[lo]), "site": site, "tensor": tensor,
                     "element": element, "ranks": [int(ranks[a]), int(ranks[b])],
                     "values": [va, vb], "captures": [str(table["capture"][a]),
                                                      str(table["capture"][b])],
                     "index": _index(element, shapes[a] if shapes else None,
                                     int(offsets[a + 1] - offsets[a]))}
            if element is None and isinstance(va, list):
                found["shapes"] = found["values"]  # as lengths are its values where they differ
            return [*missing, *out, found]
    return [*missing, *out]


def _spans(steps: np.ndarray, ranks: np.ndarray, captures: Any, spans: RankSteps
           ) -> tuple[np.ndarray, int, int, dict[int, str]]:
    """Of rows sorted by step: the ranks they hold, the steps every rank holds rows at or
    around (from the latest first step of a rank to the earliest last one, of its records of
    every site as ``spans`` gives them: :func:`_rank_steps`, so a rank holding this site only
    outside the others' steps is not compared there, not passed over), and the capture of each
    rank (of its first row)."""
    everyone, rows = np.unique(ranks, return_index=True)
    named = {int(r): str(captures[int(i)]) for r, i in zip(everyone, rows, strict=True)}
    return (everyone, max(spans[r][0] for r in named), min(spans[r][1] for r in named), named)


def _unpaired(lo: int, hi: int, ranks: np.ndarray, everyone: np.ndarray | None = None
              ) -> tuple[int, int, int, int] | None:
    """Rows ``lo:hi`` (one step, by rank) where a rank holds another number of records than
    the lowest rank, or (``everyone``: the ranks expected at this step, all between their first
    and last steps) none at all: ``(rank a, records of a, rank b, records of b)`` of the lowest
    rank and the first such, or None. A rank's n-th call is paired with another's n-th only
    when both made as many; a call more, or a record the probe dropped (T102d), leaves no
    pairing provable."""
    firsts = lo + np.flatnonzero(np.r_[True, ranks[lo + 1:hi] != ranks[lo:hi - 1]])
    present, counts = ranks[firsts], np.diff(np.r_[firsts, hi])
    if everyone is not None and len(present) < len(everyone):
        absent = int(everyone[~np.isin(everyone, present)][0])
        low = int(present[0])
        return (absent, 0, low, int(counts[0])) if absent < low else \
            (low, int(counts[0]), absent, 0)
    other = np.flatnonzero(counts != counts[0])
    if not len(other):
        return None
    at = int(other[0])
    return int(present[0]), int(counts[0]), int(present[at]), int(counts[at])


def _index(element: int | None, shape: list[int] | None, size: int) -> str | None:
    """Flat ``element`` of a tensor of ``size`` values and ``shape`` as its index (``"1, 1"``),
    where the shape has more than one dimension and holds those values; else None (the flat
    element is its index)."""
    if element is None or not shape or len(shape) < 2 or min(shape) < 1 or \
            int(np.prod(shape, dtype=object)) != size:
        return None
    return ", ".join(str(int(i)) for i in np.unravel_index(element, shape))


def _flat(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A list column's values (their own integer type: a uint64 past int64 stays itself) and
    offsets ([rows + 1])."""
    import pyarrow as pa

    array = column.combine_chunks()
    if isinstance(array, pa.ChunkedArray):
        array = pa.concat_arrays(array.chunks) if array.num_chunks else pa.array([], array.type)
    flat = array.flatten().to_numpy(zero_copy_only=False)
    lengths = array.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    return flat, np.r_[0, np.cumsum(lengths)]


def _compare_step(values: np.ndarray, offsets: np.ndarray, lo: int, hi: int, ranks: np.ndarray,
                  shapes: list[Any] | None = None) -> tuple[int, int, int | None, Any, Any] | None:
    """Rows ``lo:hi`` (one step, by rank, each rank's in the order written) against the lowest
    rank's, call by call: each other rank's n-th row against the lowest rank's n-th (a rank
    may hold several records of a site at one step, one per call); the first row that
    differs, as ``(row a, row b, element, value a, value b)`` (element None: lengths differ,
    values then the lengths; or the stored ``shapes`` of the rows differ, values then those
    shapes, lists), or None. Each rank holds as many rows as the lowest (:func:`_unpaired`)."""
    firsts = lo + np.flatnonzero(np.r_[True, ranks[lo + 1:hi] != ranks[lo:hi - 1]])
    ends = np.r_[firsts[1:], hi]
    for start, stop in zip(firsts[1:].tolist(), ends[1:].tolist(), strict=True):
        for a, row in zip(range(lo, int(ends[0])), range(start, stop), strict=True):
            ref, mine = values[offsets[a]:offsets[a + 1]], values[offsets[row]:offsets[row + 1]]
            if len(mine) != len(ref):
                return a, row, None, len(ref), len(mine)
            if shapes is not None:
                shape_a, shape_b = _shape(shapes[a], len(ref)), _shape(shapes[row], len(mine))
                if shape_a != shape_b:
                    return a, row, None, shape_a, shape_b
            diff = np.flatnonzero(mine != ref)
            if len(diff):
                at = int(diff[0])
                return a, row, at, int(ref[at]), int(mine[at])
    return None


def _shape(stored: list[int] | None, size: int) -> list[int]:
    """A row's shape: the one stored with it, else (none stored: a 1-d tensor) ``[size]``."""
    return [int(n) for n in stored] if stored else [size]


def divergence_text(hit: dict[str, Any], hosts: dict[str, str] | None = None) -> str:
    """``"rank divergence at step 7: embedding input_ids[3] = 17 on rank 0 (a.capture), 912 on
    rank 1 (b.capture)"``: each side names its capture (and host, when given) escaped as a
    value (:func:`~forensics.escaping.spanless`: the message is made inert, so a name holding
    ESC and one spelled ``\\x1b`` read alike); lengths when the ranks' tensors differ in
    length, both shapes (``shape(ids) = [2, 3] on rank 0 (...), [3, 2] on rank 1 (...)``)
    when they hold as many values in different shapes. A step whose ranks hold unlike numbers
    of records (``unpaired``) is "not compared" (:func:`unpaired_text`), said after the
    divergence it comes before."""
    if hit.get("unpaired"):
        return unpaired_text(hit, hosts)
    if hit.get("stopped"):
        return stopped_text(hit, hosts)
    where = (f"{hit['tensor']}[{hit.get('index') or hit['element']}]"
             if hit["element"] is not None
             else f"shape({hit['tensor']})" if "shapes" in hit else f"len({hit['tensor']})")
    sides = [f"{value} on rank {rank} ({named})" for rank, value, named in _sides(hit, hosts)]
    text = f"rank divergence at step {hit['step']}: {hit['site']} {where} = {', '.join(sides)}"
    return f"{text}; before it, {unpaired_text(hit['before'], hosts)}" if hit.get("before") \
        else text


def stopped_text(hit: dict[str, Any], hosts: dict[str, str] | None = None) -> str:
    """``"rank divergence not judged from step 7: the engine's ranks were compared up to its
    first divergence only, at step 7 between rank 0 (a.capture) and rank 2 (c.capture)"``: of
    a rank the first divergence (``hit``, marked ``stopped``) does not name, whose steps from
    it on may have been compared with no other rank's (the search stops there)."""
    sides = " and ".join(f"rank {rank} ({named})" for rank, _, named in _sides(hit, hosts))
    return (f"rank divergence not judged from step {hit['step']}: {STOPPED_WHY}, at step "
            f"{hit['step']} between {sides}")


def unpaired_text(hit: dict[str, Any], hosts: dict[str, str] | None = None) -> str:
    """``"rank divergence not judged at step 5: embedding input_ids not compared: rank 0
    (a.capture) holds 2 records of it, rank 1 (b.capture) holds 3 (more calls, or records
    dropped: no call can be paired with its own)"``: the data proves the counts, not a
    divergence. A rank holding no record of the site (``absent``: :func:`_absent`) is said so
    ("rank 2 holds no record of the site at any step: ...")."""
    sides = [f"rank {rank} ({named}) holds {count}" +
             ("" if n else f" record{'' if count == 1 else 's'} of it")
             for n, (rank, count, named) in enumerate(_sides(hit, hosts))]
    return (f"rank divergence not judged at step {hit['step']}: {hit['site']} {hit['tensor']} "
            f"not compared: {', '.join(sides)} ({_why(hit)})")


#: why a rank's steps from the first divergence on are not judged (``stopped``)
STOPPED_WHY = "the engine's ranks were compared up to its first divergence only"


def _why(hit: dict[str, Any]) -> str:
    """Why the step of ``hit`` (``unpaired``, ``absent``, ``stopped``) was not compared."""
    if hit.get("stopped"):
        return STOPPED_WHY
    if hit.get("absent"):
        return (f"rank {hit['ranks'][hit['values'].index(0)]} holds no record of the site at "
                "any step: dropped, never written, or a pipeline stage that does not run it")
    return "more calls, or records dropped: no call can be paired with its own"


def divergence_json(hit: dict[str, Any]) -> dict[str, Any]:
    """A row's divergence as JSON, saying what it is: ``judged`` (whether its ranks were
    compared there) and ``text`` (:func:`divergence_text`); of a divergence, its step, site,
    tensor, element, index, ranks, values and captures (``shapes``; ``before``: the step not
    compared before it, as JSON); of a step not compared (``unpaired``) or a rank compared up
    to its engine's first divergence only (``stopped``), ``not_compared`` (what was not, the
    records of the step's site each rank holds), ``reason``, and of ``stopped``, ``compared``
    (what was: up to the first divergence, its ranks; its values are the rows' of those ranks):
    never ``values`` read as a divergence."""
    text = divergence_text(hit)
    if not hit.get("unpaired") and not hit.get("stopped"):
        out = {k: v for k, v in hit.items() if k != "before"}
        before = hit.get("before")
        return {**out, "judged": True, "text": text,
                **({"before": divergence_json(before)} if before else {})}
    where = {"site": hit["site"], "tensor": hit["tensor"]}
    if hit.get("stopped"):
        return {"judged": False, "text": text, "reason": _why(hit),
                "not_compared": {"from_step": hit["step"]},
                "compared": {"up_to_step": hit["step"], **where, "ranks": hit["ranks"],
                             "captures": hit["captures"]}}
    return {"judged": False, "text": text, "reason": _why(hit),
            "not_compared": {"step": hit["step"], **where, "ranks": hit["ranks"],
                             "records": hit["values"], "captures": hit["captures"]}}


def _sides(hit: dict[str, Any], hosts: dict[str, str] | None) -> list[tuple[Any, Any, str]]:
    """``(rank, value, capture named)`` of each side of ``hit``: the capture's file name (and
    host, when given), each escaped as a value inside a sentence
    (:func:`~forensics.escaping.spanless`: a backtick as ``\\x60``, so a host or name holding
    backticks opens no code span of the Markdown table)."""
    import os

    from forensics.escaping import spanless

    out = []
    for rank, value, capture in zip(hit["ranks"], hit["values"], hit["captures"], strict=True):
        host = (hosts or {}).get(capture)
        out.append((rank, value,
                    spanless(os.path.basename(capture)) + (f", {spanless(host)}" if host else "")))
    return out
