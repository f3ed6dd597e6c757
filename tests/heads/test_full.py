"""full_softmax_loss: the exact cross-entropy, and its chunked path's value and gradients."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import softmax_problems
from jaxpr_tools import matmuls

from seqjax.heads import full, full_softmax_loss


def reference_loss(hidden, weights, biases, targets):
    """−log softmax(h W^T + b)[t], in float64 numpy."""
    logits = hidden.astype(np.float64) @ weights.astype(np.float64).T + biases
    top = logits.max(axis=1, keepdims=True)
    log_normalizer = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
    return log_normalizer - logits[np.arange(len(targets)), targets]


random_problem = functools.partial(softmax_problems.random_problem, rows=6, features=5, vocab=23)


def test_full_softmax_loss_equals_reference_cross_entropy():
    hidden, weights, biases, targets = random_problem(0, rows=9, vocab=4097)
    losses = full_softmax_loss(hidden, weights, biases, targets)
    np.testing.assert_allclose(losses, reference_loss(hidden, weights, biases, targets), rtol=1e-5, atol=1e-5)


def test_full_softmax_loss_without_biases_equals_zero_biases():
    hidden, weights, biases, targets = random_problem(1)
    np.testing.assert_allclose(
        full_softmax_loss(hidden, weights, None, targets),
        full_softmax_loss(hidden, weights, np.zeros_like(biases), targets),
        rtol=1e-6,
    )


@pytest.mark.parametrize("residuals", ["float32", "recompute"])
@pytest.mark.parametrize("chunk_size", [1, 7, 22])  # one word per block, remainder blocks of 2 and of 1
def test_chunked_full_softmax_equals_unchunked_value_and_gradients(chunk_size, residuals):
    hidden, weights, biases, targets = random_problem(chunk_size)
    cotangent = np.random.default_rng(chunk_size).normal(size=targets.shape).astype(np.float32)

    def weighted(chunk):
        return lambda h, w, b: jnp.vdot(
            cotangent, full_softmax_loss(h, w, b, targets, chunk_size=chunk, block_residuals=residuals)
        )

    def value_and_grads(chunk):
        return jax.jit(jax.value_and_grad(weighted(chunk), argnums=(0, 1, 2)))(hidden, weights, biases)

    plain_value, plain_grads = value_and_grads(weights.shape[0])  # one block: materialized logits
    value, grads = value_and_grads(chunk_size)
    np.testing.assert_allclose(value, plain_value, rtol=1e-5)
    for got, expected in zip(grads, plain_grads):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "vocab, chunk, block",
    [(100_000, 4096, 4000), (1_000_000, 4096, 4000), (32_003, 4096, 4096), (24, 7, 6), (23, 22, 22), (8, 8, 8)],
)
def test_dividing_block_is_the_largest_divisor_in_the_upper_half_of_the_chunk(vocab, chunk, block):
    assert full.dividing_block(vocab, chunk) == block


def test_blocks_that_divide_the_vocabulary_write_no_second_table_gradient():
    """The recomputing loss's scratch memory at V = 4,000 (blocks of 250) stays below one [V, D]
    table; at the prime V = 4,001 (blocks of 256 and a remainder of 161) the concatenation of the
    remainder's gradient adds that table."""
    rows, features = 16, 64

    def memory(vocab):
        hidden, weights, biases, targets = random_problem(0, rows=rows, features=features, vocab=vocab)

        def loss(h, w, b):
            return full_softmax_loss(h, w, b, targets, chunk_size=256, block_residuals="recompute").sum()

        program = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
        return program.lower(hidden, weights, biases).compile().memory_analysis().temp_size_in_bytes

    assert full.dividing_block(4000, 256) == 250 and full.dividing_block(4001, 256) == 256
    assert memory(4000) < 4000 * features * 4 < memory(4001)


def test_full_softmax_gradient_equals_softmax_minus_one_hot():
    hidden, weights, biases, targets = random_problem(2)
    hidden_grad = jax.grad(lambda h: full_softmax_loss(h, weights, biases, targets).sum())(hidden)
    logits = hidden.astype(np.float64) @ weights.T + biases
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    probs[np.arange(len(targets)), targets] -= 1.0
    np.testing.assert_allclose(hidden_grad, probs @ weights, rtol=1e-4, atol=1e-5)


def test_full_softmax_loss_is_vmappable_and_jittable():
    hidden, weights, biases, targets = random_problem(3)
    stacked = jax.vmap(lambda h, t: full_softmax_loss(h, weights, biases, t, chunk_size=4))(
        np.stack([hidden, -hidden]), np.stack([targets, targets])
    )
    jitted = jax.jit(full_softmax_loss, static_argnames="chunk_size")
    jitted = jitted(hidden, weights, biases, targets, chunk_size=4)
    np.testing.assert_allclose(stacked[0], jitted, rtol=1e-5)
    np.testing.assert_allclose(stacked[1], reference_loss(-hidden, weights, biases, targets), rtol=1e-5)


@pytest.mark.parametrize("chunk_size", [None, 7])
def test_full_softmax_loss_computes_bfloat16_hidden_in_float32(chunk_size):
    hidden, weights, biases, targets = random_problem(4)
    half = hidden.astype(jnp.bfloat16)
    loss = functools.partial(full_softmax_loss, chunk_size=chunk_size)
    dots = matmuls(loss, half, weights, biases, targets)
    assert dots and all(dtypes == ("float32", "float32") for dtypes, _ in dots)
    losses = loss(half, weights, biases, targets)
    assert losses.dtype == jnp.float32
    # Exact for the rounded hidden states: the weights were not rounded to bfloat16 (that moves these losses by 9e-3).
    rounded = np.asarray(half.astype(jnp.float32))
    np.testing.assert_allclose(losses, reference_loss(rounded, weights, biases, targets), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("limit, blocked", [(6 * 23, False), (6 * 23 - 1, True)])
def test_default_materializes_up_to_the_limit_and_scores_blocks_beyond(monkeypatch, limit, blocked):
    hidden, weights, biases, targets = random_problem(6)  # N·V = 6 · 23
    monkeypatch.setattr(full, "MATERIALIZE_LIMIT", limit)
    monkeypatch.setattr(full, "DEFAULT_CHUNK", 5)
    jaxpr = str(jax.make_jaxpr(lambda h: full_softmax_loss(h, weights, biases, targets))(hidden))
    assert ("scan" in jaxpr) == blocked
    assert full.default_chunk_size(6, 23) == (5 if blocked else 23)
    np.testing.assert_allclose(
        full_softmax_loss(hidden, weights, biases, targets),
        reference_loss(hidden, weights, biases, targets),
        rtol=1e-5,
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(targets=np.array([0, 1, 2, 3, 4, 23], np.int32)), "targets must lie in"),
        (dict(targets=np.array([-1, 1, 2, 3, 4, 5], np.int32)), "targets must lie in"),
        (dict(targets=np.zeros(5, np.int32)), "one id per hidden row"),
        (dict(biases=np.zeros(7, np.float32)), "biases must have shape"),
        (dict(hidden=np.zeros((6, 4), np.float32)), "hidden must have shape"),
        (dict(chunk_size=0), "chunk_size must be an int >= 1, got 0"),
    ],
)
def test_full_softmax_loss_rejects_bad_input_on_the_host(change, message):
    hidden, weights, biases, targets = random_problem(5)
    args = dict(hidden=hidden, weights=weights, biases=biases, targets=targets)
    chunk = change.pop("chunk_size", None)
    args.update(change)
    with pytest.raises(ValueError, match=message):
        full_softmax_loss(**args, chunk_size=chunk)


def block_matmuls(residuals, chunk_size=7, rows=6, vocab=23):
    """The matmuls of value_and_grad that read a [.., chunk_size] block (fwd logits, bwd products)."""
    hidden, weights, biases, targets = random_problem(7, rows=rows, vocab=vocab)

    def loss(h, w, b):
        return full_softmax_loss(h, w, b, targets, chunk_size=chunk_size, block_residuals=residuals).sum()

    dots = matmuls(jax.value_and_grad(loss, argnums=(0, 1, 2)), hidden, weights, biases)
    return sum(any(chunk_size in shape for shape in shapes) for _, shapes in dots)


@pytest.mark.parametrize("residuals, products", [("bfloat16", 3), ("float32", 3), ("recompute", 4)])
def test_kept_exponentials_leave_three_block_matmuls_and_recomputing_four(residuals, products):
    assert block_matmuls(residuals) == products


def test_bfloat16_exponentials_move_each_gradient_by_at_most_their_rounding_bound():
    hidden, weights, biases, targets = random_problem(8, rows=16, features=8, vocab=300)
    cotangent = np.random.default_rng(8).normal(size=targets.shape).astype(np.float32)

    def grads(residuals):
        def loss(h, w, b):
            losses = full_softmax_loss(h, w, b, targets, chunk_size=64, block_residuals=residuals)
            return jnp.vdot(cotangent, losses)

        return jax.grad(loss, argnums=(0, 1, 2))(hidden, weights, biases)

    # Each probability p is kept as round(p') · s with |round(p') - p'| <= 2^-8 p' (8 significant
    # bits), so d = c·(p - onehot) moves by at most 2^-8 |c| p per entry and each gradient by
    # 2^-8 times the same product over absolute values; 1e-5 covers float32's own rounding.
    logits = hidden.astype(np.float64) @ weights.T + biases
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    moved = np.abs(cotangent)[:, None] * probs
    bounds = (moved @ np.abs(weights), moved.T @ np.abs(hidden), moved.sum(0))
    rounded, exact = grads("bfloat16"), grads("float32")
    for got, expected, bound in zip(rounded, exact, bounds):
        assert np.all(np.abs(np.asarray(got) - expected) <= 2.0**-8 * bound + 1e-5)
    assert not np.allclose(rounded[0], exact[0], rtol=1e-6, atol=0)  # bfloat16 was kept, not float32


@pytest.mark.parametrize("limit, residuals", [(4 * 6 * 23, "float32"), (4 * 6 * 23 - 1, "recompute")])
def test_default_keeps_float32_exponentials_up_to_the_limit_and_recomputes_beyond(monkeypatch, limit, residuals):
    monkeypatch.setattr(full, "KEEP_LIMIT_BYTES", limit)  # N·V = 6 · 23 exponentials of 4 bytes
    assert full.default_block_residuals(6, 23) == residuals
    assert block_matmuls(None) == block_matmuls(residuals)


@pytest.mark.parametrize("limit, residuals", [(2 * 6 * 23, "bfloat16"), (2 * 6 * 23 - 1, "recompute")])
def test_default_at_bfloat16_keeps_its_exponentials_up_to_the_limit_then_recomputes(monkeypatch, limit, residuals):
    monkeypatch.setattr(full, "KEEP_LIMIT_BYTES", limit)  # exponentials of 2 bytes
    assert full.default_block_residuals(6, 23, "bfloat16") == residuals


def test_full_softmax_loss_rejects_unknown_block_residuals_on_the_host():
    hidden, weights, biases, targets = random_problem(5)
    with pytest.raises(ValueError, match="block_residuals must be one of bfloat16, float32, recompute, got 'half'"):
        full_softmax_loss(hidden, weights, biases, targets, chunk_size=4, block_residuals="half")


def test_default_blocked_loss_equals_materialized_softmax_to_float32_rounding():
    """Float32 inputs, blocks of 128 words over V = 1,000 (eight blocks of 125): the default
    residuals leave the loss and every gradient within float32's rounding of the [N, V] logits'
    (1e-5 of each array's largest entry), as a caller importing the loss expects."""
    hidden, weights, biases, targets = random_problem(9, rows=32, features=16, vocab=1000)
    cotangent = np.random.default_rng(9).normal(size=targets.shape).astype(np.float32)

    def value_and_grads(chunk_size):
        def loss(h, w, b):
            return jnp.vdot(cotangent, full_softmax_loss(h, w, b, targets, chunk_size=chunk_size))

        return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))(hidden, weights, biases)

    (value, grads), (exact_value, exact_grads) = value_and_grads(128), value_and_grads(1000)
    names = ("loss", "hidden", "weights", "biases")
    for name, got, expected in zip(names, (value, *grads), (exact_value, *exact_grads)):
        expected = np.asarray(expected)
        moved = float(np.abs(np.asarray(got) - expected).max() / np.abs(expected).max())
        assert moved <= 1e-5, f"{name} moved by {moved:.1e} of its largest entry"
