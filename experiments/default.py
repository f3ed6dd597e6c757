"""The default experiment (`seqjax train` with no arguments): the config defaults.

A 2-layer pre-LN Transformer LM (d_model 128, 4 heads) on the synthetic grammar corpus,
character-level, full softmax, 1000 steps of batch 32 x 64 tokens. The grammar is
generated in code from a seed, so the run needs no files; at the end it samples 256
sentences and reports the fraction the grammar accepts.
"""

from seqjax.config import Config


def get_config() -> Config:
    return Config()
