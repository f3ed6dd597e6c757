"""The call of teacher-forced self-attention: the kernel the model was built with where it
expresses the mask and the row length, XLA's otherwise."""

from __future__ import annotations

from jax import Array

from seqjax.models.attention_kernels.kernel import kernel
from seqjax.models.attention_kernels.xla import xla_attention
from seqjax.models.transformer.masks import SelfMask


def attend(q: Array, k: Array, v: Array, mask: SelfMask, name: str) -> Array:
    """Self-attention of q [B, T, H, Dh] over k, v [B, T, K, Dh] under `mask` by the kernel
    registered as `name` where it expresses the mask and T (`AttentionKernel.expresses`), else
    by XLA's (`xla.xla_attention`, which expresses every mask). Returns [B, T, H, Dh]."""
    chosen = kernel(name)
    if chosen.expresses(mask, q.shape[1]):
        return chosen.attend(q, k, v, mask)
    return xla_attention(q, k, v, mask)
