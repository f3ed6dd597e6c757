"""Character-level Llama-style Transformer LM on Shakespeare.

The corpus is read under the data root, `$SEQJAX_DATA` (or `--set data.root=DIR`), from
`lm/shakespeare/{train,valid,test}.txt` (the splits of `shakespeare_lstm.py`):

    SEQJAX_DATA=/path/to/corpora seqjax train --config experiments/modern_lm.py

The blocks of Llama: rotary positions, RMSNorm before each sublayer, SwiGLU feed-forward
(d_ff 512 ≈ 8/3 · d_model), grouped-query attention (6 query heads sharing 2 key/value
heads), no biases; 4 layers of d_model 192. Training rows are 256 characters of whole lines
packed with segment ids (`data.packing`), so a line is learned from its own start; 16 rows
per step is the token budget of `shakespeare_transformer.py` (4,096 per step, 1,200 steps).
Evaluation scores the stream as every LM config does, each line then read after the lines
before it.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shakespeare_lstm import shakespeare_data  # noqa: E402

from seqjax.config import Config, ModelConfig, OptimConfig, TrainConfig  # noqa: E402


def get_config() -> Config:
    return Config(
        data=shakespeare_data(seq_len=256, packing=True),
        model=ModelConfig(
            kind="transformer",
            d_model=192,
            layers=4,
            num_heads=6,
            kv_heads=2,
            d_ff=512,
            dropout=0.1,
            positions="rope",
            norm_type="rmsnorm",
            mlp="swiglu",
            bias=False,
            max_len=256,
        ),
        optim=OptimConfig(learning_rate=2e-3, warmup_steps=100, schedule="cosine"),
        train=TrainConfig(steps=1200, batch_size=16, eval_every=400, checkpoint_every=200, printed_sample_len=200),
    )
