"""Synthetic Model Runner V2 runs: the per-slot request state V2 keeps, step by step.

Each step of a run records what V2's worker sees at its sites, in the order it runs them:
``combine_sampled_and_draft_tokens`` (the step's input ids from each slot's last sampled token
and drafts), the embedding of those ids, the rejection sampler's ``gather_draft_sampled`` (the
drafts it verifies; steps with drafts only), then ``post_update`` (the sampled ids stored back
into the slots). The state moves by the sites' own models (``upstream``), so a run is
consistent with what the replay computes: the rules are written once, in the site modules.

Requests arrive into free slots (a prefill step, 4 to 12 prompt tokens), decode with ``k``
drafts a step (each accepted at a set rate until the first rejection) and finish after a drawn
number of tokens, freeing their slot. Sampled and draft ids are random.

Faults (a per-step probability each; deterministic for a seed):

``negative_draft``
    a ``-1`` is one decoding request's first draft in its slot (a placeholder that reached
    ``draft_tokens``): ``combine_tokens`` writes it into ``input_ids`` and the embedding gets it.
``vocab_sample``
    ``vocab_size`` is one request's last sampled id at ``post_update``: it is counted (an index
    into ``output_bin_counts``), stored as the slot's last sampled token, and written into the
    next step's ``input_ids`` by ``combine_tokens``.
``wrong_last_token``
    another valid id replaces one decoding request's last sampled token in its slot
    (``last_sampled_tokens``) before ``combine_tokens``: the model reads it in range, silently
    (a ``substituted`` token at a verified position).
``zeroed_combine``
    ``combine_tokens`` writes token 0 where one decoding request's drafts belong (#54137's
    shape): the drafts are judged against the wrong tokens (``substituted`` at draft positions).

numpy only; imported lazily by :func:`forensics.simulator.runs.simulate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.records import Record

if TYPE_CHECKING:
    from forensics.simulator.scenarios import Scenario

FAULTS_V2 = ("negative_draft", "vocab_sample", "wrong_last_token", "zeroed_combine")
#: the V2 functions whose calls a step records, as a site's ``Site.hook`` names them; the site
#: of each is the one whose hook it is (:func:`forensics.sites.hooked_at`); the embedding of
#: the step's ids is the sink
V2_CALLS = ("vllm.v1.worker.gpu.model_runner:combine_sampled_and_draft_tokens",
            "vllm.v1.worker.gpu.model_runner:post_update",
            "vllm.v1.worker.gpu.spec_decode.rejection_sampler:gather_draft_sampled")


@dataclass(frozen=True)
class V2Settings:
    """The shape of a V2 run and its fault rates."""

    steps: int
    slots: int
    spec_tokens: int
    vocab: int
    accept_rate: float = 0.6
    arrival_rate: float = 0.6
    mean_output: int = 12
    negative_draft: float = 0.0
    vocab_sample: float = 0.0
    wrong_last_token: float = 0.0
    zeroed_combine: float = 0.0
    max_model_len: int = 256


@dataclass
class _Slot:
    """One live request: its slot, how many tokens it has and wants."""

    req: int
    prompt: int
    target: int


class V2Simulator:
    """The per-slot state of V2 and the records of its steps (see the module)."""

    def __init__(self, settings: V2Settings, seed: int) -> None:
        from forensics.sites import hooked_at

        self.s = settings
        #: the site of each call of :data:`V2_CALLS`
        self.combine_site, self.post_site, self.drafts_site = (hooked_at()[call]
                                                               for call in V2_CALLS)
        self.rng = np.random.default_rng(seed)
        m, k = settings.slots, settings.spec_tokens
        self.live: dict[int, _Slot] = {}
        self.next_req = 0
        #: how many times each fault fired so far (changed a record), by name
        self.injected: dict[str, int] = dict.fromkeys(FAULTS_V2, 0)
        self.state: dict[str, np.ndarray] = {"last_sampled_tokens": np.zeros(m, np.int64),
                      "draft_tokens": np.zeros((m, k), np.int64),
                      "prefill_len": np.zeros(m, np.int32),
                      "num_computed_tokens": np.zeros(m, np.int32),
                      "total_len": np.zeros(m, np.int32)}

    def records(self) -> Iterator[Record]:
        """Every step's records, in pipeline order within a step."""
        for step in range(self.s.steps):
            yield from self.step(step)

    def _admit(self) -> None:
        """New requests into free slots; finished ones leave theirs."""
        for slot, live in list(self.live.items()):
            if int(self.state["total_len"][slot]) - live.prompt >= live.target:
                del self.live[slot]
        free = [slot for slot in range(self.s.slots) if slot not in self.live]
        for slot in free:
            if self.rng.random() < self.s.arrival_rate:
                prompt = int(self.rng.integers(4, 13))
                target = int(self.rng.integers(2, 2 * self.s.mean_output))
                self.live[slot] = _Slot(self.next_req, prompt, target)
                self.next_req += 1
                for name, value in (("prefill_len", prompt), ("total_len", prompt),
                                    ("num_computed_tokens", 0)):
                    self.state[name][slot] = value
                self.state["draft_tokens"][slot] = 0

    def step(self, step: int) -> list[Record]:
        """One step's records (none when no request is live)."""
        self._admit()
        slots = sorted(self.live)
        if not slots:
            return []
        vocab = self.s.vocab
        rows = [self._row(slot) for slot in slots]
        if self.s.negative_draft and self.rng.random() < self.s.negative_draft:
            decoding = [i for i, r in enumerate(rows) if r[2] > 0]
            if decoding:
                self.state["draft_tokens"][slots[decoding[0]], 0] = -1
                self.injected["negative_draft"] += 1
        decoding = [i for i, r in enumerate(rows) if r[2] > 0]
        if self.s.wrong_last_token and self.rng.random() < self.s.wrong_last_token and decoding:
            last = self.state["last_sampled_tokens"]
            slot = slots[decoding[0]]
            last[slot] = (int(last[slot]) + 1 + int(self.rng.integers(0, vocab - 1))) % vocab
            self.injected["wrong_last_token"] += 1
        req_ids = [f"req-{self.live[slot].req}" for slot in slots]
        queries, logits = [r[0] for r in rows], [r[1] for r in rows]
        qsl = np.concatenate([[0], np.cumsum(queries)]).astype(np.int32)
        computed = self.state["num_computed_tokens"][slots]
        combine = Record(self.combine_site, step, 0, {
            "input_ids": self.rng.integers(0, vocab, int(qsl[-1])).astype(np.int32),
            "idx_mapping": np.array(slots, np.int64),
            "last_sampled_tokens": self.state["last_sampled_tokens"].copy(),
            "query_start_loc": qsl, "seq_lens": (computed + np.array(queries)).astype(np.int32),
            "prefill_len": self.state["prefill_len"].copy(),
            "draft_tokens": self.state["draft_tokens"].copy(),
            "cu_num_logits": np.concatenate([[0], np.cumsum(logits)]).astype(np.int32),
            "num_new_sampled_tokens": 1, "vocab_size": vocab, "req_ids": req_ids})
        from forensics.sites import SINK, get_site

        ids = get_site(self.combine_site).upstream(combine).outputs.get("input_ids")
        if self.s.zeroed_combine and self.rng.random() < self.s.zeroed_combine and decoding:
            ids = np.array(ids, copy=True)
            end, count = int(qsl[decoding[-1] + 1]), rows[decoding[-1]][2]
            ids[end - count:end] = 0
            self.injected["zeroed_combine"] += 1
        combine.fields["input_ids_after"] = ids
        fed = Record(SINK, step, 0, {
            "input_ids": ids, "num_embeddings": vocab, "req_ids": req_ids,
            "cu_num_tokens": qsl[1:].copy()})
        drafts = self._drafts(step, slots, rows, qsl, ids, req_ids)
        post = self._post_update(step, slots, rows, qsl, req_ids)
        return [combine, fed, *drafts, post]

    def _drafts(self, step: int, slots: list[int], rows: list[tuple[int, int, int]],
                qsl: np.ndarray, ids: Any, req_ids: list[str]) -> list[Record]:
        """The record of the rejection sampler's gather of the step's drafts (none when no
        request verifies drafts: V2 samples without the rejection sampler then). Each
        request's logits rows are its query's last ones, as ``combine_tokens`` places them."""
        if not any(r[2] for r in rows):
            return []
        computed = self.state["num_computed_tokens"]
        positions = np.concatenate([computed[slot] + np.arange(r[0]) for slot, r in
                                    zip(slots, rows, strict=True)]).astype(np.int64)
        logits = [np.arange(int(qsl[i + 1]) - r[1], int(qsl[i + 1])) for i, r in enumerate(rows)]
        return [Record(self.drafts_site, step, 0, {
            "input_ids": np.asarray(ids), "positions": positions,
            "logits_indices": np.concatenate(logits).astype(np.int64),
            "expanded_idx_mapping": np.repeat(np.array(slots, np.int64), [r[1] for r in rows]),
            "expanded_local_pos": np.concatenate([np.arange(r[1]) for r in rows]).astype(
                np.int32),
            "prefill_len": self.state["prefill_len"].copy(), "vocab_size": self.s.vocab,
            "req_ids": req_ids})]

    def _row(self, slot: int) -> tuple[int, int, int]:
        """``(query tokens, logits, drafts)`` of ``slot`` this step: the whole prompt for a
        new request, else the last token and ``k`` drafts."""
        computed = int(self.state["num_computed_tokens"][slot])
        prefill = int(self.state["prefill_len"][slot])
        if computed < prefill:
            return prefill - computed, 1, 0
        drafts = self.s.spec_tokens
        return 1 + drafts, 1 + drafts, drafts

    def _post_update(self, step: int, slots: list[int], rows: list[tuple[int, int, int]],
                     qsl: np.ndarray, req_ids: list[str]) -> Record:
        """The ``post_update`` record of the step; moves the state by the site's model."""
        from forensics.sites import get_site

        n, k, vocab = len(slots), self.s.spec_tokens, self.s.vocab
        sampled = np.full((n, k + 1), -1, np.int64)
        num_sampled = np.zeros(n, np.int32)
        for i, (_, _, drafts) in enumerate(rows):
            accepted = 0
            while accepted < drafts and self.rng.random() < self.s.accept_rate:
                accepted += 1
            num_sampled[i] = accepted + 1
            sampled[i, :accepted + 1] = self.rng.integers(0, vocab, accepted + 1)
        if self.s.vocab_sample and self.rng.random() < self.s.vocab_sample:
            # not the last slot: its count of id vocab_size would lie past output_bin_counts
            rows_ok = [i for i, slot in enumerate(slots) if slot < self.s.slots - 1]
            if rows_ok:
                i = rows_ok[int(self.rng.integers(0, len(rows_ok)))]
                sampled[i, num_sampled[i] - 1] = vocab
                self.injected["vocab_sample"] += 1
        num_logits = np.array([r[1] for r in rows], np.int32)
        record = Record(self.post_site, step, 0, {
            "idx_mapping": np.array(slots, np.int64),
            "num_computed_tokens": self.state["num_computed_tokens"].copy(),
            "last_sampled_tokens": self.state["last_sampled_tokens"].copy(),
            "sampled_tokens": sampled, "num_sampled": num_sampled,
            "num_rejected": (num_logits - num_sampled).astype(np.int32),
            "total_len": self.state["total_len"].copy(),
            "all_token_ids_width": self.s.max_model_len, "bin_counts_rows": self.s.slots,
            "bin_counts_width": vocab, "vocab_size": vocab, "query_start_loc": qsl,
            "req_ids": req_ids})
        outputs = get_site(self.post_site).upstream(record).outputs
        for name, value in outputs.items():
            record.fields[f"{name}_after"] = value
            self.state[name] = np.array(value, copy=True)
        self._draft(slots, rows)
        return record

    def _draft(self, slots: list[int], rows: list[tuple[int, int, int]]) -> None:
        """The drafter's proposals for the next step, into each live slot."""
        k = self.s.spec_tokens
        for slot in slots:
            self.state["draft_tokens"][slot] = self.rng.integers(0, self.s.vocab, k)


def settings_of(scenario: Scenario) -> V2Settings:
    """The V2 settings of a ``runner="v2"`` scenario (its batch is the slot count)."""
    rates = dict(scenario.v2_faults)
    unknown = sorted(set(rates) - set(FAULTS_V2))
    if unknown:
        raise ValueError(f"scenario {scenario.name!r}: unknown V2 faults {unknown}; expected "
                         f"{list(FAULTS_V2)}")
    return V2Settings(steps=scenario.steps, slots=scenario.batch,
                      spec_tokens=scenario.spec_tokens, vocab=scenario.vocab,
                      negative_draft=rates.get("negative_draft", 0.0),
                      vocab_sample=rates.get("vocab_sample", 0.0),
                      wrong_last_token=rates.get("wrong_last_token", 0.0),
                      zeroed_combine=rates.get("zeroed_combine", 0.0))


def simulate_v2(scenario: Scenario, seed: int,
                manifest: Callable[[dict[str, int]], dict[str, Any]],
                out: str | Path | None, force: bool) -> list[Record] | Path:
    """Run a V2 scenario: its records, or the capture written at ``out`` (``runner`` v2) with
    ``manifest`` of the faults the run injected."""
    sim = V2Simulator(settings_of(scenario), seed)
    records = list(sim.records())
    if out is None:
        return records
    from forensics.store.writer import write_capture

    return write_capture(Path(out), records, {**manifest(sim.injected), "runner": "v2"}, force)
