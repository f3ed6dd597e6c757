"""Tiny configs shared by the training tests: seconds of CPU, not minutes."""

from seqjax import config as config_lib
from seqjax.config import Config

TINY = [
    "data.num_train=400",
    "data.num_eval=40",
    "data.seq_len=16",
    "model.d_model=32",
    "model.layers=1",
    "model.heads=2",
    "model.d_ff=64",
    "model.max_len=64",
    "train.batch_size=8",
    "train.steps=4",
    "train.log_every=2",
    "train.eval_every=0",
    "train.checkpoint_every=2",
    "train.samples=2",
    "train.sample_len=12",
    "optim.warmup_steps=1",
]


def tiny_config(*overrides: str) -> Config:
    return config_lib.override(Config(), TINY + list(overrides))
