"""The registries of seqjax's kinds, one per config key that names code, with the families of
shared options each declares. A kind registers itself in its own module (`MODELS.register("rnn",
RNNLM, families=("neural", "recurrent"))`); these tables are the only list of kinds there is."""

from __future__ import annotations

from seqjax.config.registry import Registry

MODELS = Registry(
    "model.kind",
    {
        "neural": "d_model, layers, dropout: every model trained by gradient steps",
        "recurrent": "the cell and residual connections of RNN layers",
        "rnn_encoder": "a bidirectional RNN encoder",
        "attention": "the Transformer blocks: heads, feed-forward, positions, norms, kernels",
        "causal_attention": "causal self-attention, with its sliding window and packed segments",
        "encoder_only": "encoders without a decode step, pre-trained by masked-token objectives",
        "context": "a fixed window of previous tokens",
    },
)
HEADS = Registry(
    "head.kind",
    {
        "tied": "output rows that are words, so they can share the input embedding",
        "word_bias": "a bias per word, trained or frozen",
        "sampling": "K negatives drawn from a proposal per step",
        "vocab_parallel": "train.vocab_parallel: the training loss split over the vocabulary (`vocab_parallel`)",
    },
)
OBJECTIVES = Registry("objective.kind")
# The kernel of teacher-forced self-attention: `models.attention_kernels`.
ATTENTION_KERNELS = Registry("model.attention_kernel")
OPTIMIZERS = Registry("optim.kind")
# How a corpus file is read into text records: `data.formats`.
DATA_FORMATS = Registry("data.format")
