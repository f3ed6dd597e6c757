"""Beam search with the GNMT length penalty, as one compiled `lax.while_loop` (one per phase
over a growing KV cache: `seqjax.decoding.phases`).

Each row keeps K live hypotheses (not ended) apart from its K best finished ones. At
every step the K x V extensions of the live beams are ranked by total log-prob; an
extension ending in EOS becomes a finished candidate when it ranks among the step's K
best (so beam 1 is exactly greedy decoding), and the K best extensions that do not end
become the new live beams. At step max_len every extension finishes.

A hypothesis of length n (tokens up to and including EOS; max_len if it never emits
EOS) scores  sum of log-probs / ((5 + n) / 6) ** length_penalty  (Wu et al., 2016).

The loop stops early once, in every row, the worst of the K finished scores is at least
the best score any live beam could still reach. Log-probs are <= 0, so a live beam's
sum can only fall; divided by the largest penalty among its reachable final lengths
(t + 1 ... max_len) it gives that bound. The penalty is monotone in the length, so the
largest sits at one end: max_len when length_penalty >= 0, t + 1 when it is negative.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from seqjax.contracts import SharedByBeams, StepFn
from seqjax.decoding.phases import phased_while_loop, state_capacity
from seqjax.decoding.top_k import top_k
from seqjax.decoding.validation import check_positive_int, check_step_contract, check_token_id, is_int, is_real


def beam_search(
    step_fn: StepFn,
    state: Any,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    beam_size: int,
    max_len: int,
    length_penalty: float = 0.0,
    min_len: int = 0,
) -> tuple[jax.Array, jax.Array]:
    """The beam_size best hypotheses per row, best first.

    Args:
      step_fn: `(state, tokens [N] int32) -> (log_probs [N, V] float32, state)`, called
        with N = B * beam_size rows (row b * beam_size + k is beam k of batch row b);
        log_probs must be normalized (<= 0). Hashable.
      state: any pytree whose every leaf has the batch B as its leading axis; each leaf
        is repeated beam_size times and reordered with one gather per step, except inside
        `SharedByBeams` nodes, which the beams of a batch row share (a KV cache or an
        encoder memory: see `seqjax.contracts.SharedByBeams`).
      bos_id: the first token fed to every beam; eos_id: the token that ends one; pad_id:
        the token that fills a hypothesis after its EOS.
      beam_size: K > 0; max_len: > 0 decoding steps at most.
      length_penalty: GNMT alpha (0 ranks by total log-prob; > 0 favours longer output).
      min_len: EOS is forbidden at positions t < min_len (0 <= min_len <= max_len), so a
        finished hypothesis has at least min_len tokens before its EOS.

    Returns:
      sequences: [B, K, max_len] int32, BOS excluded, pad_id after EOS.
      scores: [B, K] float32, length-penalized, descending. A row with fewer than K
        possible hypotheses fills the rest with score -inf and an all-pad_id sequence.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.decoding import beam_search
      >>> table = jnp.log(jnp.array([[.25, .25, .25, .25], [.05, .05, .3, .6], [.25, .25, .25, .25], [.1, .1, .6, .2]]))
      >>> def step_fn(state, tokens):  # a bigram model: row t of the table follows token t
      ...     return table[tokens], state
      >>> sequences, scores = beam_search(step_fn, jnp.zeros(1), bos_id=1, eos_id=2, pad_id=0, beam_size=2, max_len=4)
      >>> sequences.tolist()
      [[[3, 2, 0, 0], [2, 0, 0, 0]]]
      >>> print(np.asarray(scores).round(4))  # log(.6 · .6), log .3
      [[-1.0217 -1.204 ]]
    """
    beam_size = check_positive_int("beam_size", beam_size)
    max_len = check_positive_int("max_len", max_len)
    if not is_int(min_len) or not 0 <= min_len <= max_len:
        raise ValueError(f"min_len must be an int in [0, max_len={max_len}], got {min_len!r}")
    if not is_real(length_penalty) or not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty!r}")
    _, vocab_size = check_step_contract(step_fn, state, max_len)
    bos_id = check_token_id("bos_id", bos_id, vocab_size)
    eos_id = check_token_id("eos_id", eos_id, vocab_size)
    pad_id = check_token_id("pad_id", pad_id, vocab_size)
    result: tuple[jax.Array, jax.Array] = _beam_program(
        step_fn,
        state,
        jnp.float32(length_penalty),
        bos_id=bos_id,
        eos_id=eos_id,
        pad_id=pad_id,
        beam_size=beam_size,
        max_len=max_len,
        min_len=int(min_len),
    )
    return result


def _extend(seqs: jax.Array, flat_index: jax.Array, vocab_size: int, t: jax.Array) -> jax.Array:
    """Sequences of the chosen extensions: seqs [B, K, T], flat_index [B, M] into K*V -> [B, M, T]."""
    parents = jnp.take_along_axis(seqs, (flat_index // vocab_size)[:, :, None], axis=1)
    return parents.at[:, :, t].set(flat_index % vocab_size)


# t [] int32; the live beams' log-probabilities [B, K] float32 and tokens [B, K, max_len] int32;
# the finished ones' scores [B, K] float32 and tokens [B, K, max_len] int32; the live beams'
# last tokens [B·K] int32 and the step function's state.
_Carry = tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, Any]


def _shared(node: Any) -> bool:
    return isinstance(node, SharedByBeams)


def _per_beam(node: Any, change: Callable[[Any], Any], beam_size: int | None = None) -> Any:
    """change(leaf) for a per-row leaf; a shared node is only grown (given beam_size) for the beams."""
    if _shared(node):
        return node if beam_size is None else node.for_beams(beam_size)
    return change(node)


@functools.partial(
    jax.jit, static_argnames=("step_fn", "bos_id", "eos_id", "pad_id", "beam_size", "max_len", "min_len")
)
def _beam_program(
    step_fn: StepFn,
    state: Any,
    length_penalty: jax.Array,
    *,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    beam_size: int,
    max_len: int,
    min_len: int,
) -> tuple[jax.Array, jax.Array]:
    batch_size = jax.tree.leaves(state)[0].shape[0]
    k = beam_size

    def penalty(length: jax.Array | float) -> jax.Array:
        return ((5.0 + length) / 6.0) ** length_penalty

    def keep_going(carry: _Carry) -> jax.Array:
        t, live_logp, _, fin_scores, _, _, _ = carry
        largest_penalty = jnp.maximum(penalty(t + 1.0), penalty(float(max_len)))
        best_reachable = jnp.max(live_logp, axis=-1) / largest_penalty
        settled = fin_scores[:, -1] >= best_reachable
        return (t < max_len) & ~jnp.all(settled)

    def step(carry: _Carry) -> _Carry:
        t, live_logp, live_seqs, fin_scores, fin_seqs, last, beams = carry
        log_probs, beams = step_fn(beams, last)
        vocab_size = log_probs.shape[-1]
        token = jnp.arange(vocab_size)
        log_probs = jnp.where((token == eos_id) & (t < min_len), -jnp.inf, log_probs.astype(jnp.float32))
        # The K best of the K x V extensions, and the K best that do not end, are among each
        # beam's K + 1 best (before the last step only EOS ends one, once per beam): one
        # ranking of V per beam, then rankings of those K (K + 1) candidates, which keep the
        # order (and tie-breaking) of a ranking of all K x V.
        per_beam = min(k + 1, vocab_size)
        beam_logp, beam_token = top_k(live_logp.reshape(-1, 1) + log_probs, per_beam)
        candidate_logp = beam_logp.reshape(batch_size, k * per_beam)
        beam_offset = (jnp.arange(k) * vocab_size)[None, :, None]
        candidate_index = (beam_offset + beam_token.reshape(batch_size, k, per_beam)).reshape(batch_size, -1)
        ends = (beam_token == eos_id).reshape(batch_size, -1) | (t == max_len - 1)

        best_logp, best_rank = jax.lax.top_k(candidate_logp, k)
        best_index = jnp.take_along_axis(candidate_index, best_rank, axis=1)
        best_ends = jnp.take_along_axis(ends, best_rank, axis=1)
        ended_scores = jnp.where(best_ends, best_logp, -jnp.inf) / penalty(t + 1.0)
        pool_scores = jnp.concatenate([fin_scores, ended_scores], axis=1)
        pool_seqs = jnp.concatenate([fin_seqs, _extend(live_seqs, best_index, vocab_size, t)], axis=1)
        fin_scores, kept = jax.lax.top_k(pool_scores, k)
        fin_seqs = jnp.take_along_axis(pool_seqs, kept[:, :, None], axis=1)

        live_logp, live_rank = jax.lax.top_k(jnp.where(ends, -jnp.inf, candidate_logp), k)
        live_index = jnp.take_along_axis(candidate_index, live_rank, axis=1)
        live_seqs = _extend(live_seqs, live_index, vocab_size, t)
        parent_rows = (jnp.arange(batch_size)[:, None] * k + live_index // vocab_size).reshape(-1)
        beams = jax.tree.map(lambda node: _per_beam(node, lambda leaf: leaf[parent_rows]), beams, is_leaf=_shared)
        last = (live_index % vocab_size).reshape(-1).astype(jnp.int32)
        return t + 1, live_logp, live_seqs, fin_scores, fin_seqs, last, beams

    carry = (
        jnp.int32(0),
        jnp.full((batch_size, k), -jnp.inf, jnp.float32).at[:, 0].set(0.0),  # one live beam, no duplicates
        jnp.full((batch_size, k, max_len), pad_id, jnp.int32),
        jnp.full((batch_size, k), -jnp.inf, jnp.float32),
        jnp.full((batch_size, k, max_len), pad_id, jnp.int32),
        jnp.full((batch_size * k,), bos_id, jnp.int32),
        jax.tree.map(lambda node: _per_beam(node, lambda leaf: jnp.repeat(leaf, k, axis=0), k), state, is_leaf=_shared),
    )
    capacity = state_capacity(state)
    _, _, _, fin_scores, fin_seqs, _, _ = phased_while_loop(keep_going, step, carry, capacity=capacity, max_len=max_len)
    fin_seqs = jnp.where(jnp.isneginf(fin_scores)[:, :, None], pad_id, fin_seqs)
    return fin_seqs, fin_scores
