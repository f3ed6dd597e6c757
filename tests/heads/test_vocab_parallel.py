"""The vocabulary-parallel softmax equals the full softmax in value and gradient, without [N, V]."""

import jax
import numpy as np
import pytest
from jaxpr_tools import equations, sub_jaxprs

from seqjax.heads import FullSoftmax
from seqjax.heads.full_head import VocabParallelSoftmax
from seqjax.heads.vocab_parallel import vocab_parallel_softmax_loss
from seqjax.training.core.layout import make_mesh

# Meshes of up to 8 devices: the suite's simulated CPU devices; one GPU has too few.
pytestmark = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 devices")


def mesh_of(spec):
    sizes = [int(part.split(":")[1]) for part in spec.split(",")]
    return make_mesh(spec, jax.devices()[: int(np.prod(sizes))])


def problem(rows, vocab, features=8, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    hidden = (scale * rng.normal(size=(rows, features))).astype(np.float32)
    weights = rng.normal(size=(vocab, features)).astype(np.float32)
    biases = rng.normal(size=vocab).astype(np.float32)
    targets = rng.integers(0, vocab, rows).astype(np.int32)
    return hidden, weights, biases, targets


def reference_loss(hidden, weights, biases, targets):
    """-log softmax(h W^T + b)[t], row by row, in float64."""
    scores = hidden.astype(np.float64) @ weights.T.astype(np.float64) + biases
    top = scores.max(axis=1, keepdims=True)
    log_z = top[:, 0] + np.log(np.exp(scores - top).sum(axis=1))
    return log_z - scores[np.arange(len(targets)), targets]


def reference_grads(hidden, weights, biases, targets):
    """Gradients of the summed loss: with G = softmax − onehot, dh = G W, dW = G^T h, db = Σ_n G."""
    scores = hidden.astype(np.float64) @ weights.T.astype(np.float64) + biases
    probs = np.exp(scores - scores.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    g = probs.copy()
    g[np.arange(len(targets)), targets] -= 1.0
    return g @ weights, g.T @ hidden, g.sum(axis=0)


# (mesh, rows): rows split over data; rows kept whole (6 rows over data:4); vocabulary over all 8.
LAYOUTS = [("data:2,model:4", 12), ("data:4,model:2", 6), ("data:1,model:8", 5)]


@pytest.mark.parametrize("spec, rows", LAYOUTS)
def test_vocab_parallel_loss_equals_the_full_softmax_loss(spec, rows):
    hidden, weights, biases, targets = problem(rows, vocab=16, scale=30.0)  # scores in the hundreds
    mesh = mesh_of(spec)
    losses = jax.jit(lambda h, w, b, t: vocab_parallel_softmax_loss(h, w, b, t, mesh))(hidden, weights, biases, targets)
    want = reference_loss(hidden, weights, biases, targets)
    np.testing.assert_allclose(np.asarray(losses), want, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("spec, rows", LAYOUTS)
def test_vocab_parallel_gradients_equal_the_full_softmax_gradients(spec, rows):
    hidden, weights, biases, targets = problem(rows, vocab=16)
    mesh = mesh_of(spec)

    def total(h, w, b):
        return vocab_parallel_softmax_loss(h, w, b, targets, mesh).sum()

    grads = jax.jit(jax.grad(total, argnums=(0, 1, 2)))(hidden, weights, biases)
    for got, want in zip(grads, reference_grads(hidden, weights, biases, targets)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_vocab_parallel_loss_and_gradient_never_hold_the_whole_logits_matrix():
    rows, vocab = 16, 1024
    hidden, weights, biases, targets = problem(rows, vocab)
    mesh = mesh_of("data:2,model:4")

    def total(h, w, b):
        return vocab_parallel_softmax_loss(h, w, b, targets, mesh).sum()

    program = jax.value_and_grad(total, argnums=(0, 1, 2))
    jaxpr = jax.make_jaxpr(program)(hidden, weights, biases).jaxpr
    # Inside shard_map each device sees its own blocks; nothing gathers another device's words.
    bodies = [body for eqn in equations(jaxpr, "shard_map") for body in sub_jaxprs(eqn)]
    assert bodies and not any(eqn.primitive.name.startswith("all_gather") for eqn in equations(jaxpr))
    local_shapes = {tuple(v.aval.shape) for body in bodies for eqn in equations(body) for v in eqn.outvars}
    assert (rows // 2, vocab // 4) in local_shapes  # each device scores its rows against its words
    assert max(np.prod(shape, dtype=int) for shape in local_shapes) < rows // 2 * vocab
    # Per device, the compiled program's scratch memory is a fraction of the [N, V] float32 logits.
    memory = jax.jit(program).lower(hidden, weights, biases).compile().memory_analysis()
    assert memory.temp_size_in_bytes < rows * vocab * 4, memory


def test_vocab_parallel_head_shares_parameters_and_loss_with_the_full_softmax_head():
    hidden, _, _, targets = problem(8, vocab=16)
    mask = np.array([1, 1, 0, 1, 1, 1, 0, 1], np.float32)
    full = FullSoftmax(vocab_size=16)
    parallel = VocabParallelSoftmax(vocab_size=16, mesh=mesh_of("data:2,model:4"))
    variables = jax.jit(lambda: full.init(jax.random.PRNGKey(0), hidden, targets, None, mask, method="loss"))()
    assert jax.tree.structure(variables) == jax.tree.structure(
        jax.eval_shape(lambda: parallel.init(jax.random.PRNGKey(0), hidden, targets, None, mask, method="loss"))
    )
    want, want_aux = jax.jit(lambda v: full.apply(v, hidden, targets, None, mask, method="loss"))(variables)
    got, got_aux = jax.jit(lambda v: parallel.apply(v, hidden, targets, None, mask, method="loss"))(variables)
    np.testing.assert_allclose(float(got), float(want), rtol=1e-6)
    assert float(got_aux["tokens"]) == float(want_aux["tokens"]) == 6.0


def test_a_vocabulary_that_does_not_split_evenly_is_a_clear_error():
    hidden, weights, biases, targets = problem(4, vocab=10)
    with pytest.raises(ValueError, match="divisible by the model axis size 4, got 10"):
        vocab_parallel_softmax_loss(hidden, weights, biases, targets, mesh_of("data:2,model:4"))


def test_out_of_range_targets_are_refused_on_the_host():
    hidden, weights, biases, targets = problem(4, vocab=8)
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 8\)"):
        vocab_parallel_softmax_loss(hidden, weights, biases, targets + 8, mesh_of("data:2,model:4"))
