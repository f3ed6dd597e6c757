"""The Pallas splash kernel (the TPU's fused attention), run in Pallas's interpret mode on the
CPU, against explicit attention for every mask it expresses: values and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from attention_cases import MASKS, reference_mask

from seqjax.models.attention_kernels.kernel import kernel
from seqjax.models.attention_kernels.splash import splash_attention
from seqjax.models.transformer.masks import self_mask

# The kernel's tiles are 128 tokens: the cases' 6 positions stretched to one tile of 128.
STRETCH = np.array([22, 21, 21, 21, 21, 22])
LENGTH = int(STRETCH.sum())


def stretched(parts):
    parts = {key: np.repeat(x, STRETCH, axis=1) if isinstance(x, np.ndarray) else x for key, x in parts.items()}
    if parts.get("window"):
        parts["window"] *= 16
    return parts


def explicit_attention(q, k, v, allowed):
    groups = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    weights = jax.nn.softmax(jnp.where(allowed, logits, jnp.finfo(jnp.float32).min), axis=-1)  # no NaN in unread rows
    return jnp.einsum("bhqk,bkhd->bqhd", weights, v)


@pytest.mark.parametrize(
    "name", ["causal", "causal_padding", "window_segments_padding", "bidirectional_padding_segments"]
)
def test_splash_kernel_equals_explicit_attention_with_its_gradients(name):
    parts = stretched(MASKS[name])
    mask = self_mask(**{key: jnp.asarray(x) if isinstance(x, np.ndarray) else x for key, x in parts.items()})
    assert kernel("splash").expresses(mask, LENGTH)
    allowed = reference_mask(**parts, length=LENGTH)
    real = allowed.any(-1)[:, 0] & (parts["valid"] if "valid" in parts else True)  # padded queries: unread
    # 4 query heads sharing 2 key/value heads, 8 features wide: padded to the kernel's 128 and back.
    q = jax.random.normal(jax.random.key(3), (2, LENGTH, 4, 8))
    k, v = jax.random.normal(jax.random.key(4), (2, 2, LENGTH, 2, 8))

    def loss(attention):
        return lambda q, k, v: (attention(q, k, v)[real] ** 2).sum()

    splash = jax.jit(jax.value_and_grad(loss(lambda *a: splash_attention(*a, mask, interpret=True)), argnums=(0, 1, 2)))
    explicit = jax.value_and_grad(loss(lambda *a: explicit_attention(*a, allowed)), argnums=(0, 1, 2))
    (got, got_grads), (want, want_grads) = splash(q, k, v), explicit(q, k, v)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_dilated_windows_and_partial_tiles_are_left_to_xla():
    splash = kernel("splash")
    assert not splash.expresses(self_mask(causal=True, window=4, dilation=2), 128)
    assert not splash.expresses(self_mask(causal=True), 100)
    assert splash.expresses(self_mask(causal=False, dilation=2), 256)  # dilation means nothing without a window
