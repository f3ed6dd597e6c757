"""Character-level Llama-style Transformer LM on Shakespeare.

The corpus is read under the data root, `$SEQJAX_DATA` (or `--set data.root=DIR`), from
`lm/shakespeare/{train,valid,test}.txt` (the splits of `shakespeare_lstm.py`):

    SEQJAX_DATA=/path/to/corpora seqjax train --config experiments/modern_lm.py

`shakespeare_transformer.py` with the blocks of Llama, its d_model 192, dropout, optimizer
and step count kept: rotary positions, RMSNorm before each sublayer, SwiGLU feed-forward
(d_ff 512 ≈ 8/3 · d_model), grouped-query attention (6 query heads sharing 2 key/value
heads), no biases; 4 layers. Training rows are 256 characters of whole lines packed with
segment ids (`data.packing`), so a line is learned from its own start; 16 rows per step
keep its token budget (4,096 per step, 1,200 steps).
Evaluation scores the stream as every LM config does, each line then read after the lines
before it.
"""

import dataclasses
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shakespeare_transformer  # noqa: E402
from shakespeare_lstm import shakespeare_data  # noqa: E402

from seqjax.config import Config  # noqa: E402

LLAMA_BLOCKS: dict[str, Any] = dict(positions="rope", norm_type="rmsnorm", mlp="swiglu", bias=False)


def get_config() -> Config:
    base = shakespeare_transformer.get_config()
    return dataclasses.replace(
        base,
        data=shakespeare_data(seq_len=256, packing=True),
        model=dataclasses.replace(base.model, layers=4, num_heads=6, kv_heads=2, d_ff=512, **LLAMA_BLOCKS),
        train=dataclasses.replace(base.train, batch_size=16),
    )
