"""Teacher-forced self-attention through the Pallas splash attention kernel of JAX's TPU ops.

The kernel runs one batch row's grouped-query attention as multi-query attention per
key/value head: the G = H / K query heads of a group against that head's keys and values
([G, T, Dh] queries, [T, Dh] keys and values), vmapped over K and over the batch. Its mask is
the structured part (causal, a causal window, or none) as the kernel's own lazy mask, so fully
masked blocks are skipped; padding and packed rows become segment ids (a real token sees only
its segment's real tokens; padding is segment 0 and sees only padding). A dilated window is
not expressible, nor rows of other than whole 128-token blocks: those run on XLA. It takes heads
of a multiple of 128 features, and narrower ones padded with zeros to the next multiple (the
scores and outputs are unchanged; the kernel's FLOPs grow by the ratio) when the config names
it — `auto` passes it over for XLA then, saying so. In a compiled program its calls are Pallas
custom calls (`tpu_custom_call`) named for it (`splash_mqa_fwd…`).

Under a step's mesh (`placement.under_mesh`) the kernel runs inside a `shard_map`: each device
attends over its rows (and its heads, where `model` splits them) — a Pallas kernel is not
partitioned by the compiler. Off a TPU it runs in Pallas's interpret mode, which is how its
numerics are tested on a CPU.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as splash_mask

from seqjax.config import ATTENTION_KERNELS
from seqjax.models.attention_kernels.kernel import AttentionKernel, CustomCall
from seqjax.models.transformer.masks import SelfMask
from seqjax.placement import attention_spec, context_mesh

BLOCK = 128  # the kernel's query and key block, and the multiple its row lengths must be


def _structured(mask: SelfMask, length: int, heads: int) -> splash_mask.MultiHeadMask:
    shape = (length, length)
    if not mask.causal:
        base: splash_mask.Mask = splash_mask.FullMask(shape)
    elif mask.window:
        base = splash_mask.LocalMask(shape, window_size=(mask.window - 1, 0), offset=0)
    else:
        base = splash_mask.CausalMask(shape)
    return splash_mask.MultiHeadMask([base] * heads)


# The forward kernel's and both backward kernels' block sizes: every one BLOCK.
_BLOCK_SIZES = (
    "block_q",
    "block_kv",
    "block_kv_compute",
    "block_q_dkv",
    "block_kv_dkv",
    "block_kv_dkv_compute",
    "block_q_dq",
    "block_kv_dq",
)


def _blocks() -> splash.BlockSizes:
    sizes: dict[str, Any] = dict.fromkeys(_BLOCK_SIZES, BLOCK)
    return splash.BlockSizes(**sizes)


def segment_ids(mask: SelfMask, batch: int, length: int) -> Array:
    """[B, T] int32: the packed rows' segments, 0 for padding, 1 for every token of an unpacked row."""
    ids = jnp.ones((batch, length), jnp.int32) if mask.segments is None else mask.segments.astype(jnp.int32)
    return ids if mask.valid is None else jnp.where(mask.valid, ids, 0)


def _attend_rows(q: Array, k: Array, v: Array, ids: Array, *, mask: SelfMask, interpret: bool) -> Array:
    """q [B, T, H, Dh] (scaled), k, v [B, T, K, Dh], ids [B, T] -> [B, T, H, Dh]."""
    batch, length, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    group = heads // kv_heads
    kernel = splash.make_splash_mqa_single_device(
        _structured(mask, length, group), block_sizes=_blocks(), interpret=interpret
    )

    def one_group(q_group: Array, k_head: Array, v_head: Array, row_ids: Array) -> Array:
        """[G, T, Dh] queries, [T, Dh] keys and values, [T] segment ids -> [G, T, Dh]."""
        result: Array = kernel(q_group, k_head, v_head, segment_ids=splash.SegmentIds(q=row_ids, kv=row_ids))
        return result

    grouped = q.reshape(batch, length, kv_heads, group, head_dim).transpose(0, 2, 3, 1, 4)  # [B, K, G, T, Dh]
    keys, values = (jnp.swapaxes(x, 1, 2) for x in (k, v))  # [B, K, T, Dh]
    per_head = jax.vmap(one_group, in_axes=(0, 0, 0, None))
    out = jax.vmap(per_head)(grouped, keys, values, ids)  # [B, K, G, T, Dh]
    return out.transpose(0, 3, 1, 2, 4).reshape(batch, length, heads, head_dim)


def splash_attention(q: Array, k: Array, v: Array, mask: SelfMask, *, interpret: bool | None = None) -> Array:
    """Attention of q [B, T, H, Dh] over k, v [B, T, K, Dh] (T a multiple of BLOCK) under
    `mask` (without a dilated window) by the splash kernel; `interpret` defaults to "not on a TPU" (the step's
    mesh's platform, else JAX's backend). Returns [B, T, H, Dh] in q's dtype."""
    batch, length, _, width = q.shape
    mesh = context_mesh()
    if interpret is None:
        interpret = (jax.default_backend() if mesh is None else mesh.abstract_device.platform) != "tpu"
    scaled = q * jnp.asarray(1.0 / math.sqrt(width), q.dtype)
    wide = -(-width // BLOCK) * BLOCK
    if wide != width:  # zeros add nothing to a score, and the padded outputs are sliced off
        scaled, k, v = (jnp.pad(x, ((0, 0), (0, 0), (0, 0), (0, wide - width))) for x in (scaled, k, v))
    ids = segment_ids(mask, batch, length)
    attend = functools.partial(_attend_rows, mask=mask, interpret=interpret)
    if mesh is None:
        return attend(scaled, k, v, ids)[..., :width].astype(q.dtype)
    spec = attention_spec(mesh, scaled, k, v)
    sharded = jax.shard_map(
        attend,
        mesh=mesh,
        in_specs=(spec, spec, spec, jax.sharding.PartitionSpec(spec[0])),
        out_specs=spec,
        check_vma=False,  # the Pallas call declares no varying axes
    )
    return sharded(scaled, k, v, ids)[..., :width].astype(q.dtype)


ATTENTION_KERNELS.register(
    "splash",
    AttentionKernel(
        splash_attention,
        title="the splash kernel",
        masks=frozenset({"causal", "window", "padding", "segments"}),
        platforms=("tpu",),
        head_multiple=BLOCK,
        pads_heads=True,
        row_multiple=BLOCK,
        auto_priority=1,
        hlo=CustomCall("tpu_custom_call", names=("splash", "flash")),
    ),
)
