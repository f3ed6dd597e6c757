"""`model.remat=auto` resolved once, where the train step is compiled: the lightest policy
(none, then dots, then full) whose compiled train step fits one device's memory.

A policy's figure is the compiled step's peak per device (arguments + outputs not aliased to
donated arguments + temporaries), against the memory a run may use there: `seqjax train` reads
its own devices' limit (`device_memory_limit`), `seqjax compile` the target's usable share. A
CPU reports no limit, so there auto is `none` and no other policy is compiled. The config keeps
"auto"; the model is rebuilt with the policy chosen (`with_remat`), which changes no parameter.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import optax
from jax.sharding import Mesh

from seqjax.config import ATTENTION, ModelConfig
from seqjax.config.sections import Remat
from seqjax.contracts import Model
from seqjax.training.core.experiment import Experiment
from seqjax.training.core.layout import batch_sharding
from seqjax.training.core.memory import compiled_memory, format_bytes
from seqjax.training.core.state import abstract_state
from seqjax.training.core.steps import CompiledStep, build_train_step

LIGHTEST_FIRST = tuple(policy for policy in typing.get_args(Remat) if policy != "auto")


@dataclasses.dataclass(frozen=True)
class RematChoice:
    """The policy a run's model is built with.

    requested: `model.remat` as configured; policy: the one built; peaks: the compiled train
    step's peak bytes per device of each policy tried, lightest first (empty when nothing was
    compiled to choose; None: one the compiler refused for the device's memory); limit: the bytes
    per device a run may use (None: the devices, of `platform`, report none).
    """

    requested: str
    policy: str
    peaks: dict[str, int | None] = dataclasses.field(default_factory=dict)
    limit: int | None = None
    platform: str = ""

    def describe(self) -> str:
        """The line a run prints: "remat: auto chose dots (none needs 90.00 GiB of 60.00 GiB, dots 40.00 GiB)"."""
        if self.requested != "auto":
            return f"remat: {self.policy}"
        if self.limit is None:
            why = f"{self.platform} devices report no memory limit: no other policy compiled"
            return f"remat: auto chose {self.policy} ({why})"
        (first, peak), *rest = self.peaks.items()
        tried = "".join(f", {policy} {_figure(peak)}" for policy, peak in rest)
        return f"remat: auto chose {self.policy} ({first} needs {_figure(peak)} of {format_bytes(self.limit)}{tried})"


def _figure(peak: int | None) -> str:
    return "(refused by the compiler)" if peak is None else format_bytes(peak)


def choose_remat(peak_of: Callable[[str], int | None], limit: int) -> RematChoice:
    """The lightest policy whose peak `peak_of(policy)` (bytes per device; None: the compiler
    refused the step for the device's memory) is at most `limit`, asking for no policy past it.

    Raises:
      ValueError: no policy fits; the message lists each one's peak.
    """
    peaks: dict[str, int | None] = {}
    for policy in LIGHTEST_FIRST:
        peak = peaks[policy] = peak_of(policy)
        if peak is not None and peak <= limit:
            return RematChoice("auto", policy, peaks, limit)
    listed = ", ".join(f"{policy} {_figure(peak)}" for policy, peak in peaks.items())
    raise ValueError(
        f"model.remat=auto: no policy's train step fits the {format_bytes(limit)} a device may use, peaks per "
        f"device: {listed} (lower train.batch_size, raise optim.accum_steps or shard the state: train.sharding=fsdp)"
    )


def resolve_remat(
    cfg: ModelConfig, platform: str, limit: int | None, peak_of: Callable[[str], int | None]
) -> RematChoice | None:
    """`cfg.remat` for `platform`'s devices that may use `limit` bytes each (None: unknown, a
    CPU), `peak_of` compiling the train step under a policy; None for a model without
    Transformer blocks."""
    if cfg.kind not in ATTENTION:
        return None
    if cfg.remat != "auto":
        return RematChoice(cfg.remat, cfg.remat)
    if limit is None:
        return RematChoice("auto", "none", platform=platform)
    return choose_remat(peak_of, limit)


def device_memory_limit(device: jax.Device) -> int | None:
    """The bytes `device`'s allocator may hand out (`memory_stats()["bytes_limit"]`), or None
    where it reports none (a CPU: its figure is the host's, shared with everything else)."""
    if device.platform == "cpu":
        return None
    stats = device.memory_stats() or {}
    limit = stats.get("bytes_limit")
    return None if limit is None else int(limit)


def with_remat(model: Model, policy: str) -> Model:
    """`model` (a Linen module of Transformer blocks, holding its `ModelConfig` as `cfg`) rebuilt
    with `model.remat=policy`."""
    module = typing.cast(nn.Module, model)
    return typing.cast(Model, module.clone(cfg=dataclasses.replace(module.cfg, remat=policy)))


def run_remat(
    exp: Experiment,
    optimizer: optax.GradientTransformation,
    schedule: optax.Schedule,
    mesh: Mesh,
    shapes: list[tuple[int, int]],
    example: dict[str, Any],
) -> tuple[Experiment, RematChoice | None, CompiledStep | None]:
    """`exp` with its model built under the policy `seqjax train` runs on `mesh`'s devices, the
    choice (None for a model without Transformer blocks), and the chosen policy's compiled step
    where one was compiled to choose it (for `compile_train_steps`, which then compiles it no
    second time). A policy's peak is its train step compiled from abstract state for the largest
    of the batch `shapes` [rows, length] (the keys and dtypes of `example`, a training batch)."""
    largest = max(shapes, key=lambda shape: shape[0] * shape[1])
    sharding = batch_sharding(mesh)
    batch = {key: jax.ShapeDtypeStruct(largest, value.dtype, sharding=sharding) for key, value in example.items()}
    compiled: dict[str, CompiledStep] = {}

    def peak_of(policy: str) -> int:
        parts = dataclasses.replace(exp, model=with_remat(exp.model, policy))
        state = abstract_state(parts.model, parts.head, optimizer, batch, mesh, exp.cfg.train.sharding)
        step = build_train_step(parts, optimizer, schedule, mesh, state)
        program = step.lower(state, batch).compile()  # type: ignore[attr-defined]
        compiled[policy] = CompiledStep(largest, state, program)
        return compiled_memory(program, state, batch)["peak_estimate"]

    device = mesh.devices.flat[0]
    choice = resolve_remat(exp.cfg.model, device.platform, device_memory_limit(device), peak_of)
    if choice is None:
        return exp, None, None
    return dataclasses.replace(exp, model=with_remat(exp.model, choice.policy)), choice, compiled.get(choice.policy)
