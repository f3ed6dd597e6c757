"""Character-level LSTM LM on Shakespeare.

The corpus is read under the data root, `$SEQJAX_DATA` (or `--set data.root=DIR`), from
`lm/shakespeare/{train,valid,test}.txt`; `experiments/README.md` describes it:

    SEQJAX_DATA=/path/to/corpora seqjax train --config experiments/shakespeare_lstm.py

2 layers of 256 units, full softmax over the ~70 characters, sequences of 128 characters,
1200 steps of 32 sequences (4.9M characters, about one epoch). Sized for about 15 minutes
on 2 CPU cores; valid = Hamlet, test = Macbeth + The Tempest.
"""

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpora import split_paths  # noqa: E402

from seqjax.config import Config, DataConfig, ModelConfig, OptimConfig, TrainConfig  # noqa: E402


def shakespeare_data(tokenizer: str = "char", **changes: Any) -> DataConfig:
    """The Shakespeare splits, relative to the data root (data.root, else $SEQJAX_DATA)."""
    return DataConfig(
        kind="text", **split_paths("lm/shakespeare", ".txt"), **{"tokenizer": tokenizer, "seq_len": 128, **changes}
    )


def get_config() -> Config:
    return Config(
        data=shakespeare_data(),
        model=ModelConfig(kind="rnn", cell="lstm", d_model=256, layers=2, dropout=0.1),
        optim=OptimConfig(learning_rate=3e-3, warmup_steps=100, schedule="cosine"),
        train=TrainConfig(steps=1200, batch_size=32, eval_every=400, checkpoint_every=200, printed_sample_len=200),
    )
