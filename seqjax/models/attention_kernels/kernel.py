"""What an attention kernel declares when it registers.

A kernel of teacher-forced self-attention (`model.attention_kernel`) is one module that ends in one
call, `ATTENTION_KERNELS.register("<name>", AttentionKernel(...))`: its function and the facts
everything else reads from the declaration — the devices, operand dtypes and head widths it takes
(`choice.choose_kernel` checks a kernel named in the config against them and lets `auto` pick
among the kernels that fit), the parts of a mask it expresses and the row lengths it tiles (what
it does not express runs on XLA, `dispatch.attend`, and the run says why, `AttentionKernel.fallback`), and
how its calls look in a compiled program (`seqjax compile` counts them,
`seqjax.accelerators.program.fused_attention_calls`).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Collection
from typing import Any, Literal

import jax.numpy as jnp
from jax import Array

from seqjax.config import ATTENTION_KERNELS
from seqjax.models.transformer.masks import SelfMask

# The parts a self-attention mask is made of (`SelfMask`): causal, a sliding window of the causal
# mask, that window dilated, padding (each row's valid prefix), segment ids (packed rows).
MaskPart = Literal["causal", "window", "dilation", "padding", "segments"]
MASK_PARTS: tuple[MaskPart, ...] = typing.get_args(MaskPart)

# What a kernel that lacks a part says, after its title, when the run has that part.
_LACKS: dict[MaskPart, str] = {
    "causal": "has no causal mask: causal self-attention runs on XLA",
    "window": "has no sliding window (model.window > 0): self-attention runs on XLA",
    "dilation": "has no dilated window (model.dilation > 1): self-attention runs on XLA",
    "padding": "takes no padding: padded rows attend on XLA",
    "segments": "takes no segment ids: packed rows (data.packing) attend on XLA",
}

# q [B, T, H, Dh], k and v [B, T, K, Dh], the mask -> [B, T, H, Dh] in q's dtype.
AttendFn = Callable[[Array, Array, Array, SelfMask], Array]


@dataclasses.dataclass(frozen=True)
class CustomCall:
    """How a kernel's calls look in a compiled program's HLO text: custom calls whose
    `custom_call_target` starts with `target` and, where `names` are given, whose instruction is
    named with one of them (Pallas kernels share the target `tpu_custom_call`; the instruction
    is named for the kernel)."""

    target: str
    names: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class AttentionKernel:
    """A kernel of teacher-forced self-attention, as registered.

    Attributes:
      attend: q [B, T, H, Dh], k, v [B, T, K, Dh] (K dividing H), mask -> [B, T, H, Dh] in q's
        dtype; called only with the masks and row lengths the kernel expresses.
      title: how a notice names it ("the splash kernel").
      masks: the parts of a mask it expresses; a mask with another part runs on XLA.
      platforms: the devices it runs on ("gpu", "tpu"); () for any.
      dtypes: the operand dtypes it takes, by name ("bfloat16"); () for any.
      head_multiple, max_head: the head widths Dh it takes: multiples of head_multiple, up to
        max_head (0: no bound).
      pads_heads: narrower heads are padded with zeros to a multiple of head_multiple, named
        or chosen by `auto`. Declare it only where the devices' matrix unit is head_multiple
        wide: a narrower head then fills the same matrix passes padded or not, in XLA's
        attention as in the kernel's, and XLA's moves every query-key score through memory
        besides, so the padded kernel's estimate is never the slower.
      row_multiple: the tokens it tiles rows by; rows of another length run on XLA.
      bounded_segments: it takes packed rows as each segment's length and offset, arrays as
        long as the most segments a row holds: only with that bound (`data.max_segments`).
      packed_capability: the least CUDA compute capability of a GPU on which it takes packed
        rows (None: any it runs on).
      auto_priority: `model.attention_kernel=auto` takes, of the kernels that fit the run's
        devices, dtype and head width, the one of the highest priority (the first registered of
        equals); None: only a config that names it gets it.
      hlo: how its calls look in a compiled program, or None where XLA compiles it to ordinary
        instructions.
    """

    attend: AttendFn
    title: str
    masks: frozenset[MaskPart] = frozenset(MASK_PARTS)
    platforms: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    head_multiple: int = 1
    max_head: int = 0
    pads_heads: bool = False
    row_multiple: int = 1
    bounded_segments: bool = False
    packed_capability: tuple[int, int] | None = None
    auto_priority: int | None = None
    hlo: CustomCall | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.masks) - set(MASK_PARTS))
        if unknown:
            raise ValueError(f"an attention kernel's masks must be among {', '.join(MASK_PARTS)}, got {unknown}")

    def refusal(self, platform: str, dtype: Any, head_width: int, *, padded: bool = False) -> str | None:
        """Why the kernel cannot run on `platform`'s devices with operands of `dtype` and heads
        `head_width` wide (`padded`: where it pads narrower heads, as it does when named), or
        None where it can."""
        if self.platforms and platform not in self.platforms:
            needs = " or ".join(p.upper() for p in self.platforms)
            return f"needs a {needs}, but the run's devices are {platform!r}"
        if self.dtypes and jnp.dtype(dtype).name not in self.dtypes:
            return f"takes {' or '.join(self.dtypes)} operands (train.precision), got {jnp.dtype(dtype).name}"
        unpadded = head_width % self.head_multiple and not (padded and self.pads_heads)
        if unpadded or (self.max_head and head_width > self.max_head):
            multiple = f"a multiple of {self.head_multiple}" if self.head_multiple > 1 else ""
            bound = f"at most {self.max_head}" if self.max_head else ""
            rule = " and ".join(filter(None, (multiple, bound)))
            return f"takes heads (model.head_dim, else d_model / num_heads) of {rule} features, got {head_width}"
        return None

    def fallback(
        self,
        parts: Collection[MaskPart],
        lengths: Collection[int],
        *,
        max_segments: int = 0,
        capability: tuple[int, int] | None = None,
    ) -> str | None:
        """Why self-attention under masks of `parts` over rows of `lengths` tokens, packed rows
        holding at most `max_segments` segments (0: no bound), runs on XLA rather than on this
        kernel on a GPU of compute `capability` (None: not a GPU, or not known), one clause per
        reason, or None where it runs all of it."""
        reasons = [f"{self.title} {_LACKS[part]}" for part in MASK_PARTS if part in parts and part not in self.masks]
        if "segments" in parts and "segments" in self.masks:
            refusal = self.packed_refusal(max_segments, capability)
            if refusal is not None:
                reasons.append(f"{self.title} {refusal}: packed rows (data.packing) attend on XLA")
        untiled = sorted({n for n in lengths if n % self.row_multiple})
        if untiled:
            rows = ", ".join(map(str, untiled))
            reasons.append(
                f"{self.title} tiles rows by {self.row_multiple} tokens: rows of {rows} tokens attend on XLA"
            )
        return "; ".join(reasons) or None

    def packed_refusal(self, max_segments: int, capability: tuple[int, int] | None) -> str | None:
        """Why the kernel does not take packed rows of at most `max_segments` segments (0: no
        bound) on a GPU of compute `capability`, or None where it does."""
        if self.packed_capability and capability is not None and capability < self.packed_capability:
            least, have = (".".join(map(str, c)) for c in (self.packed_capability, capability))
            return f"takes packed rows on GPUs of compute capability {least} or newer, the run's is {have}"
        if self.bounded_segments and max_segments <= 0:
            return "takes packed rows only with a bound on their segments (data.max_segments, e.g. 32)"
        return None

    def expresses(self, mask: SelfMask, length: int) -> bool:
        """Whether the kernel runs `mask` over rows of `length` tokens (else XLA does); packed
        rows by the bound the mask carries (the model was built for its devices' capability)."""
        return self.fallback(mask_parts(mask), (length,), max_segments=mask.max_segments) is None


def mask_parts(mask: SelfMask) -> frozenset[MaskPart]:
    """The parts `mask` has (a window and its dilation are parts of a causal mask only)."""
    parts: set[MaskPart] = set()
    if mask.causal:
        parts.add("causal")
        if mask.window:
            parts.add("window")
            if mask.dilation > 1:
                parts.add("dilation")
    if mask.valid is not None:
        parts.add("padding")
    if mask.segments is not None:
        parts.add("segments")
    return frozenset(parts)


def kernel(name: str) -> AttentionKernel:
    """The registered kernel `name` (ValueError naming the registered ones if none is)."""
    declared: AttentionKernel = ATTENTION_KERNELS[name].build
    return declared
