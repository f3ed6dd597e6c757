"""Tiny models and batches shared by the objective tests, and exact expectations by enumeration."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from seqjax.config import HeadConfig, ModelConfig
from seqjax.contracts import SPECIAL_IDS
from seqjax.data import BOS_ID, EOS_ID
from seqjax.heads import build_head
from seqjax.model_head import init_params
from seqjax.models import build_model, is_seq2seq
from seqjax.objectives.sequences import bleu_rewards, candidate_log_probs, lengths_after, truncate


def tiny(kind: str = "rnn", *, vocab: int = 7, d_model: int = 8, seed: int = 0, batch=None):
    """(model, head, params): one layer, no dropout, D = d_model, full softmax over `vocab`,
    parameters N(0, 0.25)."""
    cfg = ModelConfig(kind=kind, d_model=d_model, layers=1, num_heads=2, d_ff=2 * d_model, dropout=0.0, max_len=32)
    model = build_model(cfg, vocab)
    head = build_head(HeadConfig(), vocab, np.ones(vocab, np.int64))
    if batch is None:
        batch = lm_batch(np.random.default_rng(seed), 2, 4, vocab, seq2seq=is_seq2seq(cfg))
    # Drawn at random in init's shapes: running Flax's init op by op costs seconds per model.
    shapes = jax.eval_shape(lambda key: init_params(model, head, key, batch), jax.random.key(seed))
    rng = np.random.default_rng(seed)
    params = jax.tree.map(lambda s: jnp.asarray(0.5 * rng.standard_normal(s.shape), s.dtype), shapes)
    return model, head, params


def initialized_on_random_tokens(model, head, vocab: int, mask: jax.Array):
    """(model, head, params, batch): `model` and `head` initialized (key 1) on a batch of random
    non-special tokens (key 0) over `vocab`, targets the inputs shifted left, `mask` [B, T] float32."""
    rows, length = mask.shape
    tokens = jax.random.randint(jax.random.key(0), (rows, length + 1), SPECIAL_IDS.count, vocab)
    batch = {"inputs": tokens[:, :-1], "targets": tokens[:, 1:], "mask": mask}
    return model, head, jax.jit(lambda key: init_params(model, head, key, batch))(jax.random.key(1)), batch


def lm_batch(rng, rows: int, length: int, vocab: int, *, start: int = EOS_ID, seq2seq: bool = False):
    """Random targets over the vocabulary; inputs = start token then the targets shifted right.

    With seq2seq, also a random source of the same length (all positions real).
    """
    targets = rng.integers(0, vocab, size=(rows, length)).astype(np.int32)
    inputs = np.concatenate([np.full((rows, 1), start, np.int32), targets[:, :-1]], axis=1)
    batch = {"inputs": inputs, "targets": targets, "mask": np.ones((rows, length), np.float32)}
    if seq2seq:
        batch["src"] = rng.integers(4, vocab, size=(rows, length)).astype(np.int32)
        batch["src_mask"] = np.ones((rows, length), np.float32)
    return {k: jnp.asarray(v) for k, v in batch.items()}


def reference_batch(reference, length: int, rows: int = 1):
    """`rows` copies of a one-sentence target `reference` (ids, EOS appended), padded to `length`."""
    ids = list(reference) + [EOS_ID]
    targets = np.zeros((rows, length), np.int32)
    targets[:, : len(ids)] = ids
    mask = np.zeros((rows, length), np.float32)
    mask[:, : len(ids)] = 1.0
    inputs = np.concatenate([np.full((rows, 1), BOS_ID, np.int32), targets[:, :-1]], axis=1)
    return {"inputs": jnp.asarray(inputs), "targets": jnp.asarray(targets), "mask": jnp.asarray(mask)}


def all_sequences(vocab: int, length: int) -> jax.Array:
    """Every token string [V^T, T] int32."""
    return jnp.asarray(list(itertools.product(range(vocab), repeat=length)), jnp.int32)


def expected_reward_fn(model, head, batch_row, vocab: int, length: int):
    """params -> E_{y ~ model}[BLEU(y) / 100] for the one-row batch, summed exactly over V^T strings.

    A sampled sequence stops at its first EOS; summing the full-length string probability over
    everything after it marginalizes those tokens out, so each string counts its truncation.
    """
    strings = all_sequences(vocab, length)
    repeated = jax.tree.map(lambda x: jnp.repeat(x, strings.shape[0], axis=0), batch_row)
    lengths = lengths_after(strings, ids=SPECIAL_IDS)
    rewards = bleu_rewards(truncate(strings, lengths, ids=SPECIAL_IDS), lengths, repeated, ids=SPECIAL_IDS)

    def expected(params):
        log_probs = candidate_log_probs(model, head, params, repeated, strings).sum(axis=1)
        return jnp.sum(jnp.exp(log_probs) * rewards)

    return expected


def mixer_objective_fn(model, head, batch_row, vocab: int, length: int, prefix: int):
    """params -> −log p(the first `prefix` gold targets) − E[BLEU(gold prefix + y) / 100], the
    expectation over the model's continuations y given the gold prefix, summed exactly over
    the V^(T − prefix) strings (truncated at their first EOS, as in `expected_reward_fn`)."""
    gold = jnp.broadcast_to(batch_row["targets"][:, :prefix], (vocab ** (length - prefix), prefix))
    strings = jnp.concatenate([gold, all_sequences(vocab, length - prefix)], axis=1)
    repeated = jax.tree.map(lambda x: jnp.repeat(x, strings.shape[0], axis=0), batch_row)
    lengths = lengths_after(strings, ids=SPECIAL_IDS)
    rewards = bleu_rewards(truncate(strings, lengths, ids=SPECIAL_IDS), lengths, repeated, ids=SPECIAL_IDS)

    def objective(params):
        log_probs = candidate_log_probs(model, head, params, repeated, strings)
        continuation = jnp.exp(log_probs[:, prefix:].sum(axis=1))
        return -log_probs[0, :prefix].sum() - jnp.sum(continuation * rewards)

    return objective
