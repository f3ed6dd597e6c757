"""Character-level Transformer LM on Shakespeare (../shared/data/lm/shakespeare, read by path).

4 pre-LN layers, d_model 256, 4 heads, learned positions, full softmax over ~80 characters,
sequences of 128 characters. Budgeted for about 15 minutes on 2 CPU cores.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shakespeare_lstm import shakespeare_data  # noqa: E402

from seqjax.config import Config, ModelConfig, OptimConfig, TrainConfig  # noqa: E402


def get_config() -> Config:
    return Config(
        data=shakespeare_data(),
        model=ModelConfig(kind="transformer", d_model=256, layers=4, heads=4, d_ff=1024, dropout=0.1,
                          positions="learned", max_len=256),
        optim=OptimConfig(learning_rate=1e-3, warmup_steps=200, schedule="cosine"),
        train=TrainConfig(steps=3000, batch_size=32, eval_every=1000, checkpoint_every=500, sample_len=200),
    )
