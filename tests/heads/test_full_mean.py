"""mean_softmax_loss: the full softmax's masked mean with its gradients made in the forward pass over
blocks of rows, against the materialized logits' masked mean; and the full head's use of it."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import softmax_problems
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jaxpr_tools import matmuls

from seqjax.accelerators import program
from seqjax.config import HeadConfig
from seqjax.heads import FullOptions, build_head, full, full_softmax_loss, masked_mean
from seqjax.heads.full_mean import mean_softmax_loss
from seqjax.placement import under_mesh
from seqjax.training.core.layout import make_mesh

ROWS, FEATURES, VOCAB = 10, 5, 23
random_problem = functools.partial(softmax_problems.random_problem, rows=ROWS, features=FEATURES, vocab=VOCAB)
MASK = np.array([1.0, 0.0, 1.0, 0.5, 1.0, 1.0, 0.0, 2.0, 1.0, 1.0], np.float32)  # drops rows 1 and 6


def value_and_grads(loss, hidden, weights, biases, mask):
    """The loss and its gradients in hidden, weights, biases and the mask, jitted."""
    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))(hidden, weights, biases, mask)


def materialized(targets, z_loss=0.0):
    """The masked mean of the [N, V] logits' losses: the reference."""
    return lambda h, w, b, m: masked_mean(full_softmax_loss(h, w, b, targets, chunk_size=VOCAB, z_loss=z_loss), m)[0]


def blocked(targets, block_rows, z_loss=0.0):
    return lambda h, w, b, m: mean_softmax_loss(h, w, b, targets, m, block_rows=block_rows, z_loss=z_loss)[0]


def assert_close_to_float32_rounding(got, expected):
    """Each array within 1e-5 of its largest entry: float32 rounding, as the materialized loss's."""
    names = ("loss", "hidden", "weights", "biases", "mask")
    for name, g, e in zip(names, jax.tree.leaves(got), jax.tree.leaves(expected)):
        e = np.asarray(e, np.float64)
        moved = float(np.abs(np.asarray(g, np.float64) - e).max() / np.abs(e).max())
        assert moved <= 1e-5, f"{name} moved by {moved:.1e} of its largest entry"


# 1: a row per block; 4: two full blocks and one padded with two dropped rows; 10 and 64: one block.
@pytest.mark.parametrize("block_rows", [1, 4, 10, 64])
def test_row_blocks_equal_materialized_masked_mean_value_and_every_gradient(block_rows):
    hidden, weights, biases, targets = random_problem(block_rows)
    got = value_and_grads(blocked(targets, block_rows), hidden, weights, biases, MASK)
    assert_close_to_float32_rounding(got, value_and_grads(materialized(targets), hidden, weights, biases, MASK))


def test_row_blocks_with_z_loss_equal_materialized_value_and_every_gradient():
    hidden, weights, biases, targets = random_problem(2)
    weights = 3.0 * weights  # log Z far from 0: the z-loss's gradient matters
    got = value_and_grads(blocked(targets, 4, z_loss=0.3), hidden, weights, biases, MASK)
    expected = value_and_grads(materialized(targets, z_loss=0.3), hidden, weights, biases, MASK)
    assert_close_to_float32_rounding(got, expected)


def test_a_dropped_rows_infinite_loss_reaches_neither_loss_nor_gradients():
    """Row 1 (dropped) targets a word of bias -inf, as a pretrained model's ids without a token:
    its loss is inf; the loss and every gradient are finite, and all but the mask's equal the
    materialized masked mean's (whose mask gradient there is 0 · inf = nan)."""
    hidden, weights, biases, targets = random_problem(3)
    biases[targets[1]] = -np.inf
    targets[MASK > 0] = np.where(targets[MASK > 0] == targets[1], (targets[1] + 1) % VOCAB, targets[MASK > 0])
    got = value_and_grads(blocked(targets, 4), hidden, weights, biases, MASK)
    assert all(bool(jnp.isfinite(leaf).all()) for leaf in jax.tree.leaves(got))
    expected = value_and_grads(materialized(targets), hidden, weights, biases, MASK)
    assert_close_to_float32_rounding((got[0], got[1][:3]), (expected[0], expected[1][:3]))


def test_bfloat16_hidden_states_are_computed_in_float32_and_get_a_bfloat16_gradient():
    hidden, weights, biases, targets = random_problem(4)
    half = jnp.asarray(hidden, jnp.bfloat16)
    loss = blocked(targets, 4)
    dots = matmuls(loss, half, weights, biases, MASK)
    assert dots and all(dtypes == ("float32", "float32") for dtypes, _ in dots)
    got = value_and_grads(loss, half, weights, biases, MASK)
    assert got[1][0].dtype == jnp.bfloat16
    # The same numbers as the float32 loss of the rounded hidden states (their gradient rounded back).
    rounded = np.asarray(half.astype(jnp.float32))
    expected = value_and_grads(materialized(targets), rounded, weights, biases, MASK)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    np.testing.assert_array_equal(got[1][0], expected[1][0].astype(jnp.bfloat16))
    assert_close_to_float32_rounding(got[1][1:], expected[1][1:])


def test_without_a_mask_every_row_counts():
    hidden, weights, biases, targets = random_problem(5)
    loss, aux = mean_softmax_loss(hidden, weights, biases, targets, None, block_rows=3)
    np.testing.assert_allclose(loss, full_softmax_loss(hidden, weights, biases, targets).mean(), rtol=1e-6)
    assert float(aux["tokens"]) == ROWS


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(block_rows=0), "block_rows must be an int >= 1, got 0"),
        (dict(z_loss=-1.0), "z_loss must be a finite float >= 0"),
    ],
)
def test_mean_softmax_loss_rejects_bad_settings_on_the_host(change, message):
    hidden, weights, biases, targets = random_problem(6)
    with pytest.raises(ValueError, match=message):
        mean_softmax_loss(hidden, weights, biases, targets, None, **change)


def head_value_and_grads(block_residuals):
    """The full head's training loss (blocks of 8 words over V = 23) and its parameter gradients."""
    hidden, _, _, targets = random_problem(7)
    cfg = HeadConfig(kind="full", groups=(FullOptions(chunk_size=8, block_residuals=block_residuals),))
    head = build_head(cfg, VOCAB, np.ones(VOCAB))
    key = jax.random.key(0)
    variables = head.init({"params": key}, hidden, targets, key, MASK, method="loss")

    def loss(variables, hidden):
        return head.apply(variables, hidden, targets, key, MASK, method="loss")[0]

    return loss, (variables, hidden)


def test_full_head_trains_on_row_blocks_in_three_matmuls_where_exponentials_do_not_fit(monkeypatch):
    """Under block_residuals=auto with the exponentials over the keep limit, the head's gradient
    takes three [N, D] x [D, V] products (the vocabulary blocks' recomputation took four) and
    equals the loss that recomputes them."""
    monkeypatch.setattr(full, "KEEP_LIMIT_BYTES", 4 * ROWS * VOCAB - 1)
    loss, args = head_value_and_grads("auto")
    dots = matmuls(jax.grad(loss, argnums=(0, 1)), *args)
    assert len(dots) == 3 and all(VOCAB in np.ravel(shapes) for _, shapes in dots)
    got = jax.value_and_grad(loss, argnums=(0, 1))(*args)
    recomputing, _ = head_value_and_grads("recompute")
    assert_close_to_float32_rounding(got, jax.value_and_grad(recomputing, argnums=(0, 1))(*args))


@pytest.mark.parametrize(
    "rows, mesh_spec, split",
    [(64, "data:8", True), (64, "data:4,model:2", True), (60, "data:8", False), (16, "data:8", False)],
)
def test_under_a_mesh_each_device_walks_its_rows_and_the_loss_and_gradients_are_the_same(rows, mesh_spec, split):
    """Rows split over the batch axes (each device's blocks of its own rows, the table's gradient
    summed over the batch axes), or one walk of them all where the batch axes do not divide the
    rows (60 over 8) or the table has more words than the batch rows (23 over 16)."""
    hidden, weights, biases, targets = softmax_problems.random_problem(5, rows=rows, features=FEATURES, vocab=VOCAB)
    mask = np.random.default_rng(6).choice([0.0, 1.0, 0.5], size=rows).astype(np.float32)
    loss = jax.value_and_grad(blocked(targets, 4, z_loss=0.1), argnums=(0, 1, 2, 3))
    mesh = make_mesh(mesh_spec, jax.devices()[:8])
    placed = [jax.device_put(x, NamedSharding(mesh, P())) for x in (hidden, weights, biases, mask)]
    got = jax.jit(under_mesh(loss, mesh))(*placed)
    assert_close_to_float32_rounding(got, jax.jit(loss)(hidden, weights, biases, mask))
    assert ("shard_map" in str(jax.make_jaxpr(under_mesh(loss, mesh))(*placed))) == split


def test_under_a_mesh_no_device_gathers_the_rows_or_scores_another_devices_blocks():
    """A scan over blocks of rows split across devices gathered every row to every device (an
    [N, D] all-gather, then N / 8 rows scored 8 times over); split, only the [V, D] table's
    gradient is summed and each device scores its own N / 8 rows once."""
    rows, features, vocab = 1024, 16, 40
    hidden, weights, biases, targets = softmax_problems.random_problem(7, rows=rows, features=features, vocab=vocab)
    mesh = make_mesh("data:8", jax.devices()[:8])
    split = NamedSharding(mesh, P("data"))
    placed = (jax.device_put(hidden, split), weights, biases, jax.device_put(np.ones(rows, np.float32), split))
    step = jax.jit(under_mesh(jax.grad(blocked(jax.device_put(targets, split), 32), argnums=(0, 1, 2)), mesh))
    text = step.lower(*placed).compile().as_text()
    sent = sum(entry["bytes"] for entry in program.collectives(text).values())
    table = 4 * (vocab * features + vocab)
    assert table <= sent < 4 * features * rows // 8, sent  # less than one device's rows
    assert f"f32[{rows}," not in text and f"[{rows // 32},32,{features}]" not in text


@pytest.mark.parametrize("fits_per_device, expected", [(True, "the kept exponentials"), (False, "the rows' blocks")])
def test_under_a_mesh_the_full_head_chooses_by_the_rows_each_device_holds(monkeypatch, fits_per_device, expected):
    """64 rows over data:8 hold 8 a device: the keep limit is weighed against 8 rows' exponentials,
    so 8 devices run the program one device runs on its 8 rows."""
    rows = 64
    monkeypatch.setattr(full, "KEEP_LIMIT_BYTES", 4 * (rows // 8) * VOCAB - (0 if fits_per_device else 1))
    hidden, _, _, targets = softmax_problems.random_problem(8, rows=rows, features=FEATURES, vocab=VOCAB)
    cfg = HeadConfig(kind="full", groups=(FullOptions(chunk_size=8),))
    head = build_head(cfg, VOCAB, np.ones(VOCAB))
    variables = head.init({"params": jax.random.key(0)}, hidden, targets, None, None, method="loss")
    mesh = make_mesh("data:8", jax.devices()[:8])

    def loss(variables):
        return head.apply(variables, hidden, targets, None, None, method="loss")[0]

    jaxpr = str(jax.make_jaxpr(under_mesh(jax.grad(loss), mesh))(variables))
    walked = "the rows' blocks" if "shard_map" in jaxpr else "the kept exponentials"
    assert walked == expected
