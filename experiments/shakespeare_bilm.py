"""ELMo's bidirectional LM on character-level Shakespeare: a forward and a backward LSTM LM
trained jointly, sharing the character embedding and the output layer.

The corpus is read under the data root, `$SEQJAX_DATA` (or `--set data.root=DIR`), from
`lm/shakespeare/{train,valid,test}.txt` (the splits of `shakespeare_lstm.py`):

    SEQJAX_DATA=/path/to/corpora seqjax train --config experiments/shakespeare_bilm.py

Each direction is the LSTM of `shakespeare_lstm.py` (2 layers of 256 units), with its data,
optimizer and 1,200 steps, so the forward direction's perplexity compares with that run's;
the summary reports both directions' exact per-character perplexities.
"""

import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shakespeare_lstm  # noqa: E402

from seqjax.config import Config  # noqa: E402
from seqjax.objectives import ObjectiveConfig  # noqa: E402


def get_config() -> Config:
    base = shakespeare_lstm.get_config()
    return dataclasses.replace(
        base,
        model=dataclasses.replace(base.model, kind="bilm"),
        objective=ObjectiveConfig(kind="bidirectional_lm"),
    )
