"""`seqjax import-hf CHECKPOINT_DIR --workdir RUN`: a Hugging Face checkpoint directory as a run.

The run's config is the family's model (`gpt2.model_config`, `llama.model_config`), the full
softmax head tied as the checkpoint is, with biases that are not learned (head.learn_bias=false:
0 for every pretrained row, `MASKED_BIAS` for the ids the checkpoint has no token for, which so
are never predicted), and text data encoded by the run's own tokenizer (data.tokenizer=pretrained).
Weights of any float dtype become float32 parameters, exactly.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from seqjax.config import Config, DataConfig, HeadConfig
from seqjax.pretrained.families import family_of_checkpoint
from seqjax.pretrained.mapping import check_tensors, to_seqjax
from seqjax.pretrained.runs import check_new_workdir, write_run
from seqjax.pretrained.specials import checkpoint_tokenizer
from seqjax.pretrained.tensor_files import read_checkpoint

MASKED_BIAS = -1e9  # far below any score: its exp underflows to 0 next to any pretrained row's


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
    family = family_of_checkpoint(config)
    model, tied, rows = family.model_config(config)
    table = family.table(model, rows, tied)
    tensors = family.canonical(tensors)
    check_tensors(table, tensors, family.NAME)
    tokenizer, statement = checkpoint_tokenizer(checkpoint_dir, config, rows)
    layout = tokenizer.layout
    params = to_seqjax(table, tensors, layout.to_seqjax_rows)
    params.setdefault("head", {})["biases"] = np.where(layout.predicted, 0.0, MASKED_BIAS).astype(np.float32)
    data = DataConfig(kind="text", tokenizer="pretrained", tokenizer_from=os.path.abspath(workdir))
    cfg = Config(data=data, model=model, head=HeadConfig(kind="full", tied=tied, learn_bias=False))
    write_run(workdir, cfg, tokenizer, params)
    dtypes = sorted({str(value.dtype) for value in tensors.values()})
    count = sum(int(np.prod(value.shape)) for value in tensors.values())
    echo(
        f"imported {family.NAME} from {checkpoint_dir} into {workdir}: {count:,} weights ({', '.join(dtypes)}, held as "
        f"float32), {model.layers} layers, d_model {model.d_model}, {model.num_heads} heads"
        f"{f' ({model.kv_heads} key/value)' if model.kv_heads else ''}, output layer {'tied' if tied else 'untied'}; "
        f"vocabulary {layout.size} ids for {rows} rows; {statement}"
    )
    return cfg
