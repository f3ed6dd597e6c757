"""Proposal distributions q over the vocabulary for sampled softmax, NCE and negative sampling.

A sampler draws K ids from an explicit key and returns them with their *log expected
counts*, the quantity the sampled losses subtract from the logits (their
`sample_log_expected_counts` / `target_log_expected_counts`, see `seqjax.heads.sampled`):

* with replacement, the expected number of times id c appears among K draws: log(K·q(c));
  any K >= 1 is allowed, K >= V included (as in TensorFlow);
* `unique=True`, the K draws are deduplicated: the first occurrence of an id keeps slot and
  gets log P(c ∈ S) = log(1 − (1 − q(c))^K), the exact inclusion probability of K i.i.d.
  draws; later repeats get log expected count +inf, which removes them from every sampled
  loss (their corrected logit is −inf). The K output slots keep a static shape, and
  K <= V (as TensorFlow requires for unique draws).

**Unique draws differ from TensorFlow's.** TensorFlow's unique samplers
(`tf.random.log_uniform_candidate_sampler(..., unique=True)` and friends) keep drawing until
they hold K *distinct* ids, after T >= K draws, and report expected counts 1 − (1 − q)^T with
that data-dependent T. seqjax draws exactly K times (a static shape under jit), so a row may
hold fewer than K distinct ids, and its counts use K. Never pair one library's samples with
the other's expected counts: TensorFlow's samples with seqjax's counts understate the counts
(T > K), and the reverse overstates them.

Samples are shared by the whole batch (`sample(key, K)`: [K]) or drawn per row
(`sample(key, K, num_rows=N)`: [N, K]).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from seqjax.checks import check_int, check_number
from seqjax.heads import checks


@dataclasses.dataclass(frozen=True)
class Samples:
    """ids: [K] or [N, K] int32; log_expected_counts: same shape, float32 (see the module docstring)."""

    ids: Array
    log_expected_counts: Array


@dataclasses.dataclass(frozen=True, eq=False)
class Sampler:
    """A proposal over ids [0, V): `name` (uniform | unigram | log_uniform) and its table.

    `log_probs` is the [V] float32 log q. Non-uniform samplers draw with Walker's alias
    method: `accept` [V] float32 and `alias` [V] int32 (None for uniform), exact to float32
    resolution per id, where an inverse CDF in float32 would lose the rare ids of a 1M vocabulary.
    """

    name: str
    vocab_size: int
    log_probs: Array
    accept: Array | None = None
    alias: Array | None = None

    def log_prob(self, ids: ArrayLike) -> Array:
        """log q(ids): ids [...] int in [0, V); returns [...] float32.

        Example:
          >>> import numpy as np
          >>> from seqjax.heads import samplers
          >>> print(np.asarray(samplers.uniform(4).log_prob([0, 3])).round(4))  # log 1/4
          [-1.3863 -1.3863]
        """
        checks.require_ids("ids", ids, self.vocab_size)
        return self.log_probs[jnp.asarray(ids)]

    def log_expected_count(self, ids: ArrayLike, num_samples: int, *, unique: bool = False) -> Array:
        """Log expected count of `ids` among `num_samples` draws (see the module docstring).

        ids: [...] int in [0, V); returns [...] float32. What the sampled losses take as
        `target_log_expected_counts` (with the same `num_samples` and `unique` as the draw).

        Example:
          >>> import numpy as np
          >>> from seqjax.heads import samplers
          >>> sampler = samplers.uniform(4)
          >>> print(np.asarray(sampler.log_expected_count([0], 2)).round(4))  # log(2 · 1/4)
          [-0.6931]
          >>> print(np.asarray(sampler.log_expected_count([0], 2, unique=True)).round(4))  # log(1 − (3/4)²)
          [-0.8267]
        """
        _require_num_samples(num_samples, unique, self.vocab_size)
        return _log_expected(self.log_prob(ids), num_samples, unique)

    def sample(self, key: Array, num_samples: int, *, unique: bool = False, num_rows: int | None = None) -> Samples:
        """Draws `num_samples` ids ([K], or [num_rows, K] with an independent draw per row).

        K >= 1; with `unique`, K <= V. Returns `Samples` (ids int32, log_expected_counts float32).

        Example:
          >>> import jax
          >>> from seqjax.heads import samplers
          >>> drawn = samplers.log_uniform(100).sample(jax.random.key(0), 8, num_rows=3)
          >>> drawn.ids.shape, drawn.ids.dtype, drawn.log_expected_counts.dtype
          ((3, 8), dtype('int32'), dtype('float32'))
        """
        _require_num_samples(num_samples, unique, self.vocab_size)
        if num_rows is not None:
            check_int("num_rows", num_rows)
        result: Samples = _draw(self.log_probs, self.accept, self.alias, key, num_samples, unique, num_rows)
        return result


def _require_num_samples(num_samples: int, unique: bool, vocab_size: int) -> None:
    """K >= 1 draws; unique draws hold at most V distinct ids, so K <= V there."""
    check_int("num_samples", num_samples)
    if unique and num_samples > vocab_size:
        raise ValueError(
            f"num_samples must be <= vocab_size={vocab_size} for unique=True draws (draws with "
            f"replacement allow any K), got {num_samples}"
        )


jax.tree_util.register_dataclass(Samples, data_fields=["ids", "log_expected_counts"], meta_fields=[])


def uniform(vocab_size: int) -> Sampler:
    """q(c) = 1 / V over ids [0, V): `log_probs` [V] float32.

    Example:
      >>> from seqjax.heads import samplers
      >>> sampler = samplers.uniform(4)
      >>> sampler.name, sampler.vocab_size, sampler.log_probs.shape
      ('uniform', 4, (4,))
    """
    vocab_size = check_int("vocab_size", vocab_size)
    log_probs = jnp.full((vocab_size,), -math.log(vocab_size), jnp.float32)
    return Sampler("uniform", vocab_size, log_probs)


def log_uniform(vocab_size: int) -> Sampler:
    """Zipfian q(c) = (log(c + 2) − log(c + 1)) / log(V + 1) over frequency-sorted ids.

    Id 0 must be the most frequent word; `require_frequency_sorted` checks a count vector.
    Returns a `Sampler` with `log_probs` [V] float32.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.heads import samplers
      >>> q = jnp.exp(samplers.log_uniform(5).log_probs)
      >>> print(np.asarray(q).round(3), bool(jnp.allclose(q.sum(), 1.0)))  # log(2)/log(6), log(3/2)/log(6), ...
      [0.387 0.226 0.161 0.125 0.102] True
    """
    vocab_size = check_int("vocab_size", vocab_size)
    ids = np.arange(vocab_size, dtype=np.float64)
    probs = (np.log(ids + 2) - np.log(ids + 1)) / np.log(vocab_size + 1)
    return _alias_sampler("log_uniform", probs / probs.sum())


def unigram(counts: ArrayLike, power: float = 1.0) -> Sampler:
    """q(c) ∝ counts[c] ** power (power 0.75 for word2vec's negative sampling).

    Args:
      counts: [V] positive counts, int or float (smooth zeros first, e.g. counts + 1).
      power: finite exponent >= 0 (0 gives the uniform distribution).

    Returns:
      a `Sampler` with `log_probs` [V] float32.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.heads import samplers
      >>> print(np.asarray(jnp.exp(samplers.unigram([6, 3, 1]).log_probs)).round(2))
      [0.6 0.3 0.1]
    """
    values = checks.require_counts("counts", counts)
    check_number("power", power, 0.0)
    weights = values**power
    return _alias_sampler("unigram", weights / weights.sum())


def _alias_sampler(name: str, probs: np.ndarray) -> Sampler:
    """Vose's alias tables for `probs` [V] float64 (summing to 1), built on the host in O(V)."""
    size = probs.size
    scaled = probs * size
    accept = np.ones(size, np.float64)
    alias = np.arange(size, dtype=np.int64)
    small = [i for i in range(size) if scaled[i] < 1.0]
    large = [i for i in range(size) if scaled[i] >= 1.0]
    while small and large:
        low, high = small.pop(), large.pop()
        accept[low] = scaled[low]
        alias[low] = high
        scaled[high] -= 1.0 - scaled[low]
        (small if scaled[high] < 1.0 else large).append(high)
    # What is left has scaled probability 1 up to rounding: always accepted.
    return Sampler(
        name,
        size,
        jnp.asarray(np.log(probs), jnp.float32),
        jnp.asarray(accept, jnp.float32),
        jnp.asarray(alias, jnp.int32),
    )


def require_frequency_sorted(counts: ArrayLike, num_leading: int = 0) -> None:
    """Raises a ValueError unless counts[num_leading:] is non-increasing (what `log_uniform` assumes).

    counts: [V] numbers (host side); `num_leading` skips leading special ids (padding, <bos>,
    ...) whose counts are arbitrary.

    Example:
      >>> from seqjax.heads import samplers
      >>> samplers.require_frequency_sorted([0, 0, 9, 4, 4, 1], num_leading=2)
      >>> samplers.require_frequency_sorted([9, 4, 5])
      Traceback (most recent call last):
      ...
      ValueError: counts must be frequency-sorted ... got counts[1]=4 < counts[2]=5
    """
    values = np.asarray(counts)[num_leading:]
    rises = np.nonzero(np.diff(values) > 0)[0]
    if rises.size:
        at = int(rises[0]) + num_leading
        raise ValueError(
            "counts must be frequency-sorted (non-increasing after the first "
            f"{num_leading} ids) for the log_uniform proposal, got counts[{at}]={values[at - num_leading]} "
            f"< counts[{at + 1}]={values[at - num_leading + 1]}"
        )


def _log_expected(log_q: Array, num_samples: int, unique: bool) -> Array:
    if unique:
        # log(1 - (1 - q)^K), computed as log(-expm1(K log1p(-q))) to stay exact for tiny q.
        return jnp.log(-jnp.expm1(num_samples * jnp.log1p(-jnp.exp(log_q))))
    return math.log(num_samples) + log_q


@functools.partial(jax.jit, static_argnames=("num_samples", "unique", "num_rows"))
def _draw(
    log_probs: Array,
    accept: Array | None,
    alias: Array | None,
    key: Array,
    num_samples: int,
    unique: bool,
    num_rows: int | None,
) -> Samples:
    if num_rows is not None:
        keys = jax.random.split(key, num_rows)
        result: Samples = jax.vmap(lambda k: _draw(log_probs, accept, alias, k, num_samples, unique, None))(keys)
        return result
    bucket_key, accept_key = jax.random.split(key)
    ids = jax.random.randint(bucket_key, (num_samples,), 0, log_probs.shape[0], jnp.int32)
    if accept is not None and alias is not None:
        keep = jax.random.uniform(accept_key, (num_samples,), jnp.float32) < accept[ids]
        ids = jnp.where(keep, ids, alias[ids])
    log_expected = _log_expected(log_probs[ids], num_samples, unique)
    if unique:
        log_expected = jnp.where(_is_repeat(ids), jnp.inf, log_expected)
    return Samples(ids, log_expected)


def _is_repeat(ids: Array) -> Array:
    """[K] bool: True where the id already appeared at an earlier slot."""
    order = jnp.argsort(ids, stable=True)
    sorted_ids = ids[order]
    repeat_sorted = jnp.concatenate([jnp.zeros((1,), bool), sorted_ids[1:] == sorted_ids[:-1]])
    return jnp.zeros_like(repeat_sorted).at[order].set(repeat_sorted)
