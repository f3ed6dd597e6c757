"""cuDNN's fused attention on an NVIDIA GPU, through `jax.nn.dot_product_attention`.

It is given what its arguments express — `is_causal`, a contiguous `local_window_size`, and
padding as the lengths of the rows' valid prefixes — so segment ids (packed rows) and a dilated
window run on XLA. It takes 16-bit operands and heads of a multiple of 8 features up to 128, and
q, k and v in one placement (`placement.same_placement`). In a compiled program its calls are
custom calls to `__cudnn$fmha…` (`fmhaSoftmax` forward, `…Backward`).
"""

from __future__ import annotations

from typing import Any

import jax
from jax import Array

from seqjax.config import ATTENTION_KERNELS
from seqjax.models.attention_kernels.kernel import AttentionKernel, CustomCall
from seqjax.models.transformer.masks import SelfMask
from seqjax.placement import same_placement


def cudnn_arguments(mask: SelfMask) -> dict[str, Any]:
    """The arguments of `jax.nn.dot_product_attention` that express `mask` (one without segment
    ids or a dilated window): `is_causal`, `local_window_size`, and for padding
    `query_seq_lengths` and `key_value_seq_lengths`."""
    window = (mask.window - 1, 0) if mask.causal and mask.window else None
    arguments: dict[str, Any] = {"is_causal": mask.causal, "local_window_size": window}
    if mask.valid is not None:
        arguments.update(query_seq_lengths=mask.lengths, key_value_seq_lengths=mask.lengths)
    return arguments


def cudnn_attention(q: Array, k: Array, v: Array, mask: SelfMask) -> Array:
    """Attention of q [B, T, H, Dh] over k, v [B, T, K, Dh] under `mask` by cuDNN's kernel.
    Returns [B, T, H, Dh] in q's dtype."""
    q, k, v = same_placement(q, k, v)
    result: Array = jax.nn.dot_product_attention(q, k, v, implementation="cudnn", **cudnn_arguments(mask))
    return result


ATTENTION_KERNELS.register(
    "cudnn",
    AttentionKernel(
        cudnn_attention,
        title="cuDNN's fused attention (jax.nn.dot_product_attention)",
        masks=frozenset({"causal", "window", "padding"}),
        platforms=("gpu",),
        dtypes=("bfloat16", "float16"),
        head_multiple=8,
        max_head=128,
        auto_priority=1,
        hlo=CustomCall("__cudnn$fmha"),
    ),
)
