"""The VAE language model (Bowman et al. 2016) on the synthetic grammar, character level:
one LSTM layer each for encoder and decoder, a 16-dimensional z, the full softmax.

This file is the run with KL annealing and word dropout; the collapse baseline is the same
run with `--set objective.vae.schedule=constant objective.vae.word_dropout=0.0`
(experiments/RESULTS.md, "VAE language model").
"""

from seqjax.config import Config, DataConfig, ModelConfig, OptimConfig, TrainConfig
from seqjax.objectives import VAE, ObjectiveConfig


def get_config() -> Config:
    return Config(
        data=DataConfig(kind="synthetic", task="grammar", seq_len=48, num_train=20000, num_eval=500),
        model=ModelConfig(kind="rnn_vae", cell="lstm", d_model=128, layers=1, dropout=0.0, latent_size=16),
        objective=ObjectiveConfig(
            kind="vae", vae=VAE(beta=1.0, schedule="sigmoid", anneal_steps=800, word_dropout=0.4)
        ),
        optim=OptimConfig(learning_rate=3e-3, warmup_steps=50),
        train=TrainConfig(steps=1200, batch_size=32, eval_every=400, checkpoint_every=1200, log_every=100),
    )
