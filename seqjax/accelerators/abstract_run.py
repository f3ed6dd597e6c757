"""A run's programs compiled for a target's devices without them: the exact train step of the
run (and its eval and decode steps) built from abstract state and batch — ShapeDtypeStructs
carrying shardings on the target's mesh — so no parameter is ever made.

The model, head, objective, optimizer and layout are the run's own (`build_parts`,
`build_train_step`, `make_eval_step`, the decoders), so what compiles here is what `seqjax
train` would run there. The vocabulary is the data's, or, with `vocab_size`, one of that
size with Zipfian counts (what the tree heads are built from) and no data read at all.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.errors import JaxRuntimeError
from jax.sharding import AbstractMesh, Mesh

from seqjax import decoding
from seqjax import optimizers as optim
from seqjax.accelerators import program
from seqjax.config import Config
from seqjax.contracts import SPECIAL_IDS
from seqjax.model_head import init_decode_state, make_step_fn
from seqjax.models import generates, is_seq2seq
from seqjax.placement import under_mesh
from seqjax.training.core.experiment import batch_plan, build_experiment, build_parts
from seqjax.training.core.layout import batch_sharding, batch_shards, make_mesh
from seqjax.training.core.memory import per_device_bytes
from seqjax.training.core.remat import RematChoice, resolve_remat, with_remat
from seqjax.training.core.state import abstract_state
from seqjax.training.core.steps import build_train_step, make_eval_step


@dataclasses.dataclass
class Parts:
    """What the steps are built of (the attributes `build_train_step` reads of an experiment)."""

    model: Any
    head: Any
    objective: Any
    counts: np.ndarray  # [V] training counts of the vocabulary (what the tree heads are built from)
    cfg: Config


def zipf_counts(vocab_size: int) -> np.ndarray:
    """Counts ∝ 1 / rank: the shape of a word vocabulary, for heads built from counts."""
    return np.maximum(1e9 / np.arange(1, vocab_size + 1), 1.0).astype(np.int64)


def build(cfg: Config, mesh: Mesh, vocab_size: int | None = None) -> Parts:
    """The run's model, head and objective on `mesh`, for its data's vocabulary or `vocab_size`."""
    if vocab_size is None:
        exp = build_experiment(cfg, mesh)
        return Parts(exp.model, exp.head, exp.objective, np.asarray(exp.tokenizer.vocab.counts), cfg)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 8:
        raise ValueError(f"--vocab-size must be an integer >= 8, got {vocab_size!r}")
    source = vocab_size if is_seq2seq(cfg.model) else None
    counts = zipf_counts(vocab_size)
    model, head, objective = build_parts(cfg, vocab_size, counts, mesh, source)
    return Parts(model, head, objective, counts, cfg)


def abstract_batch(cfg: Config, mesh: Mesh, split: str = "train") -> dict[str, jax.ShapeDtypeStruct]:
    """The run's largest batch of `split` (`BatchPlan.spec`), sharded over the batch axes of `mesh`."""
    sharding = batch_sharding(mesh)
    spec = batch_plan(cfg).spec(split, row_multiple=batch_shards(mesh) * cfg.optim.accum_steps)
    return {k: jax.ShapeDtypeStruct(shape, dtype, sharding=sharding) for k, (shape, dtype) in spec.items()}


def compile_train(parts: Parts, mesh: Mesh, batch: dict[str, jax.ShapeDtypeStruct]) -> tuple[Any, Any]:
    """The run's train step compiled for `mesh` (an `OutOfMemory` with the compiler's message
    where the compiler itself finds it does not fit the device's memory, as a TPU's does), and
    the abstract state it takes."""
    cfg = parts.cfg
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
    schedule = optim.learning_rate_schedule(cfg.optim, cfg.train.steps)
    state = abstract_state(parts.model, parts.head, optimizer, batch, mesh, cfg.train.sharding)
    step: Any = build_train_step(parts, optimizer, schedule, mesh, state)  # a jitted function: it lowers
    try:
        return step.lower(state, batch).compile(), state
    except JaxRuntimeError as err:
        if "RESOURCE_EXHAUSTED" not in str(err):
            raise
        return OutOfMemory(str(err).splitlines()[0]), state


@dataclasses.dataclass(frozen=True)
class OutOfMemory:
    """A step the compiler refused for the device's memory, with its message."""

    message: str

    def temporaries(self) -> int | None:
        """The temporaries' bytes the message names ("... temporaries (32.87G) exceeds ..."), or None."""
        found = re.search(r"temporaries \(([0-9.]+)([KMGT])\)", self.message)
        if found is None:
            return None
        return int(float(found.group(1)) * 1024 ** " KMGT".index(found.group(2)))


def compile_eval(parts: Parts, mesh: Mesh, params: Any, batch: dict[str, jax.ShapeDtypeStruct]) -> Any:
    """The exact evaluation step (teacher-forced NLL over the whole vocabulary) for `mesh`, on
    `batch`, an evaluation split's (`abstract_batch(cfg, mesh, "valid")`)."""
    step: Any = make_eval_step(parts.model, parts.head, mesh)
    return step.lower(params, batch).compile()


def compile_decode(parts: Parts, mesh: Mesh, params: Any, batch: dict[str, jax.ShapeDtypeStruct]) -> Any | None:
    """Greedy decoding of one batch of rows (every row to data.seq_len tokens, or the longest
    bucket) with the parameters where training keeps them; None for a model without a decode
    step (the encoders)."""
    if not generates(parts.cfg.model):
        return None
    rows, length = batch["mask"].shape
    model, head = parts.model, parts.head
    source = {k: batch[k] for k in ("src", "src_mask") if k in batch}

    def decode(params: Any, source: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
        state = init_decode_state(model, params, rows, length, source or None)
        ids = SPECIAL_IDS
        return decoding.greedy(
            make_step_fn(model, head, params), state, bos_id=ids.bos, eos_id=ids.eos, pad_id=ids.pad, max_len=length
        )

    sharding = batch_sharding(mesh)
    return jax.jit(under_mesh(decode, mesh), out_shardings=(sharding, sharding)).lower(params, source).compile()


def compile_train_under_remat(
    parts: Parts,
    mesh: Mesh,
    batch: dict[str, jax.ShapeDtypeStruct],
    memory_limit: int | None,
    echo: Callable[[str], None],
) -> tuple[Parts, Any, Any, RematChoice | None]:
    """The run's train step compiled under the remat policy `model.remat` resolves to for devices
    that may use `memory_limit` bytes each (`seqjax.training.core.remat`): each policy tried is
    compiled once, and the one chosen is not compiled again.

    Returns:
      (the parts, their model built under the policy; the train step as `compile_train` returns
      it; the abstract state; the choice, None for a model without Transformer blocks).
    """
    tried: dict[str, tuple[Parts, Any, Any]] = {}

    def peak_of(policy: str) -> int | None:
        echo(f"compiling the train step with model.remat={policy}")
        policy_parts = dataclasses.replace(parts, model=with_remat(parts.model, policy))
        train, state = compile_train(policy_parts, mesh, batch)
        tried[policy] = (policy_parts, train, state)
        if isinstance(train, OutOfMemory):
            temporaries = train.temporaries()
            held = per_device_bytes(state.params) + per_device_bytes(state.opt_state)
            return None if temporaries is None else held + temporaries
        return program.memory(train)["peak"]

    platform = mesh.devices.flat[0].platform
    remat = resolve_remat(parts.cfg.model, platform, memory_limit, peak_of)
    if remat is not None and remat.policy in tried:
        return *tried[remat.policy], remat
    if remat is not None:
        parts = dataclasses.replace(parts, model=with_remat(parts.model, remat.policy))
    echo("compiling the train step")
    return parts, *compile_train(parts, mesh, batch), remat


def abstract_run(cfg: Config, devices: Sequence[jax.Device], vocab_size: int | None = None) -> dict[str, Any]:
    """The run on `devices` before anything is compiled: {"mesh", "parts", "state" (abstract),
    "batch" (abstract), "placer" (the abstract state under another mesh and strategy: `Placer`)}.
    Devices of several slices get a `slice` axis of that size unless train.mesh names one."""
    slices = len({getattr(device, "slice_index", 0) for device in devices})
    if slices > 1 and "slice" not in cfg.train.mesh:  # the batch over the slices, the rest within each
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, mesh=f"slice:{slices},{cfg.train.mesh}"))
    mesh = make_mesh(cfg.train.mesh, devices)
    parts = build(cfg, mesh, vocab_size)
    batch = abstract_batch(cfg, mesh)
    optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)

    def placer(on: Mesh | AbstractMesh, strategy: str) -> Any:
        # The batch is read for its shapes only (the parameters' are made from it), not placed.
        shapes = {key: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype) for key, leaf in batch.items()}
        return abstract_state(parts.model, parts.head, optimizer, shapes, on, strategy)  # type: ignore[arg-type]

    state = placer(mesh, cfg.train.sharding)
    return {"mesh": mesh, "parts": parts, "state": state, "batch": batch, "placer": placer}


def compiled_programs(
    cfg: Config,
    devices: Sequence[jax.Device],
    vocab_size: int | None = None,
    *,
    memory_limit: int | None = None,
    echo: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Builds and compiles the run's train, eval and decode steps for `devices` (`abstract_run`,
    then `compile_run`)."""
    return compile_run(abstract_run(cfg, devices, vocab_size), memory_limit=memory_limit, echo=echo)


def compile_run(
    run: dict[str, Any], *, memory_limit: int | None = None, echo: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """Compiles the train, eval and decode steps of an `abstract_run` on devices whose usable
    bytes each, `memory_limit`, `model.remat=auto` is resolved for (None: unknown, `none`).

    Returns:
      the run's keys, "parts" with the model built under the remat policy chosen, and "train",
      "eval", "decode" (compiled programs; decode None for an encoder; train an `OutOfMemory`,
      and the others None, where the compiler refused the train step for the device's memory),
      "remat" (the `RematChoice`, None for a model without Transformer blocks).
    """
    mesh, batch, cfg = run["mesh"], run["batch"], run["parts"].cfg
    parts, train, state, remat = compile_train_under_remat(run["parts"], mesh, batch, memory_limit, echo)
    compiled: dict[str, Any] = {
        **run,
        "parts": parts,
        "state": state,
        "train": train,
        "eval": None,
        "decode": None,
        "remat": remat,
    }
    if isinstance(train, OutOfMemory):
        return compiled
    echo("compiling the eval step")
    compiled["eval"] = compile_eval(parts, mesh, state.params, abstract_batch(cfg, mesh, "valid"))
    echo("compiling the decode step")
    compiled["decode"] = compile_decode(parts, mesh, state.params, batch)
    return compiled
