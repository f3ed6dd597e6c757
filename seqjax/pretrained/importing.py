"""`seqjax import-hf CHECKPOINT_DIR --workdir RUN`: a Hugging Face checkpoint directory as a run.

The run's config is the family's model (`gpt2.model_config`, `llama.model_config`), the full
softmax head tied as the checkpoint is, with biases that are not learned (head.learn_bias=false:
0 for every pretrained row, `MASKED_BIAS` for the ids the checkpoint has no token for, which so
are never predicted), and text data encoded by the run's own tokenizer (data.tokenizer=pretrained).
Weights of any float dtype become float32 parameters, exactly.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from seqjax.config import Config, DataConfig, HeadConfig, ModelConfig
from seqjax.pretrained.families import family_of_checkpoint
from seqjax.pretrained.mapping import Tensor, check_tensors, to_seqjax
from seqjax.pretrained.runs import check_new_workdir, write_run
from seqjax.pretrained.specials import checkpoint_tokenizer
from seqjax.pretrained.tensor_files import read_checkpoint

MASKED_BIAS = -1e9  # far below any score: its exp underflows to 0 next to any pretrained row's


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's weights checked against its family's table: `rows` vocabulary rows, the
    output layer `tied` or not, `model` the seqjax config of the same model."""

    family: ModuleType
    model: ModelConfig
    tied: bool
    rows: int
    table: list[Tensor]
    tensors: dict[str, np.ndarray]

    def params(self, rows: Callable[[np.ndarray], np.ndarray] = np.asarray) -> dict:
        """seqjax's parameters {"model", "head"} (float32; the head without its biases), the
        vocabulary tables' rows laid out by `rows` (default: seqjax's ids are the HF rows)."""
        params = to_seqjax(self.table, self.tensors, rows)
        params.setdefault("head", {})
        return params


def checked_checkpoint(config: dict[str, Any], tensors: dict[str, np.ndarray]) -> Checkpoint:
    """The `Checkpoint` of a config.json and its tensors (e.g. a `transformers` model's
    `config.to_dict()` and `state_dict()` as numpy); ValueError as `import_checkpoint`."""
    family = family_of_checkpoint(config)
    model, tied, rows = family.model_config(config)
    table = family.table(model, rows, tied)
    tensors = family.canonical(tensors)
    check_tensors(table, tensors, family.NAME)
    return Checkpoint(family, model, tied, rows, table, tensors)


def import_checkpoint(checkpoint_dir: str, workdir: str, *, echo: Callable[[str], None] = print) -> Config:
    """Writes the run of the checkpoint in `checkpoint_dir` into the new `workdir`; returns its config.

    Raises:
      ValueError: `workdir` holds something, the checkpoint's family is not supported (the
        message lists those that are), a setting has no counterpart, tensors are missing,
        unexpected or of another shape (each named with both shapes), or its special tokens
        cannot be mapped (named). Nothing is written then.
    """
    check_new_workdir(workdir)
    config, tensors = read_checkpoint(checkpoint_dir)
    checkpoint = checked_checkpoint(config, tensors)
    family, model, tied, rows = checkpoint.family, checkpoint.model, checkpoint.tied, checkpoint.rows
    tokenizer, statement = checkpoint_tokenizer(checkpoint_dir, config, rows)
    layout = tokenizer.layout
    params = checkpoint.params(layout.to_seqjax_rows)
    params["head"]["biases"] = np.where(layout.predicted, 0.0, MASKED_BIAS).astype(np.float32)
    data = DataConfig(kind="text", tokenizer="pretrained", tokenizer_from=os.path.abspath(workdir))
    cfg = Config(data=data, model=model, head=HeadConfig(kind="full", tied=tied, learn_bias=False))
    write_run(workdir, cfg, tokenizer, params)
    dtypes = sorted({str(value.dtype) for value in checkpoint.tensors.values()})
    count = sum(int(np.prod(value.shape)) for value in checkpoint.tensors.values())
    echo(
        f"imported {family.NAME} from {checkpoint_dir} into {workdir}: {count:,} weights ({', '.join(dtypes)}, held as "
        f"float32), {model.layers} layers, d_model {model.d_model}, {model.num_heads} heads"
        f"{f' ({model.kv_heads} key/value)' if model.kv_heads else ''}, output layer {'tied' if tied else 'untied'}; "
        f"vocabulary {layout.size} ids for {rows} rows; {statement}"
    )
    return cfg
