"""Sampled softmax (`head.kind=sampled`): its loss, head and options, and what every sampling head
shares (the scores of the target and the samples, their checks, `SamplingHead`, the proposal).

The sampling losses (sampled softmax here, NCE and negative sampling in `seqjax.heads.nce`)
each score the true class and K sampled classes only, gathering K + 1 rows of the
[V, D] output table instead of multiplying by all V. Samples come from
`seqjax.heads.samplers` (or anywhere), shared by the batch ([K]) or drawn per row ([N, K];
this gathers [N, K, D] and suits small K). The exact evaluation of the sampled-softmax and NCE
models is the full softmax over the same scores (`full_softmax_loss`, or log_softmax of
`hidden @ weights.T + biases`); negative sampling's scores are a shifted PMI, log p − log(K q),
so its model is log_softmax(scores + log q) (`seqjax.heads.NegativeSampling.log_probs`).

**Log expected counts, not log q.** Sampled softmax and NCE correct every score by the log
of the id's *expected count* among the K draws, as TensorFlow's `sampled_softmax_loss` and
`nce_loss` do with their samplers' `expected_count`s: `sample_log_expected_counts` and
`target_log_expected_counts` hold log(K·q(c)) for draws with replacement, and
log(1 − (1 − q(c))^K) for unique draws — exactly what a `seqjax.heads.samplers.Sampler`
returns (`Samples.log_expected_counts` for the samples, `Sampler.log_expected_count` for the
targets). Passing log q(c) instead is a different model: NCE's logits all move by log K, and
unique draws' corrections are not a constant shift of log q at all.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, cast

import jax.numpy as jnp
import numpy as np
from jax import Array, lax
from jax.typing import ArrayLike

from seqjax.checks import check_number, check_one_of
from seqjax.config import HEADS, HeadConfig, Options, option
from seqjax.config.sections import Proposal
from seqjax.contracts import SPECIAL_IDS
from seqjax.heads import checks, samplers
from seqjax.heads.base import WordScores, smoothed_counts
from seqjax.heads.samplers import Sampler, Samples

# The output table [V, D] (or its biases [V]); with gathered=True, the pair of rows
# `seqjax.heads.rows.read_rows` gathers from it.
Table = ArrayLike | tuple[ArrayLike, ArrayLike]


def sampled_softmax_loss(
    hidden: ArrayLike,
    weights: Table,
    biases: Table | None,
    targets: ArrayLike,
    samples: ArrayLike,
    sample_log_expected_counts: ArrayLike,
    target_log_expected_counts: ArrayLike,
    *,
    remove_accidental_hits: bool = True,
    gathered: bool = False,
) -> Array:
    """Importance-sampled softmax cross-entropy over the true class and K samples.

    Every score is corrected by its log expected count, s'(c) = s(c) − log(K q(c)), and the
    loss is the cross-entropy of the true class in a softmax over the K + 1 corrected scores
    (Jean et al. 2015; TensorFlow's `sampled_softmax_loss`).

    Args:
      hidden: [N, D] float (computed in float32).
      weights: [V, D] float; biases: [V] float or None.
      targets: [N] int32 ids in [0, V).
      samples: [K] int32 (shared by all rows) or [N, K] int32 (per row).
      sample_log_expected_counts: the shape of `samples`, float32: log expected counts of the
        samples (see the module docstring; +inf drops a slot).
      target_log_expected_counts: [N] float32 log expected counts of the targets.
      remove_accidental_hits: give a sample equal to the row's target the score −inf, so the
        true class is not also counted as a negative.
      gathered: `weights` and `biases` are not the table but the rows the loss reads, as
        `seqjax.heads.rows.read_rows` gathers them: the pairs (weights[targets] [N, D],
        weights[samples] samples.shape + [D]) and (biases[targets], biases[samples]) or None.
        The gradient with respect to them is the table's gradient as rows
        (`seqjax.heads.rows`); the ids are then only compared, never indexed.

    Returns:
      [N] float32 losses.

    Raises:
      ValueError: a log-count argument is None or misshapen, or ids outside [0, V).

    Example:
      >>> import jax, numpy as np
      >>> from seqjax.heads import sampled_softmax_loss, samplers
      >>> rng = np.random.default_rng(0)
      >>> hidden, weights, targets = rng.normal(size=(4, 8)), rng.normal(size=(50, 8)), np.array([3, 7, 7, 42])
      >>> sampler = samplers.log_uniform(50)
      >>> drawn = sampler.sample(jax.random.key(2), 10, unique=True)
      >>> loss = sampled_softmax_loss(hidden, weights, None, targets, drawn.ids, drawn.log_expected_counts,
      ...                             sampler.log_expected_count(targets, 10, unique=True))
      >>> loss.shape, loss.dtype
      ((4,), dtype('float32'))
    """
    sample_scores, target_scores = sampled_scores(hidden, weights, biases, targets, samples, gathered)
    validate_log_counts(hidden, samples, sample_log_expected_counts, target_log_expected_counts)
    sample_scores = sample_scores - sample_log_expected_counts
    target_scores = target_scores - target_log_expected_counts
    if remove_accidental_hits:
        sample_scores = jnp.where(accidental_hits(targets, samples), -jnp.inf, sample_scores)
    # logsumexp over the target and the samples without joining them into one [N, K + 1] array
    # (a copy, and a slice of its gradient); the finite target score keeps the shift, and so the
    # normalizer, finite even if every sample is dropped.
    shift = lax.stop_gradient(jnp.maximum(target_scores, sample_scores.max(axis=1)))
    total = jnp.exp(target_scores - shift) + jnp.exp(sample_scores - shift[:, None]).sum(axis=1)
    return shift + jnp.log(total) - target_scores


def accidental_hits(targets: ArrayLike, samples: ArrayLike) -> Array:
    """[N, K] bool (or [1, K] broadcast for shared samples): a sample equal to the row's target."""
    return jnp.atleast_2d(jnp.asarray(samples)) == jnp.asarray(targets)[:, None]


def sampled_scores(
    hidden: ArrayLike,
    weights: Table,
    biases: Table | None,
    targets: ArrayLike,
    samples: ArrayLike,
    gathered: bool,
) -> tuple[Array, Array]:
    """Raw scores h·w + b of the samples ([N, K]) and of the targets ([N]), in float32, of
    arguments checked on the host first.

    Raises:
      ValueError: a misshapen argument, or ids outside [0, V) (with gathered: negative ids).
    """
    if gathered:
        checks.require_rank("hidden", hidden, 2)
    else:
        vocab_size, _ = checks.require_output_layer(
            hidden, cast(ArrayLike, weights), cast(ArrayLike | None, biases), targets
        )
    rows = np.shape(hidden)[0]
    if np.ndim(samples) not in (1, 2) or (np.ndim(samples) == 2 and np.shape(samples)[0] != rows):
        raise ValueError(f"samples must have shape [K] or [N={rows}, K], got {np.shape(samples)}")
    if np.shape(samples)[-1] == 0:
        raise ValueError(f"samples must hold K > 0 ids, got shape {np.shape(samples)}")
    if gathered:
        _validate_gathered(hidden, weights, biases, targets, samples)
    else:
        checks.require_ids("samples", samples, vocab_size)
    hidden = jnp.asarray(hidden, jnp.float32)
    targets, samples = jnp.asarray(targets), jnp.asarray(samples)
    target_rows, sample_rows = _pair(weights, targets, samples, gathered)
    target_scores = jnp.einsum("nd,nd->n", hidden, target_rows)
    if samples.ndim == 1:
        sample_scores = hidden @ sample_rows.T
    else:
        sample_scores = jnp.einsum("nd,nkd->nk", hidden, sample_rows)
    if biases is not None:
        target_biases, sample_biases = _pair(biases, targets, samples, gathered)
        target_scores = target_scores + target_biases
        sample_scores = sample_scores + sample_biases
    return sample_scores, target_scores


def _pair(table: Table, targets: Array, samples: Array, gathered: bool) -> tuple[Array, Array]:
    """The targets' and the samples' rows of `table` (or `table` itself, gathered), in float32."""
    if gathered:
        target_rows, sample_rows = cast(tuple[ArrayLike, ArrayLike], table)
    else:
        # One gather of both, so that the backward pass makes one scatter into the dense [V, ...]
        # gradient (two measured 4% slower at V = 100k).
        whole = jnp.asarray(cast(ArrayLike, table))
        rows = whole[jnp.concatenate([targets, samples.reshape(-1)])]
        count = targets.shape[0]
        target_rows, sample_rows = rows[:count], rows[count:].reshape(samples.shape + whole.shape[1:])
    return jnp.asarray(target_rows, jnp.float32), jnp.asarray(sample_rows, jnp.float32)


def _validate_gathered(
    hidden: ArrayLike, weights: Table, biases: Table | None, targets: ArrayLike, samples: ArrayLike
) -> None:
    """The pairs of rows `read_rows` gives. The ids are only compared (accidental hits), never
    indexed, so any non-negative int32 id passes: `read_rows` checked them against its table."""
    rows, features = np.shape(hidden)
    ids_shapes = {"targets": (rows,), "samples": np.shape(samples)}
    for name, pair, trailing in (("weights", weights, (features,)), ("biases", biases, ())):
        if pair is None and name == "biases":
            continue
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(
                f"{name} must be the pair (the targets' rows, the samples' rows) with gathered=True "
                f"(seqjax.heads.rows.read_rows), got {type(pair).__name__}"
            )
        for (part, ids_shape), array in zip(ids_shapes.items(), pair):
            if np.shape(array) != ids_shape + trailing:
                raise ValueError(
                    f"{name}: the {part}' rows must have shape {ids_shape + trailing}, got {np.shape(array)}"
                )
    checks.require_hidden_and_targets(hidden, targets, np.iinfo(np.int32).max)
    checks.require_ids("samples", samples, np.iinfo(np.int32).max)


def validate_log_counts(
    hidden: ArrayLike,
    samples: ArrayLike,
    sample_log_expected_counts: ArrayLike | None,
    target_log_expected_counts: ArrayLike | None,
) -> None:
    """The two corrections: given (not None), shaped like the samples and [N]."""
    rows = np.shape(hidden)[0]
    for name, value, shape, rule in (
        (
            "sample_log_expected_counts",
            sample_log_expected_counts,
            np.shape(samples),
            f"the shape of samples {np.shape(samples)}",
        ),
        ("target_log_expected_counts", target_log_expected_counts, (rows,), f"shape [N={rows}]"),
    ):
        if value is None:
            raise ValueError(
                f"{name} must be an array of log expected counts (a sampler's log_expected_counts / "
                "log_expected_count, not log q), got None"
            )
        if np.shape(value) != shape:
            raise ValueError(f"{name} must have {rule}, got {np.shape(value)}")


class SamplingHead(WordScores):
    """Draws K samples from `sampler` per call (shared by the batch, or one draw per row)."""

    sampler: Sampler | None = None
    num_samples: int = 512
    unique: bool = True
    per_row_samples: bool = False

    def matmul_weights(self, features: int, frequencies: np.ndarray) -> float:
        """The target's row and the K samples' per trained token."""
        return float(features * (self.num_samples + 1))

    @property
    def proposal(self) -> Sampler:
        """The sampler; a field with a default only because the fields before it have one."""
        if self.sampler is None:
            raise ValueError(f"{type(self).__name__} needs a sampler, got None")
        return self.sampler

    def draw(self, key: Array | None, targets: Array) -> tuple[Samples, Array]:
        """Samples with their log expected counts, and the targets' log expected counts [N]."""
        if key is None:
            raise ValueError(f"{type(self).__name__} draws its samples from key: pass a PRNG key, got None")
        rows = targets.shape[0] if self.per_row_samples else None
        drawn = self.proposal.sample(key, self.num_samples, unique=self.unique, num_rows=rows)
        return drawn, self.proposal.log_expected_count(targets, self.num_samples, unique=self.unique)

    def loss_arguments(
        self, hidden: Array, targets: Array, key: Array | None, embedding: Array | None
    ) -> tuple[dict[str, Array], tuple[Array, ...]]:
        """The parameters, and the positional arguments the sampled losses share: hidden,
        weights, biases, targets, the sample ids and both log expected counts."""
        params = self.parameters(hidden.shape[-1], embedding)
        drawn, target_counts = self.draw(key, targets)
        weights, biases = params["weights"], params["biases"]
        return params, (hidden, weights, biases, targets, drawn.ids, drawn.log_expected_counts, target_counts)


def sampling_options(cfg: HeadConfig, vocab_size: int, counts: np.ndarray) -> dict[str, Any]:
    """The options every sampling head takes: its proposal, K and how it is drawn, checked."""
    if not 0 < cfg.num_samples < vocab_size:
        raise ValueError(f"head.num_samples must be in (0, vocab_size={vocab_size}), got {cfg.num_samples}")
    check_one_of("head.proposal", cfg.proposal, typing.get_args(Proposal))
    if cfg.proposal == "uniform":
        sampler = samplers.uniform(vocab_size)
    elif cfg.proposal == "unigram":
        check_number("head.power", cfg.power, 0.0)
        sampler = samplers.unigram(smoothed_counts(counts), power=cfg.power)
    else:
        samplers.require_frequency_sorted(counts, num_leading=min(SPECIAL_IDS.count, vocab_size))
        sampler = samplers.log_uniform(vocab_size)
    return dict(
        tied=cfg.tied,
        learn_bias=cfg.learn_bias,
        sampler=sampler,
        num_samples=cfg.num_samples,
        per_row_samples=cfg.per_row_samples,
    )


@dataclasses.dataclass(frozen=True)
class SampledOptions(Options):
    """Sampled softmax's treatment of a sample equal to the target."""

    remove_accidental_hits: bool = option(True, "a sample equal to the target is not a negative")


class SampledSoftmax(SamplingHead):
    """Importance-sampled softmax (`sampled_softmax_loss`) for training; exact `log_probs`."""

    remove_accidental_hits: bool = True

    def row_losses(self, hidden: Array, targets: Array, key: Array | None, embedding: Array | None) -> Array:
        _, arguments = self.loss_arguments(hidden, targets, key, embedding)
        return sampled_softmax_loss(*arguments, remove_accidental_hits=self.remove_accidental_hits)


def _build(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> SampledSoftmax:
    shared = sampling_options(cfg, vocab_size, counts)
    hits = cfg.options_of(SampledOptions).remove_accidental_hits
    return SampledSoftmax(vocab_size, unique=cfg.unique, remove_accidental_hits=hits, **shared)


HEADS.register("sampled", _build, options=SampledOptions, families=("tied", "word_bias", "sampling"))
