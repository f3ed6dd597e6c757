"""English→German UI strings: Transformer encoder–decoder.

The corpus is read under the data root, `$SEQJAX_DATA` (or `--set data.root=DIR`), from the
parallel prefixes `mt/gettext-en-de/{train,dev,test}` (files PREFIX.en and PREFIX.de);
`experiments/README.md` describes it:

    SEQJAX_DATA=/path/to/corpora seqjax train --config experiments/gettext_transformer.py

Byte-level BPE of 8,000 symbols per language, pairs longer than 63 tokens dropped from
train only, 3 + 3 pre-LN layers of d_model 256 (4 heads, d_ff 1024), output layer tied to
the target embedding, batches of 64 pairs, teacher forcing, 1,500 steps (about one epoch).
Sized for about 25 CPU-minutes on 2 cores. The other encoder–decoders run on the same data and budget by `--set`:

    seqjax train --config experiments/gettext_transformer.py --set model.kind=attention_seq2seq
"""

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpora import split_paths  # noqa: E402

from seqjax.config import Config, DataConfig, HeadConfig, ModelConfig, OptimConfig, TrainConfig  # noqa: E402


def gettext_data(**changes: Any) -> DataConfig:
    """The gettext en→de splits (prefixes), relative to the data root (data.root, else $SEQJAX_DATA)."""
    return DataConfig(
        kind="parallel",
        **split_paths("mt/gettext-en-de", valid="dev"),
        src="en",
        tgt="de",
        tokenizer="bpe",
        vocab_size=8000,
        max_pair_len=63,
        buckets=(16, 32, 64),
        **changes,
    )


def get_config() -> Config:
    return Config(
        data=gettext_data(),
        model=ModelConfig(
            kind="transformer_seq2seq", d_model=256, layers=3, num_heads=4, d_ff=1024, dropout=0.1, max_len=256
        ),
        head=HeadConfig(kind="full", tied=True),
        optim=OptimConfig(learning_rate=1e-3, warmup_steps=200, schedule="cosine"),
        train=TrainConfig(steps=1500, batch_size=64, eval_every=500, checkpoint_every=500, num_printed_samples=4),
    )
