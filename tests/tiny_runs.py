"""The tiny runs the tests train: seconds of CPU, not minutes."""

from seqjax import config as config_lib
from seqjax.config import Config

TINY = [
    "data.num_train=400",
    "data.num_eval=40",
    "data.seq_len=16",
    "model.d_model=32",
    "model.layers=1",
    "model.num_heads=2",
    "model.d_ff=64",
    "model.max_len=64",
    "train.batch_size=8",
    "train.steps=4",
    "train.log_every=2",
    "train.eval_every=0",
    "train.checkpoint_every=0",
    "train.num_printed_samples=0",
    "train.printed_sample_len=12",
    "optim.warmup_steps=1",
]

# A tiny run prints no samples (decoding them compiles a program of its own); a test of what a
# run prints at its end asks for them.
SAMPLES = "train.num_printed_samples=2"


def tiny(*overrides: str) -> list[str]:
    """TINY's keys that apply to the kinds the overrides choose, then the overrides: the
    `--set` list of a tiny run (a key for another kind would be refused)."""
    kinds = config_lib.override(Config(), [o for o in overrides if o.split("=")[0].endswith(".kind")])
    return [a for a in TINY if config_lib.inapplicable(kinds, a.split("=")[0]) is None] + list(overrides)


def tiny_config(*overrides: str) -> Config:
    return config_lib.override(Config(), tiny(*overrides))
