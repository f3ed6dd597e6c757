"""Teacher-forced attention computed by XLA: grouped products and a hand-written backward.

`jax.nn.dot_product_attention(implementation="xla")` maps its core over the query groups of
grouped-query attention and leaves the backward to autodiff through the masked softmax. On
XLA on CPU that lays the logits out group-first and transposes them between the products and
each elementwise pass. Here the H = K·G query heads are laid out [B, K, G·T, Dh], so that
each product is one matmul per (batch row, key/value head) with the keys' and values' own
[S, Dh] rows, and the backward is the softmax's closed form. With Q the queries already scaled
by 1/√Dh, E = exp(Q Kᵀ − rowmax) under the mask, P = E / rowsum(E) and dO the output's
cotangent:

    O = (E V) / rowsum(E),  dV = Pᵀ dO,  dS = P ⊙ (dO Vᵀ − rowsum(dO ⊙ O)),  dQ = dS K,  dK = dSᵀ Q

(dQ / √Dh for the unscaled queries): one elementwise pass between four matmuls. Scaling the
[.., Dh] queries rather than the [.., S] logits, and dividing the [.., Dh] output rather than
the [.., S] probabilities, spares two passes over the logits. Measured on a 2-core AMD EPYC
(Zen 3), forward and backward of the modern benchmark model's causal attention (B=16, T=128,
8 query and 2 key/value heads of 64), in one process: 28 ms through
`jax.nn.dot_product_attention`, 21 ms here (22-26 ms with the logits scaled and the
probabilities normalized), 17 ms in torch's fused `scaled_dot_product_attention`;
the XLA kernel (`xla.py`) computes it in blocks of queries (14 ms).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import Array

# As `jax.nn.dot_product_attention` masks: finite, so that a query that sees no key gets the
# uniform average of the values rather than NaN.
MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)

# What the backward pass reads: the scaled grouped queries [B, K, G·T, Dh], keys and values
# [B, K, S, Dh], the unnormalized probabilities E [B, K, G·T, S] float32, 1 / rowsum(E)
# [B, K, G·T, 1], the grouped output [B, K, G·T, Dh] and the mask.
Residuals = tuple[Array, Array, Array, Array, Array, Array, Array]


def _grouped(x: Array, kv_heads: int) -> Array:
    """[B, T, K·G, Dh] -> [B, K, G·T, Dh]: query head h = k·G + g reads key/value head k."""
    batch, length, heads, width = x.shape
    x = x.reshape(batch, length, kv_heads, heads // kv_heads, width)
    return jnp.transpose(x, (0, 2, 3, 1, 4)).reshape(batch, kv_heads, -1, width)


def _ungrouped(x: Array, length: int) -> Array:
    """[B, K, G·T, Dh] -> [B, T, K·G, Dh], the inverse of `_grouped`."""
    batch, kv_heads, rows, width = x.shape
    x = x.reshape(batch, kv_heads, rows // length, length, width)
    return jnp.transpose(x, (0, 3, 1, 2, 4)).reshape(batch, length, -1, width)


def _by_group(x: Array, length: int) -> Array:
    """[B, K, G·T, S] -> [B, K, G, T, S] (a reshape), where a [B, 1, T, S] mask broadcasts."""
    return x.reshape(x.shape[0], x.shape[1], -1, length, x.shape[-1])


def _forward(q: Array, k: Array, v: Array, mask: Array) -> tuple[Array, Residuals]:
    length, width = q.shape[1], q.shape[-1]
    queries = _grouped(q * (1.0 / math.sqrt(width)), k.shape[2])  # scaled here, not as [.., S] logits
    keys, values = jnp.swapaxes(k, 1, 2), jnp.swapaxes(v, 1, 2)  # [B, K, S, Dh]
    logits = jnp.einsum("bkqd,bksd->bkqs", queries, keys, preferred_element_type=jnp.float32)
    logits = jnp.where(mask[:, :, None], _by_group(logits, length), MASKED)  # mask [B, 1, 1, T, S]
    weights = jnp.exp(logits - jnp.max(logits, axis=-1, keepdims=True))
    inverse = (1.0 / jnp.sum(weights, axis=-1)).reshape(queries.shape[:3] + (1,))  # [B, K, G·T, 1]
    weights = weights.reshape(queries.shape[:3] + (keys.shape[2],))
    out = jnp.einsum("bkqs,bksd->bkqd", weights.astype(v.dtype), values, preferred_element_type=jnp.float32)
    out = (out * inverse).astype(v.dtype)
    return _ungrouped(out, length), (queries, keys, values, weights, inverse, out, mask)


@jax.custom_vjp
def dense_attention(q: Array, k: Array, v: Array, mask: Array) -> Array:
    """softmax(q kᵀ / √Dh, masked) v with H / K query heads per key/value head.

    Args:
      q: [B, T, H, Dh] queries.
      k, v: [B, S, K, Dh] keys and values, K dividing H (query head h reads head h // (H/K)).
      mask: bool broadcastable to [B, 1, T, S], True where a query may see a key. A query
        that sees no key averages every value (as `jax.nn.dot_product_attention` does).
    Returns:
      [B, T, H, Dh] in v's dtype; logits and softmax are float32.
    """
    return _forward(q, k, v, mask)[0]


def _backward(residuals: Residuals, cotangent: Array) -> tuple[Array, Array, Array, None]:
    queries, keys, values, weights, inverse, out, mask = residuals
    length, width = cotangent.shape[1], cotangent.shape[-1]
    d_out = _grouped(cotangent, keys.shape[1])  # [B, K, G·T, Dh]
    d_values = jnp.einsum("bkqs,bkqd->bksd", weights.astype(values.dtype), d_out * inverse.astype(d_out.dtype))
    d_probs = jnp.einsum("bkqd,bksd->bkqs", d_out, values, preferred_element_type=jnp.float32)
    row_sums = jnp.sum(d_out.astype(jnp.float32) * out.astype(jnp.float32), axis=-1, keepdims=True)
    d_logits = weights * inverse * (d_probs - row_sums)
    # Masked logits are constants: no gradient, even in a row that sees no key.
    d_logits = jnp.where(mask[:, :, None], _by_group(d_logits, length), 0.0).reshape(weights.shape)
    d_logits = d_logits.astype(queries.dtype)
    d_queries = jnp.einsum("bkqs,bksd->bkqd", d_logits, keys) * (1.0 / math.sqrt(width))
    d_keys = jnp.einsum("bkqs,bkqd->bksd", d_logits, queries)
    return _ungrouped(d_queries, length), jnp.swapaxes(d_keys, 1, 2), jnp.swapaxes(d_values, 1, 2), None


dense_attention.defvjp(_forward, _backward)
