"""A run directory's parameters written (at step 0, as a fresh train state) and read back without
its data: what importing and exporting a pretrained model need from `seqjax.training`.

An imported run is an ordinary run: `config.json`, `tokenizer/`, and an Orbax checkpoint whose
state holds the parameters, the optimizer state its config's optimizer starts from, step 0 and
the seed's key, with the metadata `open_run` checks (config, tokenizer fingerprint).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from seqjax import config as config_lib
from seqjax import optimizers as optim
from seqjax.config import Config
from seqjax.contracts import Batch, Head, Model
from seqjax.heads import build_head
from seqjax.models import build_model
from seqjax.training.core.layout import make_mesh
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.state import abstract_state, init_state, placement


def _parts(cfg: Config, vocab_size: int) -> tuple[Model, Head, optax.GradientTransformation, Batch]:
    """Model, head, optimizer and an example batch of an LM of `cfg` (parameters' shapes only)."""
    model = build_model(cfg.model, vocab_size)
    head = build_head(cfg.head, vocab_size, np.zeros(vocab_size, np.int64))
    example = {name: jnp.zeros((1, 2), jnp.int32) for name in ("inputs", "targets")}
    return model, head, optim.make_optimizer(cfg.optim, cfg.train.steps), example


def _check_tree(params: dict, expected: dict) -> None:
    """Raises ValueError naming each leaf whose path or shape differs from the model's own."""
    got = {jax.tree_util.keystr(p): np.shape(x) for p, x in jax.tree_util.tree_leaves_with_path(params)}
    want = {jax.tree_util.keystr(p): tuple(x.shape) for p, x in jax.tree_util.tree_leaves_with_path(expected)}
    problems = [f"{k}: expected {list(want[k])}, got {list(got.get(k, ()))}" for k in want if got.get(k) != want[k]]
    problems += [f"{k}: not a parameter of the model" for k in got if k not in want]
    if problems:
        raise ValueError("the mapped parameters do not fit the model: " + "; ".join(problems))


def check_new_workdir(workdir: str) -> None:
    """A run is only written where none is: the directory must be missing or empty."""
    if os.path.exists(workdir) and (not os.path.isdir(workdir) or os.listdir(workdir)):
        raise ValueError(
            f"--workdir {workdir} must be a new or empty directory, it holds {sorted(os.listdir(workdir))[:5]}"
        )


def write_run(workdir: str, cfg: Config, tokenizer: Any, params: dict[str, Any]) -> None:
    """Writes a run of `cfg` in the new `workdir`: its config, `tokenizer` and a checkpoint at step
    0 whose parameters are `params` ({"model", "head"} of numpy float32 leaves)."""
    check_new_workdir(workdir)
    model, head, optimizer, example = _parts(cfg, tokenizer.vocab.size)
    mesh = make_mesh(cfg.train.mesh)
    state = init_state(model, head, optimizer, cfg.train.seed, example, mesh, cfg.train.sharding)
    _check_tree(params, state.params)
    placed = jax.device_put(params, placement(state).params)
    state = dataclasses.replace(state, params=placed, opt_state=jax.jit(optimizer.init)(placed))
    os.makedirs(workdir, exist_ok=True)
    run = RunDir(workdir)
    run.save_tokenizers(tokenizer)
    run.write_config(cfg)
    meta = {
        "data_position": 0,
        "config": config_lib.to_dict(cfg),
        "tokenizer": run.tokenizer_fingerprint(),
        "store": None,
    }
    checkpointer = run.checkpointer(cfg.train.keep_checkpoints)
    try:
        checkpointer.save(state, meta)
        checkpointer.wait()
    finally:
        checkpointer.close()


def read_run(workdir: str) -> tuple[Config, Any, dict[str, Any], int]:
    """(config, tokenizer, latest parameters as numpy float32, step) of the LM run in `workdir`,
    read without its corpus."""
    run = RunDir(workdir)
    cfg = run.config
    tokenizer = run.tokenizers()
    if tokenizer is None or isinstance(tokenizer, tuple):
        raise ValueError(f"--workdir {workdir} must hold a language model's run with its tokenizer")
    checkpointer = run.checkpointer(cfg.train.keep_checkpoints)
    try:
        step = checkpointer.latest_step()
        if step is None:
            raise ValueError(f"--workdir {workdir} has no checkpoint yet")
        model, head, optimizer, example = _parts(cfg, tokenizer.vocab.size)
        mesh = make_mesh(cfg.train.mesh)
        abstract = abstract_state(model, head, optimizer, example, mesh, cfg.train.sharding)
        state, _ = checkpointer.restore(step, abstract)
    finally:
        checkpointer.close()
    return cfg, tokenizer, jax.tree.map(lambda x: np.asarray(x, np.float32), jax.device_get(state.params)), step
