"""A run compiles its train step for every batch shape it can draw (an encoder-decoder's length
buckets) before its first step, so that nothing is traced or compiled while the progress bar
counts steps: its rate and time left are the steps', not the compiler's."""

import jax
import pytest
from tiny_runs import tiny
from tqdm import tqdm

from seqjax import config as config_lib
from seqjax.config import Config
from seqjax.training import loop

TRACE = "/jax/core/compile/jaxpr_trace_duration"  # every jit cache miss traces, a persistent-cache hit too
# (The loop's other traces are small ops of the checkpointer's, made once per array shape.)
SEQ2SEQ = tiny(
    "data.task=reverse",
    "model.kind=rnn_seq2seq",
    "model.bidirectional=false",
    "data.buckets=8,24",  # lengths 3-21: both buckets hold many pairs, and batches come from either
    "data.max_pair_len=20",
    "train.steps=8",
    "train.eval_every=0",
)


@pytest.mark.slow
def test_every_bucket_is_compiled_before_the_first_step_and_nothing_while_the_bar_runs(tmp_path, monkeypatch, capsys):
    bar_open, traced_in_loop = [False], []

    class Watched(tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            bar_open[0] = True

        def close(self):
            bar_open[0] = False
            super().close()

    def listen(event, seconds, fun_name=None, **_):
        if event == TRACE and bar_open[0] and fun_name == "train_step":
            traced_in_loop.append(seconds)

    monkeypatch.setattr(loop, "tqdm", Watched)
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        loop.train(config_lib.override(Config(), SEQ2SEQ), str(tmp_path))
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert traced_in_loop == []
    assert "compiling the train step for 2 batch shape(s), rows x length: 8x8, 8x24" in capsys.readouterr().out
