"""The simulator's settings: the faults it can inject (:class:`Faults`), a named setting of
batch, model shape, dynamics and faults (:class:`Scenario`, the built-in ones in
:data:`SCENARIOS`), a scenario with settings replaced (:func:`configure`) and the manifest of a
simulated capture (:func:`manifest_for`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from forensics.digits import plain_int
from forensics.errors import ConfigurationError, UnknownScenarioError

#: the V1 faults a scenario can inject, in the order of :meth:`Faults.rates`
FAULTS = ("stale_prev_row", "vocab_sentinel", "placeholder_leak", "misattribution")


@dataclass(frozen=True)
class Faults:
    """Per-step probability of each fault (0: off), plus steps at which one is forced."""

    stale_prev_row: float = 0.0
    vocab_sentinel: float = 0.0
    placeholder_leak: float = 0.0
    misattribution: float = 0.0
    #: fault name -> steps at which one instance is injected regardless of the rate
    forced: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def rates(self) -> np.ndarray:
        """The four rates in :data:`FAULTS` order."""
        return np.array([getattr(self, name) for name in FAULTS], dtype=np.float64)

    def forced_at(self, step: int) -> set[str]:
        """Names of the faults forced at ``step``."""
        return {name for name, steps in self.forced.items() if step in steps}


@dataclass(frozen=True)
class Scenario:
    """A named simulation setting: the batch and model shape, its dynamics and its faults."""

    name: str
    description: str
    faults: Faults = Faults()
    steps: int = 200
    batch: int = 8
    spec_tokens: int = 4
    vocab: int = 32000
    accept_rate: float = 0.7
    arrival_rate: float = 0.5
    mean_output: int = 48
    prompt_len: tuple[int, int] = (4, 16)
    max_num_reqs: int | None = None
    ranks: int = 1
    embedding_dtype: str = "int32"
    #: the runner simulated: "v1", or "v2" (Model Runner V2, :mod:`forensics.simulator.v2`,
    #: whose faults are the rates of ``v2_faults``)
    runner: str = "v1"
    v2_faults: tuple[tuple[str, float], ...] = ()
    #: V1: ``GPUModelRunner._preprocess`` clamps the input ids to ``>= 0`` before the
    #: embedding (vLLM 0.32/0.33 with a speculative config): ``prepare_input_ids`` records the
    #: ids it wrote (``input_ids_device_after``) and the embedding receives them clamped
    clamps: bool = False


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("clean", "no fault: every index stays in range"),
        Scenario("stale-prev-row", "a positive prev_positions entry past the previous batch",
                 Faults(stale_prev_row=0.05)),
        Scenario("vocab-sentinel", "rejected slots carry vocab_size; async_output writes it",
                 Faults(vocab_sentinel=0.05)),
        Scenario("placeholder-leak", "a -1 placeholder survives on a row absent from the "
                 "previous batch", Faults(placeholder_leak=0.05)),
        Scenario("misattribution", "an in-range previous row of another request",
                 Faults(misattribution=0.05)),
        Scenario("clamped-placeholder", "a -1 placeholder survives on a row absent from the "
                 "previous batch and vLLM's clamp turns it into token 0 before the embedding",
                 Faults(placeholder_leak=0.05), clamps=True),
        Scenario("soak", "a long run at batch 64 with rare mixed faults",
                 Faults(stale_prev_row=1e-4, vocab_sentinel=1e-4, placeholder_leak=1e-4,
                        misattribution=1e-4),
                 steps=250_000, batch=64, mean_output=256, arrival_rate=0.3),
        Scenario("v2-clean", "Model Runner V2, no fault", steps=40, batch=6, spec_tokens=3,
                 vocab=512, runner="v2"),
        Scenario("v2-negative-draft", "Model Runner V2: a -1 draft in a request's slot reaches "
                 "input_ids", steps=40, batch=6, spec_tokens=3, vocab=512, runner="v2",
                 v2_faults=(("negative_draft", 0.05),)),
        Scenario("v2-vocab-sample", "Model Runner V2: vocab_size sampled, counted and stored "
                 "as the next input", steps=40, batch=6, spec_tokens=3, vocab=512, runner="v2",
                 v2_faults=(("vocab_sample", 0.05),)),
        Scenario("v2-wrong-last-token", "Model Runner V2: another valid id replaces a "
                 "request's last sampled token in its slot", steps=40, batch=6, spec_tokens=3,
                 vocab=512, runner="v2", v2_faults=(("wrong_last_token", 0.05),)),
        Scenario("v2-zeroed-combine", "Model Runner V2: the combine step writes token 0 where "
                 "a request's drafts belong", steps=40, batch=6, spec_tokens=3, vocab=512,
                 runner="v2", v2_faults=(("zeroed_combine", 0.05),)),
    )
}


def get_scenario(name: str | Scenario) -> Scenario:
    """Return the scenario ``name`` (a :class:`Scenario` is returned as is).

    Raises:
        UnknownScenarioError: the name is not in :data:`SCENARIOS`; the message lists them.
    """
    if isinstance(name, Scenario):
        return name
    try:
        return SCENARIOS[name]
    except (KeyError, TypeError):
        raise UnknownScenarioError(
            f"unknown scenario {name!r}; expected one of {list(SCENARIOS)}"
        ) from None


#: the largest vocabulary a simulation draws from (the replay refuses a larger one)
MAX_VOCAB = 2**24
#: the most steps a simulation runs (four times the soak scenario's): ``--steps`` of 20 digits
#: ran for ever, writing until the disk was full
MAX_STEPS = 1_000_000
#: the most tokens one simulated step schedules (batch x (1 + spec_tokens)): its arrays stay
#: small, never sized by a setting into gigabytes
MAX_STEP_TOKENS = 2**16
#: the most tokens a whole simulation schedules (steps x batch x (1 + spec_tokens)): four times
#: the soak scenario's (250,000 x 64 x 5). Each cap above alone let 1,000,000 steps of 65,536
#: tokens through: about 28 hours, writing 3.6 MB a step until the disk was full
MAX_TOKENS = 320_000_000
#: the faults that act on draft tokens (a rejected slot, a slot's draft, a decoding request's
#: last token or drafts): a run without drafts never injects one
DRAFT_FAULTS = frozenset({"vocab_sentinel", "negative_draft", "wrong_last_token",
                          "zeroed_combine"})
#: the largest seed ``--seed`` takes (a signed 64-bit integer: what a manifest's reader holds)
MAX_SEED = 2**63 - 1


def configure(scenario: str | Scenario, *, steps: int | None = None, batch: int | None = None,
              spec_tokens: int | None = None, vocab: int | None = None) -> Scenario:
    """The scenario with the given settings replaced (None keeps the scenario's own).

    Raises:
        UnknownScenarioError: an unknown scenario name (the message lists the valid ones).
        ConfigurationError: steps or batch below 1, negative spec_tokens, vocab below 2 or
            past :data:`MAX_VOCAB`, steps past :data:`MAX_STEPS`, a step of more than
            :data:`MAX_STEP_TOKENS` tokens, a run of more than :data:`MAX_TOKENS`, no drafts
            for a scenario whose every fault acts on them (:data:`DRAFT_FAULTS`).
    """
    sc = get_scenario(scenario)
    changes: dict[str, Any] = {key: value for key, value in (("steps", steps), ("batch", batch),
                                             ("spec_tokens", spec_tokens), ("vocab", vocab))
               if value is not None}
    sc = replace(sc, **changes)
    for key, low in (("steps", 1), ("batch", 1), ("spec_tokens", 0), ("vocab", 2)):
        value = getattr(sc, key)
        if not plain_int(value) or value < low:
            raise ConfigurationError(f"simulate {sc.name!r}: {key} must be an integer >= "
                                     f"{low}, got {value!r}")
    if sc.steps > MAX_STEPS:
        raise ConfigurationError(f"simulate {sc.name!r}: steps must be at most {MAX_STEPS:,}, "
                                 f"got {str(sc.steps)[:40]}; give a smaller --steps")
    if sc.vocab > MAX_VOCAB:
        raise ConfigurationError(f"simulate {sc.name!r}: vocab must be at most {MAX_VOCAB} "
                                 f"(2**24, the replay's cap), got {sc.vocab}")
    if sc.batch * (1 + sc.spec_tokens) > MAX_STEP_TOKENS:
        raise ConfigurationError(
            f"simulate {sc.name!r}: batch x (1 + spec_tokens) = {sc.batch} x "
            f"{1 + sc.spec_tokens} tokens a step, past {MAX_STEP_TOKENS} (2**16); give a "
            f"smaller --batch or --spec-tokens")
    faults = fault_names(sc)
    if not sc.spec_tokens and faults and faults <= DRAFT_FAULTS:
        raise ConfigurationError(
            f"simulate {sc.name!r}: its fault ({sc.description}) acts on draft tokens, and "
            "spec_tokens 0 leaves none: the run would hold no fault while its notes say it does; "
            "give --spec-tokens 1 or more")
    if sc.clamps and not sc.spec_tokens:
        raise ConfigurationError(
            f"simulate {sc.name!r}: vLLM's V1 runner clamps the input ids to >= 0 only with a "
            "speculative config (0.32 and 0.33 alike), and spec_tokens 0 sets none: its -1 "
            "would reach the embedding unclamped while the run says it was read as token 0; "
            "give --spec-tokens 1 or more")
    tokens = sc.steps * sc.batch * (1 + sc.spec_tokens)
    if tokens > MAX_TOKENS:
        raise ConfigurationError(
            f"simulate {sc.name!r}: steps x batch x (1 + spec_tokens) = {sc.steps} x {sc.batch} "
            f"x {1 + sc.spec_tokens} = {tokens:,} tokens, past {MAX_TOKENS:,} (four times the "
            f"soak scenario's); give fewer --steps or a smaller --batch or --spec-tokens")
    return sc


def fault_names(sc: Scenario) -> set[str]:
    """The faults ``sc`` may inject: those of a rate above 0 or forced at some step (V1), and
    its ``v2_faults`` of a rate above 0."""
    v1 = {name for name in FAULTS if getattr(sc.faults, name) > 0 or sc.faults.forced.get(name)}
    return v1 | {name for name, rate in sc.v2_faults if rate > 0}


def manifest_for(sc: Scenario, seed: int, notes: str | None = None,
                 injected: dict[str, int] | None = None) -> dict[str, Any]:
    """The manifest entries of a simulated capture: creator, model facts, settings, notes.
    ``injected``: once the run is over, how many times each fault fired (the simulator's
    ``injected``): kept for each fault ``sc`` may inject (``simulation.injected``), and notes
    not given say which fired, or that none did (:func:`ran_notes`)."""
    from forensics import __version__

    faults = {name: getattr(sc.faults, name) for name in FAULTS}
    forced = {name: list(steps) for name, steps in sc.faults.forced.items()}
    return {
        "creator": f"vllm-forensics {__version__} simulate",
        "model": {"vocab_size": sc.vocab, "num_embeddings": sc.vocab,
                  "num_speculative_tokens": sc.spec_tokens, "max_num_seqs": sc.batch,
                  "tensor_parallel_size": sc.ranks},
        "simulation": {"scenario": sc.name, "seed": seed, "steps": sc.steps, "batch": sc.batch,
                       "spec_tokens": sc.spec_tokens, "vocab": sc.vocab,
                       "accept_rate": sc.accept_rate, "arrival_rate": sc.arrival_rate,
                       "mean_output": sc.mean_output, "faults": faults,
                       "forced_faults": forced, **_injected(sc, injected)},
        "notes": notes if notes is not None else ran_notes(sc, injected),
    } | ({"clamps": True} if sc.clamps else {})


def _injected(sc: Scenario, injected: dict[str, int] | None) -> dict[str, Any]:
    """``{"injected": {fault: count}}`` of each fault ``sc`` may inject, once it ran."""
    if injected is None:
        return {}
    return {"injected": {name: int(injected.get(name, 0)) for name in sorted(fault_names(sc))}}


def ran_notes(sc: Scenario, injected: dict[str, int] | None = None) -> str:
    """The notes of a simulated capture: its scenario's description, and once it ran
    (``injected``) the faults that fired with their counts, or that none did (a run too short
    for its random faults claims none)."""
    if injected is None or not fault_names(sc):
        return f"synthetic run: {sc.description}"
    fired = ", ".join(f"{name} {injected[name]} time{'s' * (injected[name] != 1)}"
                      for name in sorted(fault_names(sc)) if injected.get(name))
    if fired:
        return f"synthetic run: {sc.description}; faults injected: {fired}"
    return (f"synthetic run: {none_fired(sc, injected)} (scenario {sc.name}, whose faults, "
            f"drawn at random, are: {sc.description})")


def none_fired(sc: Scenario, injected: dict[str, int] | None) -> str | None:
    """"no fault fired in its N steps" when ``sc`` may inject faults and none of them fired by
    ``injected`` (a run's counts of each), else None (None too when ``injected`` is None: the
    counts are not known)."""
    if injected is None or not fault_names(sc) \
            or any(injected.get(name) for name in fault_names(sc)):
        return None
    return f"no fault fired in its {sc.steps} step{'s' * (sc.steps != 1)}"
