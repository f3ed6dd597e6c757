"""cuDNN's fused attention on an NVIDIA GPU.

Rows of one sequence each go through `jax.nn.dot_product_attention`, given what its arguments
express: `is_causal`, a contiguous `local_window_size`, and padding as the lengths of the rows'
valid prefixes. Packed rows (segment ids) go through cuDNN's packed layout, which JAX's public
function does not take: `jax._src.cudnn.fused_attention_stablehlo.dot_product_attention` given
each segment's length and first token (`segment_spans`), arrays [B, M] as long as the most
segments a row holds (`data.max_segments`; cuDNN keeps softmax statistics of [B·M, H, T]
float32, so M is a bound, not T). JAX runs that layout on Hopper and newer GPUs. Two things of
JAX's binding are guarded:

- JAX (0.10.2 at least) strides the keys' segment offsets by the query heads, which is wrong
  under grouped-query attention; where the installed JAX does (`keys_strided_by_query_heads`,
  found by running its own offset computation once), keys and values are repeated to the query
  heads first.
- It checks the compute capability of the machine's first GPU while tracing. Compiling for a GPU
  target on a machine without one (`seqjax compile`), there is none to ask: the model was built
  for the target's capability (`KernelChoice`), and in such a process the check is answered by
  that (`_capability_as_built`).

A dilated window runs on XLA. The kernel takes 16-bit operands and heads of a multiple of 8
features up to 128, and q, k and v in one placement (`placement.same_placement`). In a compiled
program its calls are custom calls to `__cudnn$fmha…` (`fmhaSoftmax` forward, `…Backward`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax._src.cudnn import fused_attention_stablehlo as fused

from seqjax.config import ATTENTION_KERNELS
from seqjax.models.attention_kernels.kernel import AttentionKernel, CustomCall
from seqjax.models.transformer.masks import SelfMask
from seqjax.placement import rows_placement, same_placement

HOPPER = (9, 0)  # the least compute capability on which JAX runs cuDNN's packed layout


def cudnn_arguments(mask: SelfMask) -> dict[str, Any]:
    """The arguments of `jax.nn.dot_product_attention` that express `mask` (one without segment
    ids or a dilated window): `is_causal`, `local_window_size`, and for padding
    `query_seq_lengths` and `key_value_seq_lengths`."""
    window = (mask.window - 1, 0) if mask.causal and mask.window else None
    arguments: dict[str, Any] = {"is_causal": mask.causal, "local_window_size": window}
    if mask.valid is not None:
        arguments.update(query_seq_lengths=mask.lengths, key_value_seq_lengths=mask.lengths)
    return arguments


def packed_ids(segments: Array, valid: Array | None) -> Array:
    """[B, T] int32: each token's segment (`segments` [B, T]), 0 for a token in none (padding,
    or outside the valid prefix `valid` [B, T] bool)."""
    ids = segments.astype(jnp.int32)
    return ids if valid is None else jnp.where(valid, ids, 0)


def segment_spans(ids: Array, max_segments: int) -> tuple[Array, Array]:
    """The packed layout of rows whose tokens `ids` [B, T] int32 lie in segments 1..M
    (M = max_segments; 0: in none), each segment's tokens contiguous.

    Returns:
      lengths [B, M] int32, segment m + 1's tokens, -1 where the row has no such segment;
      offsets [B, M + 1] int32, its first token, -1 likewise and in the last column (which
      JAX's binding fills with the end of the batch).
    """
    member = ids[:, :, None] == jnp.arange(1, max_segments + 1, dtype=jnp.int32)  # [B, T, M]
    lengths = member.sum(axis=1, dtype=jnp.int32)
    present = lengths > 0
    first = jnp.argmax(member, axis=1).astype(jnp.int32)
    offsets = jnp.pad(jnp.where(present, first, -1), ((0, 0), (0, 1)), constant_values=-1)
    return jnp.where(present, lengths, -1), offsets


def check_spans(ids: Array, max_segments: int) -> None:
    """Where `ids` [B, T] are concrete (not traced): each row's segments numbered at most
    `max_segments`, each contiguous, as the packed layout describes them (by first token and
    length); a ValueError naming the row and segment otherwise."""
    if isinstance(ids, jax.core.Tracer):
        return
    values = np.asarray(ids)
    if values.size and values.max() > max_segments:
        raise ValueError(
            f"segment_ids must be <= data.max_segments={max_segments}, the bound the model was built with, "
            f"got {values.max()}"
        )
    for row, tokens in enumerate(values):
        for segment in np.unique(tokens[tokens > 0]):
            at = np.flatnonzero(tokens == segment)
            if at[-1] - at[0] + 1 != len(at):
                raise ValueError(f"segment {segment} of row {row} is not contiguous (tokens {at.tolist()})")


@functools.cache
def keys_strided_by_query_heads() -> bool:
    """Whether the installed JAX places the keys' packed segments by the query heads' stride
    (wrong when there are fewer key heads), found by running its offset computation on one row of
    two one-token segments, two query heads and one key head. True where it cannot be run."""
    fix = getattr(fused, "_fix_seqlen_offsets", None)
    if fix is None:
        return True
    with jax.ensure_compile_time_eval():  # asked first while a step is traced
        lengths, offsets = jnp.array([[1, 1]], jnp.int32), jnp.array([[0, 1, -1]], jnp.int32)
        query, key = jnp.zeros((1, 2, 2, 1)), jnp.zeros((1, 2, 1, 1))
        key_offsets = fix(lengths, lengths, offsets, offsets, query, key)[3]
        return int(key_offsets.reshape(-1)[1]) != 1  # segment 2 starts 1 key (1 head x 1 feature) in


def _capability_as_built() -> None:
    """On a machine without a GPU, JAX's check of the packed layout against the machine's first
    GPU answered by the model's build instead, for the process: such a machine compiles only for
    a GPU target, whose capability the model was built for (`KernelChoice`), and the check runs
    in whichever trace differentiates the step (a scanned, rematerialized block's backward pass
    is traced after its forward)."""
    if jax.default_backend() != "gpu":
        fused.check_compute_capability = _built_for_the_target


def _built_for_the_target(capability: str) -> bool:
    return True


def packed_arguments(q: Array, k: Array, v: Array, mask: SelfMask, segments: Array) -> dict[str, Any]:
    """What cuDNN's packed layout is given for attention of q [B, T, H, Dh] over k, v [B, T, K, Dh]
    within the `segments` [B, T] of packed rows (at most `mask.max_segments` a row, each
    contiguous) under the rest of `mask`: query, key and value (keys and values repeated to
    the H heads where JAX would misplace fewer), each segment's length and first token, the
    mask's kind, scale and window, as keyword arguments of JAX's binding."""
    ids = packed_ids(segments, mask.valid)
    check_spans(ids, mask.max_segments)
    lengths, offsets = (rows_placement(x) for x in segment_spans(ids, mask.max_segments))
    if k.shape[2] != q.shape[2] and keys_strided_by_query_heads():
        k, v = (jnp.repeat(x, q.shape[2] // k.shape[2], axis=2) for x in (k, v))
    return {
        "query": q,
        "key": k,
        "value": v,
        "q_seqlen": lengths,
        "kv_seqlen": lengths,
        "q_offsets": offsets,
        "kv_offsets": offsets,
        "scale": 1.0 / math.sqrt(q.shape[-1]),
        "mask_type": fused.MaskType.PADDING_CAUSAL if mask.causal else fused.MaskType.PADDING,
        "sliding_window_length": mask.window if mask.causal and mask.window else None,
    }


def packed_cudnn_attention(q: Array, k: Array, v: Array, mask: SelfMask, segments: Array) -> Array:
    """`packed_arguments`'s attention by cuDNN. Returns [B, T, H, Dh] in q's dtype, zero at
    tokens of no segment (outputs cuDNN does not define)."""
    arguments = packed_arguments(q, k, v, mask, segments)
    placed = same_placement(arguments["query"], arguments["key"], arguments["value"])
    arguments.update(zip(("query", "key", "value"), placed))
    _capability_as_built()
    out = fused.dot_product_attention(**arguments)
    in_segment = packed_ids(segments, mask.valid) > 0
    return jnp.where(in_segment[:, :, None, None], out, 0).astype(q.dtype)


def cudnn_attention(q: Array, k: Array, v: Array, mask: SelfMask) -> Array:
    """Attention of q [B, T, H, Dh] over k, v [B, T, K, Dh] under `mask` by cuDNN's kernel.
    Returns [B, T, H, Dh] in q's dtype."""
    if mask.segments is not None:
        return packed_cudnn_attention(q, k, v, mask, mask.segments)
    q, k, v = same_placement(q, k, v)
    result: Array = jax.nn.dot_product_attention(q, k, v, implementation="cudnn", **cudnn_arguments(mask))
    return result


ATTENTION_KERNELS.register(
    "cudnn",
    AttentionKernel(
        cudnn_attention,
        title="cuDNN's fused attention",
        masks=frozenset({"causal", "window", "padding", "segments"}),
        platforms=("gpu",),
        dtypes=("bfloat16", "float16"),
        head_multiple=8,
        max_head=128,
        bounded_segments=True,
        packed_capability=HOPPER,
        auto_priority=1,
        hlo=CustomCall("__cudnn$fmha"),
    ),
)
