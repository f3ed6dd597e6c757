"""`model.attention_kernel` resolved once, when the model is built: the kernel a config asks for,
the registered kernel that means on the run's devices, and why some of the run's self-attention
leaves it for XLA. The built model carries the answer (`KernelChoice`); the run's notice and
`seqjax compile`'s report read it there."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from seqjax.config import ATTENTION_KERNELS, TRANSFORMERS, ModelConfig
from seqjax.models.attention_kernels.kernel import MaskPart, kernel


@dataclasses.dataclass(frozen=True)
class SelfAttentionRows:
    """The rows a run's teacher-forced self-attention reads.

    lengths: their lengths in tokens (a language model's data.seq_len, an encoder-decoder's
      buckets); () where unknown.
    packed: whether they hold several segments each (data.packing: segment ids).
    padded: whether the model reads their padding (an encoder's rows, an encoder-decoder's
      sources), which a language model's whole rows have none of.
    max_segments: the most segments a packed row holds (data.max_segments; 0: no bound).
    """

    lengths: tuple[int, ...] = ()
    packed: bool = False
    padded: bool = False
    max_segments: int = 0


@dataclasses.dataclass(frozen=True)
class KernelChoice:
    """The attention kernel of a built model.

    requested: `model.attention_kernel` as configured ("auto" or a registered kernel's name).
    kernel: the registered kernel it is on the run's devices.
    fallback: why some of the run's self-attention runs on XLA instead, or None.
    padded_heads: (the heads' width, the width the kernel pads them to) where it pads them
      (`AttentionKernel.pads_heads`), else None.
    max_segments: the bound on a packed row's segments the model's masks carry
      (`SelfMask.max_segments`): the rows' where the kernel takes packed rows so bounded on the
      run's devices, else 0 (packed rows then attend on XLA).
    """

    requested: str
    kernel: str
    fallback: str | None = None
    max_segments: int = 0
    padded_heads: tuple[int, int] | None = None

    def describe(self) -> str:
        return describe_kernel(self.kernel, self.padded_heads)


# Why a kernel that pads heads (`AttentionKernel.pads_heads`) is chosen for narrower ones.
WHY_PADDED = (
    "the devices' matrix unit is as wide as the padded heads, so they take the same matrix passes as on XLA, "
    "whose attention moves every query-key score through memory besides"
)


def describe_kernel(name: str, padded_heads: Sequence[int] | None) -> str:
    """A resolved kernel as a run and its report name it: "splash", or "splash (heads padded
    from 64 to 128 features)"."""
    if not padded_heads:
        return name
    width, padded = padded_heads
    return f"{name} (heads padded from {width} to {padded} features)"


def run_mask_parts(cfg: ModelConfig, rows: SelfAttentionRows) -> frozenset[MaskPart]:
    """The parts of the masks a run's self-attention is under: causal (with its window and
    dilation) for the kinds with causal self-attention, padding and segments as the rows have."""
    parts: set[MaskPart] = set()
    if cfg.kind in TRANSFORMERS:
        parts.add("causal")
        if cfg.window:
            parts.add("window")
            if cfg.dilation > 1:
                parts.add("dilation")
    if rows.padded:
        parts.add("padding")
    if rows.packed:
        parts.add("segments")
    return frozenset(parts)


def resolve(requested: str, dtype: Any, head_width: int, platform: str) -> str:
    """The registered kernel `requested` ("auto" or a kernel's name) means on `platform`'s
    devices ("cpu" | "gpu" | "tpu") for operands of `dtype` and heads `head_width` wide: a named
    kernel where it runs there (else ValueError saying why), for auto the kernel of the highest
    `auto_priority` among those that do, padding the heads for a kernel that pads them."""
    if requested != "auto":
        refusal = kernel(requested).refusal(platform, dtype, head_width, padded=True)
        if refusal is not None:
            anywhere = ["auto", *(k.name for k in ATTENTION_KERNELS.kinds() if not k.build.platforms)]
            raise ValueError(f"model.attention_kernel={requested} {refusal} ({' and '.join(anywhere)} run anywhere)")
        return requested
    fitting = [
        k
        for k in ATTENTION_KERNELS.kinds()
        if k.build.auto_priority is not None and k.build.refusal(platform, dtype, head_width, padded=True) is None
    ]
    if not fitting:
        raise ValueError(f"model.attention_kernel=auto: no registered kernel runs on {platform!r} devices")
    return max(fitting, key=lambda k: k.build.auto_priority).name


def passed_over(requested: str, name: str, dtype: Any, head_width: int, platform: str) -> str | None:
    """For `model.attention_kernel=auto` resolved to `name`: why each kernel made for `platform`'s
    devices that auto prefers to it does not run (cuDNN's on a GPU in 32 bits), or None."""
    if requested != "auto":
        return None
    ranked = kernel(name).auto_priority or 0
    reasons = []
    for k in ATTENTION_KERNELS.kinds():
        if platform in k.build.platforms and (k.build.auto_priority or 0) > ranked:
            refusal = k.build.refusal(platform, dtype, head_width, padded=True)
            reasons.append(f"{k.build.title} {refusal}: {kernel(name).title} runs instead")
    return "; ".join(reasons) or None


def choose_kernel(
    cfg: ModelConfig, dtype: Any, platform: str, rows: SelfAttentionRows, capability: tuple[int, int] | None = None
) -> KernelChoice:
    """`cfg.attention_kernel` for a model of `cfg` whose matmuls run in `dtype` on `platform`'s
    devices (a GPU's of compute `capability`, where known) over `rows`: the kernel (`resolve`)
    and, where it leaves some of the self-attention to XLA (or auto passed over a kernel made
    for these devices), why."""
    name = resolve(cfg.attention_kernel, dtype, cfg.head_width, platform)
    chosen = kernel(name)
    parts = run_mask_parts(cfg, rows)
    fallback = chosen.fallback(parts, rows.lengths, max_segments=rows.max_segments, capability=capability)
    skipped = passed_over(cfg.attention_kernel, name, dtype, cfg.head_width, platform)
    fallback = "; ".join(filter(None, (skipped, fallback))) or None
    packed_here = rows.packed and chosen.packed_refusal(rows.max_segments, capability) is None
    width, multiple = cfg.head_width, chosen.head_multiple
    padded = (width, -(-width // multiple) * multiple) if chosen.pads_heads and width % multiple else None
    return KernelChoice(cfg.attention_kernel, name, fallback, rows.max_segments if packed_here else 0, padded)
