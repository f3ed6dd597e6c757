"""A stack of `cfg.layers` Transformer blocks, unrolled or scanned, with optional remat.

- `model.scan_layers=false`: a list of blocks (parameters `blocks_0`, `blocks_1`, ...), one
  traced copy per layer, so compile time grows with depth.
- `model.scan_layers=true`: one block under `nn.scan`, its parameters stacked along a
  leading layer axis (`blocks/...` [L, ...]); the layer is traced once, so compile time is
  flat in depth. The same weights give the same outputs either way, re-laid out; a
  checkpoint does not move between the two (the run's config check refuses the change).
- `model.remat`: "dots" keeps only the outputs of matmuls without batch dimensions (the
  projections) and recomputes the rest, attention scores included, in the backward pass;
  "full" keeps only each layer's input. Measured on the CPU backend (D=256, L=8, B·T=2048):
  scanned, the step's temporaries fall from 905 MiB to 227 (dots) and 124 MiB (full);
  unrolled they stay at 782 MiB, as for a plain `jax.checkpoint` loop there: XLA's CPU
  scheduler runs the recomputation early, so on CPU remat pays off with scan_layers only.
  "auto" is resolved to one of those where the train step is compiled for the run's devices
  (`seqjax.training.core.remat`); a module built with it unresolved (evaluation, decoding:
  nothing is differentiated) recomputes nothing.

Decode state leaves keep the batch as their leading axis in both layouts: a scanned stack's
KV cache is {"k", "v"} [B, L, K, M, Dh], carried through the layer scan and written in place
at each layer's index, an unrolled one a tuple of per-layer {"k", "v"} [B, K, M, Dh];
cross-attention memories likewise.

The KV caches and memories are `SharedByBeams`: a beam search's K beams of a batch row read
one cache of K·M slots instead of each holding M slots that are reordered after every step.
Beam k writes its keys and values in block k (slots k·M ...), and the state's "slot_rows"
[B·K, M] int32, reordered with the beams as any per-row state, records the block that holds
each position of a beam's history: a beam inherits its parent's record and adds its own
block at its new position. Attention reads the batch row's whole cache under that record.

Both are also `GrowsWithSteps`: the decoders hold them cut to the slots the steps so far can
reach and grow them in phases (`seqjax.decoding.phases`), so that a step's attention reads
about as many slots as are filled. Every size (slots per block, the slot of a position) is
read from "slot_rows" at each call, so a step works with whatever length it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import Array, lax

from seqjax.config import ModelConfig
from seqjax.contracts import GrowsWithSteps, SharedByBeams
from seqjax.models.transformer.attention import empty_cache
from seqjax.models.transformer.blocks import Block
from seqjax.models.transformer.masks import SelfMask, beam_slots_mask, decode_mask

# One stack's blocks: a scanned Block (`model.scan_layers`) or one Block per layer.
Blocks = Block | Sequence[Block]
# Per-layer {"k", "v"} arrays (KV caches, cross-attention memories): a tuple of [B, ...] dicts
# (unrolled), or one dict of [B, L, ...] (scanned).
Memories = tuple[dict[str, Array], ...] | dict[str, Array]

REMAT_POLICIES = {"dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable, "full": None}


def make_blocks(cfg: ModelConfig, dtype: Any, kernel: str, cross: bool = False) -> Blocks:
    """The blocks of one stack, for a model's `setup`: one scanned Block or a list of them, their
    self-attention on the registered `kernel`."""
    if cfg.scan_layers:
        return Block(cfg, cross, dtype, kernel=kernel)
    return [Block(cfg, cross, dtype, kernel=kernel) for _ in range(cfg.layers)]


def _scanned(layer: Callable[..., Any], cfg: ModelConfig) -> Callable[..., Any]:
    # Per-layer inputs and outputs (caches, memories) carry the layer on axis 1, after the batch.
    return nn.scan(
        layer,
        variable_axes={"params": 0},
        split_rngs={"params": True, "dropout": True},
        # The stacked parameters' new leading axis is named `layers`, which no strategy splits:
        # each step of the scan reads one layer whole.
        metadata_params={nn.PARTITION_NAME: "layers"},
        in_axes=1,
        out_axes=1,
        length=cfg.layers,
    )


def run_blocks(
    blocks: Blocks,
    cfg: ModelConfig,
    x: Array,
    positions: Array,
    mask: SelfMask,
    encoded: Array | None = None,
    encoded_mask: Array | None = None,
    train: bool = False,
) -> Array:
    """Teacher-forced pass: x [B, T, D] float32 through every block; returns [B, T, D] float32.

    positions: [B, T] or [T] int32; mask: the self-attention's; encoded [B, S, D] and
    encoded_mask (bool broadcastable to [B, 1, T, S]): the encoder output that blocks with
    cross-attention read (each projects its own memory).
    """

    def layer(block: Block, x: Array, _: None) -> tuple[Array, None]:
        memory = None if encoded is None else block.memory(encoded)
        return block(x, positions, mask, memory, encoded_mask, train), None

    if cfg.remat in REMAT_POLICIES:
        # Inside a scan, CSE cannot merge recomputation across iterations; outside it must be
        # prevented, or XLA folds the recomputed forward back into the saved one.
        layer = nn.remat(layer, policy=REMAT_POLICIES[cfg.remat], prevent_cse=not cfg.scan_layers)
    if isinstance(blocks, Block):
        result: Array = _scanned(layer, cfg)(blocks, x, None)[0]
        return result
    for block in blocks:
        x, _ = layer(block, x, None)
    return x


def block_memories(blocks: Blocks, cfg: ModelConfig, encoded: Array) -> Memories:
    """Every decoder block's cross-attention memory of encoded [B, S, D]: a tuple of
    {"k", "v"} [B, K, S, Dh] (unrolled) or {"k", "v"} [B, L, K, S, Dh] (scanned)."""
    if isinstance(blocks, Block):
        result: Memories = _scanned(lambda block, carry, _: (carry, block.memory(carry)), cfg)(blocks, encoded, None)[1]
        return result
    return tuple(block.memory(encoded) for block in blocks)


def empty_decode_cache(cfg: ModelConfig, batch_size: int, max_len: int, dtype: Any) -> dict[str, Any]:
    """The decode state's cache part for max_len slots: {"cache": SharedByBeams of the stack's
    empty KV caches, "slot_rows": [B, max_len] int32 zeros (every slot in block 0)}, both
    `GrowsWithSteps` along their slots."""
    cache = empty_cache(cfg, batch_size, max_len, dtype)
    if cfg.scan_layers:
        caches = jax.tree.map(lambda v: jnp.zeros((v.shape[0], cfg.layers, *v.shape[1:]), v.dtype), cache)
    else:
        caches = (cache,) * cfg.layers
    return _cache_part(caches, jnp.zeros((batch_size, max_len), jnp.int32))


def _cache_part(caches: Memories, slot_rows: Array) -> dict[str, Any]:
    """The decode state's cache part: the KV caches' slots (axis -2) are shared by the beams and
    grow with the steps, the slot record [N, M] grows with the steps."""
    return {
        "cache": SharedByBeams(GrowsWithSteps(caches, axis=-2), grow_axis=-2),
        "slot_rows": GrowsWithSteps(slot_rows, axis=1),
    }


def decode_blocks(
    blocks: Blocks,
    cfg: ModelConfig,
    x: Array,
    state: dict[str, Any],
    positions: Array,
    memories: Memories | None = None,
    memory_mask: Array | None = None,
) -> tuple[Array, dict[str, Any]]:
    """One decode step of N rows through every block: x [N, 1, D] float32 -> (x, the state's
    updated cache part, {"cache", "slot_rows"}).

    state: holds the cache part of `empty_decode_cache` (as beam search grows it: N = B·R rows
    over caches of R·M slots); positions: [N] int32; memories: `block_memories` [B, ...] and
    memory_mask [B, 1, 1, S] bool, for blocks with cross-attention.
    """
    caches, slot_rows = state["cache"].value.value, state["slot_rows"].value
    rows, length = slot_rows.shape
    batch = jax.tree.leaves(caches)[0].shape[0]
    block = jnp.arange(rows, dtype=jnp.int32) % (rows // batch)
    slots = block * length + positions
    if rows > batch:  # the new position is held in the row's own block from now on
        slot_rows = slot_rows.at[jnp.arange(rows), positions].set(block)
    mask = beam_slots_mask(decode_mask(positions, length, cfg.window, cfg.dilation), slot_rows, batch)

    if isinstance(blocks, Block):
        # The stacked caches ride in the carry and are updated in place at each layer's index;
        # as scanned inputs and outputs they would be moved whole to the front and back.
        def layer(
            block: Block, carry: tuple[Array, dict[str, Array], Array], _: None
        ) -> tuple[tuple[Array, dict[str, Array], Array], None]:
            x, caches, index = carry
            memory = None
            if memories is not None:
                memory = jax.tree.map(lambda m: lax.dynamic_index_in_dim(m, index, axis=1, keepdims=False), memories)
            x, caches = block.decode(x, caches, positions, slots, mask, memory, memory_mask, index)
            return (x, caches, index + 1), None

        (x, caches, _), _ = _scanned(layer, cfg)(blocks, (x, caches, jnp.zeros((), jnp.int32)), None)
    else:
        updated = []
        for index, block_module in enumerate(blocks):
            memory = memories[index] if isinstance(memories, tuple) else None
            x, cache = block_module.decode(x, caches[index], positions, slots, mask, memory, memory_mask)
            updated.append(cache)
        caches = tuple(updated)
    return x, _cache_part(caches, slot_rows)
