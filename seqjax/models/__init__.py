"""Models: Flax Linen modules mapping tokens to hidden states [B, T, D], used via init/apply.

Each `model.kind` registers itself in its own module (`MODELS.register("rnn", RNNLM, families=...)`,
`seqjax.config.kinds`); importing this package registers the built-in ones. `build_model(cfg,
vocab_size)` validates the config on the host and returns the module. Every neural model follows
`seqjax.contracts.Model` (`embed`, `target_embedding`, `init_decode_state`, `decode_step`,
`has_encoder`, `recurrent`); encoder-decoders (`is_seq2seq(cfg)`) also take `src`/`src_mask`
in `apply` and in `init_decode_state`. The n-gram baseline (`classic.ngram.KneserNeyLM`) is counted
on the host from the train stream instead (`is_trained(cfg)` is False).

The package by job:
  base.py, input_checks.py  what every model shares: the token embedding, the contract's base
                            classes, the host checks of a call's inputs
  transformer/              the Transformer's parts: attention, masks, positions, blocks, the stack
  attention_kernels/        teacher-forced self-attention's kernels, one module each
  recurrent/                recurrent cells, their scanned recurrence, layers and stacks
  matmul/                   the matmul layouts the models share (weight gradients, decode steps)
  language_models/, encoder_decoders/, encoders/, classic/
                            the model kinds, each in a module that registers it
  kinds.py, config_checks.py, build.py
                            facts read from a kind's class, the config's check, `build_model`
"""

from __future__ import annotations

from seqjax.models import language_models  # noqa: F401  (the language models registered first)

# Importing a kind's module registers it: every built-in model kind (the classes) and attention kernel.
from seqjax.models.attention_kernels import cudnn, splash, xla  # noqa: F401
from seqjax.models.attention_kernels.choice import WHY_PADDED, KernelChoice, SelfAttentionRows, describe_kernel
from seqjax.models.build import build_model, kernel_choice
from seqjax.models.classic import ngram
from seqjax.models.classic.ngram import KneserNeyLM
from seqjax.models.classic.nnlm import NNLM
from seqjax.models.config_checks import check_own_options, validate_model_config
from seqjax.models.encoder_decoders.rnn import RNNSeq2Seq
from seqjax.models.encoder_decoders.rnn_attention import AttentionSeq2Seq
from seqjax.models.encoder_decoders.transformer import TransformerSeq2Seq
from seqjax.models.encoders.electra import ElectraEncoder
from seqjax.models.encoders.transformer import TransformerEncoder
from seqjax.models.kinds import (
    ENCODER_KINDS,
    ENCODER_PARTS,
    MODEL_OBJECTIVES,
    SEQ2SEQ_KINDS,
    TRANSFORMER_KINDS,
    generates,
    is_latent,
    is_seq2seq,
    is_trained,
    model_class,
    readable_length,
    takes_pretrained_encoder,
)
from seqjax.models.language_models.bilm import BiLM
from seqjax.models.language_models.rnn import RNNLM
from seqjax.models.language_models.transformer import TransformerLM
from seqjax.models.language_models.vae import RNNVAE

__all__ = [
    "AttentionSeq2Seq",
    "BiLM",
    "ElectraEncoder",
    "KneserNeyLM",
    "NNLM",
    "RNNLM",
    "RNNVAE",
    "RNNSeq2Seq",
    "TransformerLM",
    "TransformerEncoder",
    "TransformerSeq2Seq",
    "KernelChoice",
    "SelfAttentionRows",
    "WHY_PADDED",
    "describe_kernel",
    "ENCODER_KINDS",
    "MODEL_OBJECTIVES",
    "ENCODER_PARTS",
    "SEQ2SEQ_KINDS",
    "TRANSFORMER_KINDS",
    "build_model",
    "check_own_options",
    "generates",
    "is_latent",
    "is_seq2seq",
    "is_trained",
    "kernel_choice",
    "model_class",
    "ngram",
    "readable_length",
    "takes_pretrained_encoder",
    "validate_model_config",
]
