"""The objectives' options: one frozen dataclass per objective, checked when it is built, and
`ObjectiveConfig`, the config section that holds a group of them per objective.

These sit below both the config (`seqjax.config` composes `ObjectiveConfig`) and the objectives
(`seqjax.objectives`: each objective subclasses its options and adds `__call__`), so that the
configuration does not import the code it configures. A group's checks raise `ValueError`
naming the option by its name in the group; the config prefixes the group's path.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from typing import Any

from seqjax.options import option

SCHEDULES = ("linear", "exponential", "inverse_sigmoid")  # scheduled sampling's decay of ε
KL_SCHEDULES = ("linear", "sigmoid", "constant")  # the VAE's annealing of β
FEEDS = ("argmax", "sample")  # the model's own token in a rollout
PARALLEL_FEEDS = (*FEEDS, "soft")
MODES = ("auto", "scan", "parallel")
POOLS = ("target", "vocab")
BASELINES = ("self_critical", "mean", "none")
SEARCHES = ("sample", "beam")
# The objectives, each the name of its group in `ObjectiveConfig` (a test keeps the two equal).
OBJECTIVE_KINDS = (
    "teacher_forcing",
    "scheduled_sampling",
    "random_replacement",
    "gradient_penalty",
    "reinforce",
    "mixer",
    "minimum_risk",
    "vae",
    "bidirectional_lm",
    "masked_lm",
    "electra",
)


def check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_number(name: str, value: Any, low: float, high: float = math.inf, *, open_low: bool = False) -> None:
    """A finite real in [low, high] (or (low, high] with open_low)."""
    ok = _is_real(value) and not (value < low or (open_low and value == low) or value > high)
    if not ok:
        bounds = f"{'(' if open_low else '['}{low}, {high}{']' if math.isfinite(high) else ')'}"
        raise ValueError(f"{name} must be a finite number in {bounds}, got {value!r}")


def check_one_of(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def check_linear(k: float, c: float, eps_min: float) -> None:
    if not _is_real(k) or not 0.0 < k <= 1.0:
        raise ValueError(f"k must be a number in (0, 1] for the linear schedule, got {k!r}")
    if not _is_real(c) or c < 0.0:
        raise ValueError(f"c must be a number >= 0 for the linear schedule, got {c!r}")
    if not _is_real(eps_min) or not 0.0 <= eps_min <= k:
        raise ValueError(f"eps_min must be a number in [0, k={k}] for the linear schedule, got {eps_min!r}")


def check_exponential(k: float) -> None:
    if not _is_real(k) or not 0.0 < k < 1.0:
        raise ValueError(f"k must be a number in (0, 1) for the exponential schedule, got {k!r}")


def check_inverse_sigmoid(k: float) -> None:
    if not _is_real(k) or k < 1.0:
        raise ValueError(f"k must be a number >= 1 for the inverse_sigmoid schedule, got {k!r}")


def check_schedule(schedule: str, *, k: float, c: float, eps_min: float) -> None:
    """Host check of a schedule name and the parameters that schedule uses."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    if schedule == "linear":
        check_linear(k, c, eps_min)
    elif schedule == "exponential":
        check_exponential(k)
    else:
        check_inverse_sigmoid(k)


def check_masking(rate: float, mask_prob: float, random_prob: float) -> None:
    check_number("rate", rate, 0.0, 1.0, open_low=True)
    check_number("mask_prob", mask_prob, 0.0, 1.0)
    check_number("random_prob", random_prob, 0.0, 1.0 - mask_prob)


@dataclasses.dataclass(frozen=True)
class TeacherForcingOptions:
    """Teacher forcing has no options."""


@dataclasses.dataclass(frozen=True)
class ScheduledSamplingOptions:
    """Scheduled sampling's schedule of ε and how the model's own tokens are fed."""

    schedule: str = option("inverse_sigmoid", "decay of ε, the probability of feeding gold: " + " | ".join(SCHEDULES))
    k: float = option(200.0, "linear: in (0, 1]; exponential: in (0, 1); inverse_sigmoid: >= 1")
    c: float = option(1e-4, "linear: decrease of ε per step")
    eps_min: float = option(0.0, "linear: floor of ε")
    feed: str = option("argmax", "the model's own token: argmax | sample | soft (parallel mode: expected embedding)")
    mode: str = option("auto", "scan (over the decode step) | parallel (n passes) | auto: scan for RNNs fed tokens")
    passes: int = option(2, "parallel: model passes, the last one gets the loss")
    first_pass_grad: bool = option(False, "parallel with soft feed: backpropagate through the earlier passes")

    def __post_init__(self) -> None:
        check_schedule(self.schedule, k=self.k, c=self.c, eps_min=self.eps_min)
        check_one_of("mode", self.mode, MODES)
        check_one_of("feed", self.feed, PARALLEL_FEEDS)
        if self.feed == "soft" and self.mode == "scan":
            raise ValueError("feed must be argmax or sample for mode=scan (the decode step takes tokens), got 'soft'")
        check_int("passes", self.passes, 2)
        if self.first_pass_grad and self.feed != "soft":
            raise ValueError(f"first_pass_grad needs feed=soft (tokens carry no gradient), got feed={self.feed!r}")


@dataclasses.dataclass(frozen=True)
class RandomReplacementOptions:
    """How often decoder inputs are replaced, and by what."""

    sequence_rate: float = option(0.5, "probability that a row gets replacements")
    token_rate: float = option(0.3, "probability that a decoder input of a chosen row (after the first) is replaced")
    pool: str = option("target", "replacement tokens: target (the row's own tokens) | vocab (uniform, no specials)")

    def __post_init__(self) -> None:
        check_number("sequence_rate", self.sequence_rate, 0.0, 1.0)
        check_number("token_rate", self.token_rate, 0.0, 1.0)
        check_one_of("pool", self.pool, POOLS)


@dataclasses.dataclass(frozen=True)
class GradientPenaltyOptions:
    """The weight of the embedding gradient penalty."""

    penalty: float = option(0.5, "λ of λ·||∂CE/∂(input embeddings)||²")

    def __post_init__(self) -> None:
        check_number("penalty", self.penalty, 0.0)


@dataclasses.dataclass(frozen=True)
class ReinforceOptions:
    """REINFORCE's samples, baseline and mix with teacher forcing."""

    sequences_per_source: int = option(4, "K, sequences sampled per source")
    baseline: str = option("self_critical", "self_critical | mean (of the other samples) | none")
    mle_weight: float = option(0.0, "w of loss = w·teacher forcing + (1 − w)·sequence loss")

    def __post_init__(self) -> None:
        check_int("sequences_per_source", self.sequences_per_source, 1)
        check_one_of("baseline", self.baseline, BASELINES)
        if self.baseline == "mean" and self.sequences_per_source < 2:
            raise ValueError(
                "sequences_per_source must be >= 2 for the mean-of-the-others baseline, "
                f"got {self.sequences_per_source}"
            )
        check_number("mle_weight", self.mle_weight, 0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class MixerOptions(ReinforceOptions):
    """MIXER's growth of Δ, beside REINFORCE's options."""

    delta_start: int = option(2, "Δ at step 0: the last Δ target tokens of a row are REINFORCE's")
    delta_growth: int = option(2, "Δ grows by this every delta_every steps")
    delta_every: int = option(1000, "steps between growths of Δ")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("delta_start", self.delta_start, 1)
        check_int("delta_growth", self.delta_growth, 0)
        check_int("delta_every", self.delta_every, 1)


@dataclasses.dataclass(frozen=True)
class MinimumRiskOptions:
    """Minimum-risk training's candidates, sharpness and mix with teacher forcing."""

    num_candidates: int = option(8, "n, candidates per source")
    search: str = option("sample", "how candidates are found: sample (ancestral) | beam (the n best)")
    alpha: float = option(5e-3, "Q ∝ p^alpha on the candidates")
    mle_weight: float = option(0.0, "w of loss = w·teacher forcing + (1 − w)·risk")

    def __post_init__(self) -> None:
        check_int("num_candidates", self.num_candidates, 1)
        check_one_of("search", self.search, SEARCHES)
        check_number("alpha", self.alpha, 0.0, open_low=True)
        check_number("mle_weight", self.mle_weight, 0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class VAEOptions:
    """The VAE LM objective's KL weight, its annealing, word dropout and free bits."""

    beta: float = option(1.0, "the KL weight β reached at the end of annealing")
    schedule: str = option("linear", "KL annealing: linear | sigmoid (β from 0 at step 0) | constant (β throughout)")
    anneal_steps: int = option(1000, "updates over which β rises from 0 to beta (linear, sigmoid)")
    sharpness: float = option(10.0, "sigmoid: slope k of σ(k (step / anneal_steps − ½))")
    word_dropout: float = option(0.0, "probability that a decoder input (after the first) is replaced by <unk>")
    free_bits: float = option(0.0, "λ nats per latent dimension: batch-mean KL below it is not penalized")

    def __post_init__(self) -> None:
        check_number("beta", self.beta, 0.0)
        check_one_of("schedule", self.schedule, KL_SCHEDULES)
        check_int("anneal_steps", self.anneal_steps, 1)
        check_number("sharpness", self.sharpness, 0.0, open_low=True)
        check_number("word_dropout", self.word_dropout, 0.0, 1.0)
        check_number("free_bits", self.free_bits, 0.0)


@dataclasses.dataclass(frozen=True)
class BidirectionalLMOptions:
    """The joint forward + backward LM objective has no options."""


@dataclasses.dataclass(frozen=True)
class MaskedLMOptions:
    """BERT's masking rates."""

    rate: float = option(0.15, "probability that a valid token is selected (predicted)")
    mask_prob: float = option(0.8, "probability that a selected token is shown as [MASK]")
    random_prob: float = option(0.1, "probability that a selected token is shown as a random word (else itself)")

    def __post_init__(self) -> None:
        check_masking(self.rate, self.mask_prob, self.random_prob)


@dataclasses.dataclass(frozen=True)
class ElectraOptions:
    """ELECTRA's masking rate, discriminator weight and sampling temperature."""

    rate: float = option(0.15, "probability that a valid token is masked for the generator")
    discriminator_weight: float = option(50.0, "λ, the weight of the replaced-token detection loss")
    temperature: float = option(1.0, "temperature of the generator's samples")

    def __post_init__(self) -> None:
        check_number("rate", self.rate, 0.0, 1.0, open_low=True)
        check_number("discriminator_weight", self.discriminator_weight, 0.0)
        check_number("temperature", self.temperature, 0.0, open_low=True)


@dataclasses.dataclass(frozen=True)
class ObjectiveConfig:
    """The objective of a run: `kind`, and each objective's options as a group named for it
    (`objective.scheduled_sampling.k`), of which only `kind`'s is used. The kinds are the
    groups; `seqjax.objectives.OBJECTIVES` maps each to the objective that subclasses it."""

    kind: str = option("teacher_forcing", " | ".join(OBJECTIVE_KINDS), choices=OBJECTIVE_KINDS)
    teacher_forcing: TeacherForcingOptions = TeacherForcingOptions()
    scheduled_sampling: ScheduledSamplingOptions = ScheduledSamplingOptions()
    random_replacement: RandomReplacementOptions = RandomReplacementOptions()
    gradient_penalty: GradientPenaltyOptions = GradientPenaltyOptions()
    reinforce: ReinforceOptions = ReinforceOptions()
    mixer: MixerOptions = MixerOptions()
    minimum_risk: MinimumRiskOptions = MinimumRiskOptions()
    vae: VAEOptions = VAEOptions()
    bidirectional_lm: BidirectionalLMOptions = BidirectionalLMOptions()
    masked_lm: MaskedLMOptions = MaskedLMOptions()
    electra: ElectraOptions = ElectraOptions()

    def __post_init__(self) -> None:
        # A group given as the objective itself (`vae=VAE(beta=0.5)`) is kept as its options, so
        # that a config equals the one read back from its saved form.
        for field in dataclasses.fields(self):
            group, options = getattr(self, field.name), type(getattr(ObjectiveConfig, field.name))
            if dataclasses.is_dataclass(group) and type(group) is not options:
                values = {f.name: getattr(group, f.name) for f in dataclasses.fields(options)}
                object.__setattr__(self, field.name, options(**values))
