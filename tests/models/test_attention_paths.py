"""Every teacher-forced attention path against explicit attention, for every mask: XLA's blocks
of queries, the stored-key path of decoding and cross-attention, the arguments handed to cuDNN,
the hand-written backward of `dense_attention` (float32 and bfloat16), and the kernel `auto`
picks."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from attention_cases import MASKS, B, T, reference_mask

from seqjax.models.attention_kernels.choice import resolve
from seqjax.models.attention_kernels.cudnn import cudnn_arguments
from seqjax.models.attention_kernels.dense import dense_attention
from seqjax.models.attention_kernels.kernel import kernel
from seqjax.models.attention_kernels.xla import xla_attention
from seqjax.models.transformer.attention import stored_attention
from seqjax.models.transformer.masks import self_mask


def explicit_attention(q, k, v, mask):
    """softmax(q k^T / √Dh, masked) v as explicit matmuls, K key/value heads repeated over H."""
    groups = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    weights = jax.nn.softmax(jnp.where(mask, logits, -jnp.inf), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", weights, v)


CUDNN_EXPRESSES = {"causal", "window", "bidirectional", "causal_padding", "bidirectional_padding"}


@pytest.mark.parametrize("name", MASKS)
def test_every_attention_path_equals_explicit_attention_for_every_mask(name):
    q = jax.random.normal(jax.random.key(3), (B, T, 4, 8))
    k, v = jax.random.normal(jax.random.key(4), (2, B, T, 2, 8))
    parts = MASKS[name]
    mask = self_mask(
        **{key: jnp.asarray(value) if isinstance(value, np.ndarray) else value for key, value in parts.items()}
    )
    allowed = reference_mask(**parts)
    seen = allowed.any(-1)[:, 0]  # [B, T]: a query that sees no key has no defined output
    expected = jax.jit(explicit_attention)(q, k, v, allowed)[seen]
    got = jax.jit(functools.partial(xla_attention, mask=mask))(q, k, v)
    np.testing.assert_allclose(got[seen], expected, rtol=1e-5, atol=1e-5)
    # The decode step's and cross-attention's path, over keys and values stored [B, K, T, Dh].
    stored = jax.jit(stored_attention)(q, jnp.swapaxes(k, 1, 2), jnp.swapaxes(v, 1, 2), allowed)
    np.testing.assert_allclose(stored[seen], expected, rtol=1e-5, atol=1e-5)
    assert kernel("cudnn").expresses(mask, T) == (name in CUDNN_EXPRESSES)
    if name in CUDNN_EXPRESSES:
        # What cuDNN is asked for, run on XLA: the arguments are the whole mask for every real
        # query (padded queries' outputs, which nothing reads, may differ: cuDNN zeroes them).
        arguments = cudnn_arguments(mask)
        on_xla = jax.jit(functools.partial(jax.nn.dot_product_attention, implementation="xla", **arguments))(q, k, v)
        real = seen & (np.asarray(parts["valid"]) if "valid" in parts else True)
        np.testing.assert_allclose(
            on_xla[real], jax.jit(explicit_attention)(q, k, v, allowed)[real], rtol=1e-5, atol=1e-5
        )


@pytest.mark.parametrize("name", MASKS)
def test_dense_attention_gradients_equal_autodiff_of_jax_attention_for_every_mask(name):
    """The hand-written backward against autodiff through `jax.nn.dot_product_attention`, rows
    that see no key included (their logits are constants there too)."""
    q = jax.random.normal(jax.random.key(5), (B, T, 4, 8))
    k, v, cotangent = jax.random.normal(jax.random.key(6), (3, B, T, 2, 8))
    cotangent = jnp.repeat(cotangent, 2, axis=2)
    allowed = jnp.asarray(reference_mask(**MASKS[name]))

    def gradients(attention):
        return jax.jit(jax.grad(lambda *qkv: jnp.sum(attention(*qkv) * cotangent), argnums=(0, 1, 2)))(q, k, v)

    got = gradients(lambda q, k, v: dense_attention(q, k, v, allowed))
    expected = gradients(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, mask=allowed, implementation="xla"))
    for name_, g, e in zip("qkv", got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=f"d{name_}")


def test_dense_attention_in_bfloat16_keeps_the_dtype_and_agrees_with_float32():
    q = jax.random.normal(jax.random.key(7), (B, T, 4, 8))
    k, v = jax.random.normal(jax.random.key(8), (2, B, T, 1, 8))
    allowed = jnp.asarray(reference_mask(causal=True))

    def value_and_gradients(*qkv):
        return jax.value_and_grad(lambda *a: jnp.sum(dense_attention(*a, allowed).astype(jnp.float32) ** 2), (0, 1, 2))(
            *qkv
        )

    low, low_grads = jax.jit(value_and_gradients)(*(x.astype(jnp.bfloat16) for x in (q, k, v)))
    high, high_grads = jax.jit(value_and_gradients)(q, k, v)
    assert dense_attention(q.astype(jnp.bfloat16), k, v, allowed).dtype == jnp.float32  # v's dtype
    np.testing.assert_allclose(low, high, rtol=3e-2)
    for g_low, g_high in zip(low_grads, high_grads):
        assert g_low.dtype == jnp.bfloat16
        np.testing.assert_allclose(g_low.astype(jnp.float32), g_high, rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize(
    "platform, dtype, head_dim, expected",
    [
        ("gpu", jnp.bfloat16, 64, "cudnn"),
        ("gpu", jnp.float32, 64, "xla"),  # cuDNN's kernel takes 16-bit operands
        ("gpu", jnp.bfloat16, 160, "xla"),  # wider heads than cuDNN takes
        ("tpu", jnp.bfloat16, 128, "splash"),
        ("tpu", jnp.float32, 256, "splash"),
        ("tpu", jnp.bfloat16, 64, "splash"),  # padded to the kernel's 128-wide blocks
        ("cpu", jnp.bfloat16, 128, "xla"),
    ],
)
def test_auto_kernel_is_chosen_for_the_platform_of_the_run(platform, dtype, head_dim, expected):
    assert resolve("auto", dtype, head_dim, platform) == expected
    assert resolve("xla", dtype, head_dim, platform) == "xla"
