"""Word-level LSTM LM on Shakespeare with each softmax head.

The corpus is read under the data root, `$SEQJAX_DATA` (or `--set data.root=DIR`), from
`lm/shakespeare/{train,valid,test}.txt` (the splits of `shakespeare_lstm.py`).

Words with punctuation as separate tokens, the full vocabulary (every train word; unseen
words in valid/test map to <unk>), one LSTM layer of 256 units, sequences of 64 words,
batches of 32 (2,048 words per step), one epoch of the train split, AdamW with warmup and
cosine decay. The head is the only thing that changes between runs:

    SEQJAX_DATA=/path/to/corpora seqjax train --config experiments/shakespeare_words.py --set head.kind=sampled

Validation and test perplexity are exact (every head's normalized log_probs over the whole
vocabulary), never the sampled training loss.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shakespeare_lstm import shakespeare_data  # noqa: E402

from seqjax.config import Config, HeadConfig, ModelConfig, OptimConfig, TrainConfig  # noqa: E402
from seqjax.heads import AdaptiveOptions  # noqa: E402

STEPS_PER_EPOCH = 611  # 1,251,356 train tokens (words, punctuation, </s>) / 2,048 per step; V = 31,022


def get_config() -> Config:
    return Config(
        data=shakespeare_data(tokenizer="word", seq_len=64),
        model=ModelConfig(kind="rnn", cell="lstm", d_model=256, layers=1, dropout=0.1),
        head=HeadConfig(kind="full", num_samples=1024, groups=(AdaptiveOptions(cutoffs=(2000, 10000)),)),
        optim=OptimConfig(learning_rate=3e-3, warmup_steps=50, schedule="cosine"),
        train=TrainConfig(
            steps=STEPS_PER_EPOCH, batch_size=32, eval_every=0, checkpoint_every=0, printed_sample_len=40
        ),
    )
