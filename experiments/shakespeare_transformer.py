"""Character-level Transformer LM on Shakespeare.

The corpus is read under the data root, `$SEQJAX_DATA` (or `--set data.root=DIR`), from
`lm/shakespeare/{train,valid,test}.txt` (the splits of `shakespeare_lstm.py`):

    SEQJAX_DATA=/path/to/corpora seqjax train --config experiments/shakespeare_transformer.py

3 pre-LN layers, d_model 192, 4 heads, learned positions, full softmax over the ~70
characters, sequences of 128 characters, 1200 steps of 32 sequences (the LSTM's budget in
tokens). Sized for about 15 minutes on 2 CPU cores.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shakespeare_lstm import shakespeare_data  # noqa: E402

from seqjax.config import Config, ModelConfig, OptimConfig, TrainConfig  # noqa: E402


def get_config() -> Config:
    return Config(
        data=shakespeare_data(),
        model=ModelConfig(
            kind="transformer",
            d_model=192,
            layers=3,
            num_heads=4,
            d_ff=768,
            dropout=0.1,
            positions="learned",
            max_len=256,
        ),
        optim=OptimConfig(learning_rate=2e-3, warmup_steps=100, schedule="cosine"),
        train=TrainConfig(steps=1200, batch_size=32, eval_every=400, checkpoint_every=200, printed_sample_len=200),
    )
