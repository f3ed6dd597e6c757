"""Character-level LSTM LM on Shakespeare (../shared/data/lm/shakespeare, read by path).

2 layers of 256 units, full softmax over the ~70 characters, sequences of 128 characters,
1200 steps of 32 sequences (4.9M characters, about one epoch). Sized for about 15 minutes
on 2 CPU cores; valid = Hamlet, test = Macbeth + The Tempest.
"""

import os

from seqjax.config import Config, DataConfig, ModelConfig, OptimConfig, TrainConfig

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "lm", "shakespeare")


def shakespeare_data(tokenizer: str = "char", **changes) -> DataConfig:
    return DataConfig(
        kind="text",
        train=os.path.join(CORPUS, "train.txt"),
        valid=os.path.join(CORPUS, "valid.txt"),
        test=os.path.join(CORPUS, "test.txt"),
        **{"tokenizer": tokenizer, "seq_len": 128, **changes},
    )


def get_config() -> Config:
    return Config(
        data=shakespeare_data(),
        model=ModelConfig(kind="rnn", cell="lstm", d_model=256, layers=2, dropout=0.1),
        optim=OptimConfig(learning_rate=3e-3, warmup_steps=100, schedule="cosine"),
        train=TrainConfig(steps=1200, batch_size=32, eval_every=400, checkpoint_every=200, sample_len=200),
    )
