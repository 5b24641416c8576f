"""Synthetic async-scheduling + speculative-decoding runs, with known faults switched on at will.

A step-level model of what vLLM's worker sees at the four recorded sites (DESIGN.md), consistent
from one site to the next and from one step to the next:

- requests arrive (prefill in one step) and finish; finished rows are removed and the holes are
  filled by new requests, then by the last rows (vLLM's ``InputBatch.condense``), so
  ``prev_positions`` is a real permutation with ``-1`` for new rows;
- decode rows schedule ``1 + k`` tokens (the last sampled id and ``k`` drafts); each draft is
  accepted at a set rate until the first rejection; ``sampled_token_ids_cpu`` rows hold the
  ``1 + accepted`` ids, then ``-1``;
- each step appends ``1 + drafts`` ``-1`` placeholders to a row's output list (one for a
  prefill), replaced by the next step's ``async_output`` call as vLLM 0.33.0 does it; records
  carry the tail (the trailing placeholders and the id before them) and the full length;
- the CPU stages the last id it knows (one step behind) and the drafts; the device overwrites
  common rows with the previous step's sampled id and drafts;
- ``num_computed_tokens`` advances by the valid count; the embedding sees the step's input ids.

Faults (each off by default, each a per-step probability, deterministic for a seed):

``stale_prev_row``
    one common row's ``prev_positions`` points past the previous batch (at or past
    ``valid_sampled_token_count`` and ``prev_sampled_token_ids``), as a mapping kept from an
    older, larger batch would after a shrink.
``vocab_sentinel``
    the first rejected slot of one row carries ``vocab_size`` instead of ``-1`` (the SM70
    rejection path); ``async_output`` writes it as a token and the next step's input of that
    request carries it to the embedding (the fork staged the request's next id from its output).
    Drawn at random, it happens only on a step where some row rejects a draft. Forced, it is
    always placed: when no row rejects, one drafting row rejects its last draft; when no row
    drafts (every row new), it moves to the next step that drafts, and a run that ends
    before one raises ConfigurationError (so does forcing it with no drafts at all).
``placeholder_leak``
    one decode row's previous row was discarded: it is absent from the previous batch
    (``prev_positions`` ``-1``, ``None`` in ``prev_req_ids``) while the CPU staged its ``-1``
    placeholder, which survives ``prepare_input_ids`` and reaches the embedding.
``misattribution``
    one common row's ``prev_positions`` points at another request's in-range previous row.

Integer request ids are used inside; the strings ``req-<id>`` appear only in records. Sampled
and draft ids are random: only their ranges and the row bookkeeping are modelled. The hot loop
(:meth:`Simulator.advance`) is a few dozen numpy calls per step on index arrays (random draws
are made 512 steps at a time) and returns a step's fields in compact form
(:class:`~forensics.simulator.step.StepFields`: request ids as integers, output tails as
counts); :meth:`Simulator.step` spells them out as :class:`~forensics.records.Record` objects,
and :mod:`forensics.simulator.columns` encodes many steps at once for the store.
``import forensics`` does not import this module (numpy only, imported lazily).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from forensics.atomic import user_path
from forensics.digits import plain_int
from forensics.errors import ConfigurationError
from forensics.records import Record
from forensics.simulator.draws import Draws, StepDraws
from forensics.simulator.scenarios import FAULTS, Scenario, configure, get_scenario, manifest_for
from forensics.simulator.step import Derived, StepFields, request_names
from forensics.sites import hooked_by

#: the V1 calls a step makes, in pipeline order, by the qualname of vLLM's function; the site
#: recording each is the one whose ``Site.hook`` names it (:func:`forensics.sites.hooked_by`)
V1_CALLS = ("update_num_computed_tokens_for_batch_change", "GPUModelRunner._prepare_input_ids",
            "InputBatch.update_async_output_token_ids", "GPUModelRunner._model_forward")

# Rows of the state matrix ([NCOLS, n] int64, a column per batch row): request id, tokens
# wanted, tokens generated and computed tokens (adjacent: a decode step adds the same count to
# both), the last id the CPU knows, an out-of-vocabulary id waiting for the input, then the output
# tail (adjacent): the output list's length, its trailing placeholders and the last id of the
# list before them.
RID, TARGET, TRUE_LEN, COMP, CPU_LAST, SENT, OUT_LEN, PH, LAST_OUT = range(9)
NCOLS = 9
TAIL = slice(OUT_LEN, LAST_OUT + 1)


class _Shape:
    """Arrays that depend only on the batch size, for steps without new rows."""

    def __init__(self, n: int, k: int) -> None:
        k1 = k + 1
        self.rows = np.arange(n, dtype=np.int64)
        self.no_new = np.zeros(n, bool)
        self.d = np.full(n, k, np.int32)
        self.sched = np.full(n, k1, np.int32)
        self.cu = np.arange(1, n + 1, dtype=np.int32) * k1
        self.slots = np.arange(n * k1, dtype=np.int64).reshape(n, k1)
        self.ones = np.ones(n, np.int32)


class _Prev:
    """What the previous step left behind, in its row order (length p). Arrays are never
    changed once made (records keep them)."""

    __slots__ = ("rids", "sampled", "valid", "last", "drafts", "block", "drafts_n", "comp",
                 "cpu_next", "written", "last_written", "sentinel")

    def __init__(self, rids: np.ndarray, sampled: np.ndarray, valid: np.ndarray,
                 last: np.ndarray, drafts: np.ndarray, block: np.ndarray, drafts_n: np.ndarray,
                 comp: np.ndarray, cpu_next: np.ndarray, written: np.ndarray,
                 last_written: np.ndarray, sentinel: bool) -> None:
        self.rids = rids  # [p] int64 request ids
        self.sampled = sampled  # [p, k+1] int32: 1 + accepted ids, then -1
        self.valid = valid  # [p] int32: valid_sampled_token_count
        self.last = last  # [p] int32: last valid id (prev_sampled_token_ids[:, 0])
        self.drafts = drafts  # [p, k] int32: drafts proposed for the next step
        self.block = block  # [p, k+1] int32: last, then drafts (what a common row is fed)
        self.drafts_n = drafts_n  # [p] int32: drafts scheduled in that step
        self.comp = comp  # [p] int32: computed tokens at the start of that step
        self.cpu_next = cpu_next  # [p] int32: the CPU's optimistic count (comp + scheduled)
        self.written = written  # [p] ids before the first -1 (what async_output counts)
        self.last_written = last_written  # [p] the last of them (a sentinel when sampled)
        self.sentinel = sentinel


_NO_ROWS: np.ndarray = np.zeros(0, np.int64)


class _Step:
    """This step's batch: mapping to previous rows, faults applied, and the schedule.

    ``pp is shape.rows`` marks a step whose batch is the previous one, row for row."""

    __slots__ = ("pp", "pp0", "new", "n_new", "fresh", "dec", "shape", "rec_pp", "leak",
                 "discarded", "sentinel", "sentinel_forced", "d", "sched", "cu", "rids")

    def __init__(self, pp: np.ndarray, new: np.ndarray, n_new: int, shape: _Shape) -> None:
        self.pp = pp  # [n] int64 true previous row, -1 for new
        self.pp0 = pp if not n_new else np.maximum(pp, 0)  # [n] previous row, 0 for new
        self.new = new  # [n] bool
        self.n_new = n_new
        # rows of new requests, and rows that decode (index arrays: cheaper than masks)
        self.fresh = new.nonzero()[0] if n_new else _NO_ROWS
        self.dec = (~new).nonzero()[0] if n_new else shape.rows
        self.shape = shape
        self.rec_pp = pp  # [n] int64 prev_positions as recorded (faults applied)
        self.leak = _NO_ROWS  # rows whose -1 placeholder leaks
        self.discarded: list[int] = []  # previous rows shown as None
        self.sentinel = False
        self.sentinel_forced = False  # the sentinel must be placed (a forced fault)
        self.d = shape.d  # [n] int32 drafts scheduled
        self.sched = shape.sched  # [n] int32 tokens scheduled
        self.cu = shape.cu  # [n] int32 cumulative tokens
        self.rids = _NO_ROWS  # [n] int64 request ids


class Simulator:
    """Step-by-step model of one engine (one or more TP ranks seeing the same batch).

    ``Simulator(scenario, seed=0)``: :meth:`step` returns one step's records (pipeline order,
    every rank); :meth:`records` yields them for a number of steps; :meth:`advance` returns a
    step's fields in compact form (for writing long runs). Recorded steps start at 1: step 0 is
    the prefill of the first batch, which the async branches never see.

    Raises:
        UnknownScenarioError: ``scenario`` names no scenario.
        ConfigurationError: a batch below 1, negative drafts or a vocabulary below 2; a
            forced ``vocab_sentinel`` without drafts.
    """

    def __init__(self, scenario: Scenario | str, seed: int = 0) -> None:
        sc = get_scenario(scenario)
        if sc.batch < 1 or sc.spec_tokens < 0 or sc.vocab < 2:
            raise ConfigurationError(f"bad scenario shape: batch={sc.batch} spec_tokens="
                             f"{sc.spec_tokens} vocab={sc.vocab}; expected batch >= 1, "
                             f"spec_tokens >= 0, vocab >= 2")
        self.scenario = sc
        self.k, self.k1, self.vocab = sc.spec_tokens, sc.spec_tokens + 1, sc.vocab
        self.m = max(sc.max_num_reqs or sc.batch, sc.batch)
        self.draws = Draws(seed, sc.vocab)
        self._tables = StepDraws(self.draws, sc.batch, self.k, sc.accept_rate,
                               sc.faults.rates())
        self._forced = bool(sc.faults.forced)
        if sc.faults.forced.get("vocab_sentinel") and not self.k:
            raise ConfigurationError(f"simulate {sc.name!r}: a forced vocab_sentinel needs "
                                     f"drafts to reject (spec_tokens >= 1), got spec_tokens=0")
        self._requests = 0  # requests arrived so far (the next one's id)
        self._names: list[str] = []  # req-<id> by id, grown as records need them
        self._last_names: tuple[np.ndarray, list[str]] = (_NO_ROWS, [])
        self.step_index = 0
        self._shapes: dict[int, _Shape] = {}
        self._ar_k1 = np.arange(self.k1)
        self._minus_ones = np.full(self.m, -1, np.int64)
        self._buf_comp = np.zeros(self.m, np.int32)  # persistent buffers (copied on write)
        self._buf_drafts = np.zeros(self.m, np.int32)
        self._emb_dtype = np.dtype(sc.embedding_dtype)
        self._sentinels_pending = False
        #: a forced ``vocab_sentinel`` that no row could carry yet (every row new): owed to the
        #: next step that drafts
        self._sentinel_owed = False
        #: how many times each fault fired so far (changed a record), by name
        self.injected: dict[str, int] = dict.fromkeys(FAULTS, 0)
        #: the site of each call of :data:`V1_CALLS`
        self._sites = tuple(hooked_by()[call] for call in V1_CALLS)
        self._state, self._prev = self._first_batch()

    # -- arrivals ---------------------------------------------------------------------------


    @property
    def sites(self) -> tuple[str, ...]:
        """The sites each step records, in pipeline order (one per call of :data:`V1_CALLS`)."""
        return self._sites
    def _shape(self, n: int) -> _Shape:
        shape = self._shapes.get(n)
        if shape is None:
            shape = self._shapes[n] = _Shape(n, self.k)
        return shape

    def _new_rows(self, count: int) -> np.ndarray:
        """State columns ([NCOLS, count]) of ``count`` arriving requests."""
        rows = np.zeros((NCOLS, count), np.int64)
        first = self._requests
        self._requests += count
        rows[RID] = np.arange(first, first + count)
        mean = max(self.scenario.mean_output, 1)
        rows[TARGET] = self.draws.integers(max(1, mean // 2), mean * 3 // 2 + 1, count)
        rows[SENT] = -1
        return rows

    def _prompt_lengths(self, count: int) -> np.ndarray:
        low, high = self.scenario.prompt_len
        return self.draws.integers(low, high + 1, count).astype(np.int32)

    def _first_batch(self) -> tuple[np.ndarray, _Prev]:
        """Step 0: the first batch is prefilled (unrecorded), leaving a previous batch."""
        n = self.scenario.batch
        state = self._new_rows(n)
        st = _Step(_NO_ROWS, np.ones(n, bool), n, self._shape(n))
        st.d, st.sched = np.zeros(n, np.int32), self._prompt_lengths(n)
        st.rids = state[RID].copy()
        return state, self._sample(st, state)

    # -- one step ---------------------------------------------------------------------------

    def records(self, steps: int) -> Iterator[Record]:
        """Yield the records of the next ``steps`` steps in pipeline order."""
        for _ in range(steps):
            yield from self.step()
        self.check_placed()

    def check_placed(self) -> None:
        """Raise when a forced fault is still unplaced after the steps run so far.

        Raises:
            ConfigurationError: a forced ``vocab_sentinel`` found no drafting row at or after
                its step (every row was new).
        """
        if self._sentinel_owed:
            raise ConfigurationError(
                f"simulate {self.scenario.name!r}: the forced vocab_sentinel could not be "
                f"placed by step {self.step_index}: no row drafted at or after its step")

    def step(self) -> list[Record]:
        """Advance one engine step; return its records (four sites per rank, pipeline order)."""
        return self.records_of(self.advance())

    def advance(self) -> StepFields:
        """Advance one engine step; return its fields in compact form (see :meth:`records_of`)."""
        self.step_index += 1
        prev = self._prev
        st = self._layout(self._state)
        if st.pp is st.shape.rows:
            state, st.rids = self._state, prev.rids
        else:
            state = self._state.take(st.pp0, axis=1)
            if st.n_new:
                state[:, st.fresh] = self._new_rows(st.n_new)
            st.rids = state[RID].copy()
        self._inject(st, state, prev)
        self._schedule(st)
        staged, dev = self._inputs(st, state, prev)
        fields = self._fields(st, state, prev, staged, dev)
        self._outputs(st, state, prev)
        self._prev = self._sample(st, state)
        self._state = state
        return fields

    def records_of(self, fields: StepFields) -> list[Record]:
        """The records of a step (four sites per rank, pipeline order), fields spelled out."""
        prev_names: list[str | None] = list(self._names_of(fields.prev_rids))
        for row in fields.discarded:
            prev_names[row] = None
        names = self._names_of(fields.rids)  # cached: the next step's previous names
        derived = {Derived.REQ_IDS: names, Derived.PREV_REQ_IDS: prev_names,
                   Derived.OUTPUT_TAIL: output_tail(fields.tails)}
        step = fields.step
        return [Record(site, step, rank,
                       {k: derived[v] if type(v) is Derived else v for k, v in values.items()})
                for rank in range(self.scenario.ranks)
                for site, values in fields.sites.items()]

    def _names_of(self, rids: np.ndarray) -> list[str]:
        """``req-<id>`` of each id (the list of the last call is reused for the same array)."""
        if rids is self._last_names[0]:
            return self._last_names[1]
        names = self._names
        if len(names) < self._requests:
            names.extend(request_names(range(len(names), self._requests)))
        out = [names[i] for i in rids.tolist()]
        self._last_names = (rids, out)
        return out

    def _layout(self, old: np.ndarray) -> _Step:
        """Remove finished rows; new requests fill the holes, then condensation moves the
        last rows into the holes left over (vLLM's ``InputBatch.condense``)."""
        p = old.shape[1]
        holes = (old[TRUE_LEN] >= old[TARGET]).nonzero()[0]
        alive = p - len(holes)
        room = self.scenario.batch - alive
        n_new = int(np.count_nonzero(self.draws.uniform(room) < self.scenario.arrival_rate)) \
            if room else 0
        if alive == 0 and not n_new:
            n_new = 1
        if not len(holes) and not n_new:
            shape = self._shape(p)
            return _Step(shape.rows, shape.no_new, 0, shape)
        rows = self._shape(p).rows.copy()
        fill = min(n_new, len(holes))
        rows[holes[:fill]] = -1
        if n_new > fill:
            rows = np.concatenate([rows, self._minus_ones[:n_new - fill]])
        n = alive + n_new
        if fill < len(holes):  # holes left over: the last rows move into those below n
            left = holes[fill:].tolist()
            dst = [h for h in left if h < n]
            gone = set(left)
            src = [r for r in range(p - 1, n - 1, -1) if r not in gone][:len(dst)]
            rows[dst] = rows[src]
            rows = rows[:n]
        shape = self._shape(n)
        return _Step(rows, rows < 0 if n_new else shape.no_new, n_new, shape)

    def _inject(self, st: _Step, state: np.ndarray, prev: _Prev) -> None:
        """Draw this step's faults; apply those that act on the batch mapping."""
        fire = self._tables.faults()
        on = {name for name, hit in zip(FAULTS, fire, strict=True) if hit} \
            if fire is not None else set()
        if self._forced:
            on |= self.scenario.faults.forced_at(self.step_index)
        if self._sentinel_owed:
            on.add("vocab_sentinel")
        if not on:
            return
        p = len(prev.valid)
        pool = [int(r) for r in np.flatnonzero(~st.new)]
        pool = [pool[i] for i in np.argsort(self.draws.uniform(len(pool)))]
        rec = st.rec_pp = st.pp.copy()
        if "misattribution" in on and pool and p > 1:
            row = pool.pop()
            rec[row] = (int(st.pp[row]) + 1 + int(self.draws.integers(0, p - 1, 1)[0])) % p
            self.injected["misattribution"] += 1
        if "stale_prev_row" in on and pool:
            row = pool.pop()
            rec[row] = p + int(self.draws.integers(0, max(1, self.m - p), 1)[0])
            self.injected["stale_prev_row"] += 1
        if "placeholder_leak" in on:
            rows = [r for r in pool if state[PH, r] <= self.k1]
            if rows:
                st.discarded.append(int(st.pp[rows[-1]]))
                rec[rows[-1]] = -1
                st.leak = np.array(rows[-1:], np.int64)
                self.injected["placeholder_leak"] += 1
        st.sentinel = "vocab_sentinel" in on  # its row is chosen once acceptance is drawn
        st.sentinel_forced = self._sentinel_owed or "vocab_sentinel" in (
            self.scenario.faults.forced_at(self.step_index) if self._forced else ())

    def _schedule(self, st: _Step) -> None:
        """Decode rows schedule ``1 + k`` tokens (k drafts); new rows their whole prompt."""
        if not st.n_new:
            return  # the shape's schedule
        st.d = st.shape.d.copy()
        st.d[st.fresh] = 0
        st.sched = st.shape.sched.copy()
        st.sched[st.fresh] = self._prompt_lengths(st.n_new)
        st.cu = np.add.accumulate(st.sched, dtype=np.int32)

    def _inputs(self, st: _Step, state: np.ndarray,
                prev: _Prev) -> tuple[np.ndarray, np.ndarray]:
        """The CPU-staged ids and the ids the device ends with (upstream's reading).

        A decode row's slots hold its last sampled id, then its drafts. The CPU stages the
        last id it knows (one step behind) and the drafts; the device overwrites common rows.
        """
        if st.n_new:
            start = (st.cu - st.sched).astype(np.int64)
            staged = self.draws.tokens(int(st.cu[-1])).copy()  # prompt ids of new rows
            slots = start[st.dec, None] + self._ar_k1
            fed = prev.block[st.pp[st.dec]]
            cpu = fed.copy()
            cpu[:, 0] = state[CPU_LAST, st.dec]
            staged[slots] = cpu
        else:
            start, slots = st.shape.slots[:, 0], st.shape.slots
            fed = prev.block if st.pp is st.shape.rows else prev.block[st.pp]
            staged = fed.copy()
            staged[:, 0] = state[CPU_LAST]
            staged = staged.reshape(-1)
        if len(st.leak):
            staged[start[st.leak]] = -1
        if st.rec_pp is st.pp:
            if not st.n_new:
                return staged, fed.reshape(-1)
            dev = staged.copy()
            dev[slots] = fed
            return staged, dev
        dev = staged.copy()
        common = np.flatnonzero((st.rec_pp >= 0) & (st.rec_pp < len(prev.valid)))
        dev[start[common, None] + self._ar_k1] = prev.block[st.rec_pp[common]]
        return staged, dev

    def _fields(self, st: _Step, state: np.ndarray, prev: _Prev, staged: np.ndarray,
                dev: np.ndarray) -> StepFields:
        """The four sites' fields of this step (taken before the outputs are updated)."""
        rows_of = Derived.REQ_IDS
        prepare: dict[str, Any] = {
            "prev_positions": st.rec_pp,
            "prev_sampled_token_ids": prev.last[:, None],
            "input_ids": staged,
            "cu_num_tokens": st.cu,
            "num_draft_tokens": st.d,
            "prev_num_spec_tokens": self.k,
            "vocab_size": self.vocab,
            "req_ids": rows_of,
        }
        if self.k:
            prepare["draft_token_ids"] = prev.drafts
        tails = state[TAIL].copy()
        outputs = {
            "req_ids": rows_of,
            "prev_req_ids": Derived.PREV_REQ_IDS,
            "sampled_token_ids_cpu": prev.sampled,
            "output_tail": Derived.OUTPUT_TAIL,
            "output_len": tails[0].astype(np.int32),
            "vocab_size": self.vocab,
        }
        if self.scenario.clamps:
            prepare["input_ids_device_after"] = dev
            dev = np.maximum(dev, 0)
        model_input = {"input_ids": self._embedding_ids(st, state, dev),
                       "num_embeddings": self.vocab, "req_ids": rows_of, "cu_num_tokens": st.cu,
                       "positions": self._positions(st, state)}
        calls = (self._batch_change(st, prev), prepare, outputs, model_input)  # V1_CALLS' order
        sites = dict(zip(self._sites, calls, strict=True))
        return StepFields(self.step_index, st.rids, prev.rids, st.discarded, tails, sites)

    def _positions(self, st: _Step, state: np.ndarray) -> np.ndarray:
        """The position of each token fed: a row's computed tokens, then one more per token."""
        total = int(st.cu[-1]) if len(st.cu) else 0
        first = np.repeat(state[COMP] - (st.cu - st.sched), st.sched)
        return (first + np.arange(total)).astype(np.int64)

    def _batch_change(self, st: _Step, prev: _Prev) -> dict[str, Any]:
        comp = self._buf_comp = self._persist(self._buf_comp, prev.comp)
        drafts = self._buf_drafts = self._persist(self._buf_drafts, prev.drafts_n)
        if st.n_new:
            cpu = prev.cpu_next[st.pp0]
            cpu[st.fresh] = 0
        else:
            cpu = prev.cpu_next if st.pp is st.shape.rows else prev.cpu_next[st.pp]
        return {
            "prev_positions": st.rec_pp,
            "valid_sampled_token_count": prev.valid,
            "num_computed_tokens": comp,
            "num_accepted_tokens": st.shape.ones,
            "prev_num_draft_tokens": drafts,
            "cpu_num_computed_tokens": cpu,
            "req_ids": Derived.REQ_IDS,
            "prev_req_ids": Derived.PREV_REQ_IDS,
        }

    def _persist(self, buffer: np.ndarray, values: np.ndarray) -> np.ndarray:
        """A persistent buffer of ``max_num_reqs`` rows after writing ``values`` at its start
        (rows past them keep older values); a new array when it changes (records keep it)."""
        if len(values) == len(buffer):
            return values
        out = buffer.copy()
        out[:len(values)] = values
        return out

    def _embedding_ids(self, st: _Step, state: np.ndarray, dev: np.ndarray) -> np.ndarray:
        """The step's input ids as the embedding sees them: an id the output path wrote out of
        the vocabulary is what the fork staged as the request's next id."""
        if not self._sentinels_pending:  # dev is never changed once made: no copy needed
            return dev if dev.dtype == self._emb_dtype else dev.astype(self._emb_dtype)
        ids = dev.astype(self._emb_dtype)
        self._sentinels_pending = False
        rows = np.flatnonzero((state[SENT] >= 0) & ~st.new)
        ids[st.cu[rows] - 1 - self.k] = state[SENT, rows]
        state[SENT] = -1
        return ids

    # -- after the forward: outputs, sampling, bookkeeping -----------------------------------

    def _outputs(self, st: _Step, state: np.ndarray, prev: _Prev) -> None:
        """``async_output`` as vLLM 0.33.0 runs it: the trailing placeholders of each row
        present in the previous batch are replaced by the ids before the row's first ``-1``."""
        upd: np.ndarray | slice
        if st.pp is st.shape.rows and not len(st.leak):  # the previous batch, row for row
            upd, written, last_written, last = slice(None), prev.written, prev.last_written, \
                prev.last
        else:
            upd = st.dec
            if len(st.leak):
                upd = upd[~np.isin(upd, st.leak)]
            ppu = st.pp[upd]
            written, last_written, last = (prev.written[ppu], prev.last_written[ppu],
                                           prev.last[ppu])
        ph = state[PH, upd]
        state[OUT_LEN, upd] += np.minimum(written, ph) - ph
        state[PH, upd] = 0
        state[LAST_OUT, upd] = last_written
        state[CPU_LAST, upd] = last
        if prev.sentinel:
            bad = state[LAST_OUT] >= self.vocab
            bad[st.new] = False
            state[SENT, bad] = state[LAST_OUT, bad]
            self._sentinels_pending = bool(bad.any())

    def _sample(self, st: _Step, state: np.ndarray) -> _Prev:
        """Accept drafts, sample, append placeholders, advance the counters."""
        acc, valid, tok, last, drafts, block = self._tables.step(state.shape[1])
        if st.n_new:  # a prefill samples one id and no drafts
            acc, valid, tok, block = acc.copy(), valid.copy(), tok.copy(), block.copy()
            fresh = st.fresh
            acc[fresh], valid[fresh] = 0, 1
            tok[fresh, 1:] = -1
            block[fresh, 0] = tok[fresh, 0]
            last, drafts = block[:, 0], block[:, 1:]
        written, last_written = valid, last
        if st.sentinel_forced:
            acc, valid, tok, last, block = self._reject_one(st, acc, valid, tok, last, block)
            drafts = block[:, 1:]
            written, last_written = valid, last
        if st.sentinel:
            tok, written, last_written = self._put_sentinel(tok, acc, st.d, last)
        comp = state[COMP].astype(np.int32)
        if st.n_new:
            state[TRUE_LEN] += valid
            state[COMP] += np.where(st.new, st.sched, valid)
            state[OUT_LEN:PH + 1] += st.d + 1
        else:
            state[TRUE_LEN:COMP + 1] += valid  # tokens generated and computed alike
            state[OUT_LEN:PH + 1] += self.k1
        return _Prev(st.rids, tok, valid, last, drafts, block, st.d, comp, comp + st.sched,
                     written, last_written, st.sentinel)

    def _reject_one(self, st: _Step, acc: np.ndarray, valid: np.ndarray, tok: np.ndarray,
                    last: np.ndarray, block: np.ndarray) -> tuple[np.ndarray, ...]:
        """A forced ``vocab_sentinel`` needs a row that rejects a draft: when no row does, one
        drafting row (drawn) rejects its last draft (its last accepted id becomes its last
        valid one). When no row drafts (every row new), the sentinel is owed to the next step
        (:attr:`_sentinel_owed`); otherwise it is placed and the debt cleared. Returns
        ``acc, valid, tok, last, block`` (copies where changed)."""
        drafting = np.flatnonzero(st.d > 0)
        self._sentinel_owed = not len(drafting)
        if self._sentinel_owed or (acc < st.d).any():
            return acc, valid, tok, last, block
        row = int(drafting[int(self.draws.integers(0, len(drafting), 1)[0])])
        acc, valid, tok, last, block = acc.copy(), valid.copy(), tok.copy(), last.copy(), \
            block.copy()
        acc[row] -= 1
        valid[row] -= 1
        tok[row, acc[row] + 1:] = -1
        last[row] = block[row, 0] = tok[row, acc[row]]
        return acc, valid, tok, last, block

    def _put_sentinel(self, tok: np.ndarray, acc: np.ndarray, d: np.ndarray,
                      last: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The SM70 rejection path: the first rejected slot of one row holds ``vocab_size``.

        Returns the sampled ids, the count ``async_output`` sees and the last id it writes."""
        written, last_written = (acc + 1).astype(np.int32), last.copy()
        rows = np.flatnonzero(acc < d)
        if len(rows):
            row = int(rows[int(self.draws.integers(0, len(rows), 1)[0])])
            tok = tok.copy()
            tok[row, acc[row] + 1] = self.vocab
            written[row] += 1
            last_written[row] = self.vocab
            self.injected["vocab_sentinel"] += 1
        return tok, written, last_written


def output_tail(tails: np.ndarray) -> list[list[int]]:
    """Each row's output tail from ``tails`` ([3, n]: list lengths, trailing placeholders, the
    ids before them): that id then the placeholders, or only placeholders when the list holds
    nothing else."""
    sizes, placeholders, last = tails.tolist()
    return [[o, *[-1] * h] if n > h else [-1] * n
            for n, h, o in zip(sizes, placeholders, last, strict=True)]


# -- the public entry point ---------------------------------------------------------------------


def simulate(scenario: str | Scenario, steps: int | None = None, seed: int = 0,
             batch: int | None = None, spec_tokens: int | None = None,
             vocab: int | None = None, out: str | Path | None = None, *, force: bool = False,
             notes: str | None = None, progress: bool = False) -> list[Record] | Path:
    """Run ``scenario`` (a name in :data:`~forensics.simulator.scenarios.SCENARIOS` or a
    :class:`~forensics.simulator.scenarios.Scenario`).

    Settings left at None take the scenario's own (4 drafts, its batch, vocabulary and steps).
    ``progress``: with ``out``, draw a progress bar on stderr.

    Returns:
        Without ``out``: the records, in pipeline order ``(step, rank, site)``.
        With ``out``: the path of the capture written there, a block of steps at a time
        (:mod:`forensics.simulator.columns`: the same capture, written several times faster).
    Raises:
        UnknownScenarioError: an unknown scenario name, listing the valid ones.
        ConfigurationError: a setting out of range (a negative seed included), or an
            ``out`` that names no file (empty, or holding NUL).
        OutputExistsError: ``out`` exists and ``force`` is False.
    """
    sc = configure(scenario, steps=steps, batch=batch, spec_tokens=spec_tokens, vocab=vocab)
    if out is not None:  # "" (an unset "$OUT") names no file: ``Path("")`` was the working
        out = user_path(out)  # directory, which --force replaced by the capture
    if not plain_int(seed) or seed < 0:
        raise ConfigurationError(f"simulate {sc.name!r}: seed must be an integer >= 0, "
                                 f"got {seed!r}")
    if sc.runner == "v2":
        from forensics.simulator.v2 import simulate_v2

        return simulate_v2(sc, seed, lambda injected: manifest_for(sc, seed, notes, injected),
                           out, force)
    sim = Simulator(sc, seed)
    if out is None:
        return list(sim.records(sc.steps))
    from forensics.simulator.columns import write_simulation

    return write_simulation(Path(out), sim, sc.steps, manifest_for(sc, seed, notes), force,
                            progress, final=lambda: manifest_for(sc, seed, notes, sim.injected))
