"""Builds everything an experiment needs from its config, validating on the host first.

`build_experiment(cfg, mesh)` reads the data and builds the model, the output head for the
run's layout (the vocabulary-parallel one when train.vocab_parallel) and the objective.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from seqjax import optimizers as optim
from seqjax.checks import check_int
from seqjax.config import OBJECTIVES, Config, check_choices
from seqjax.contracts import Batch, Head, Model, Objective, missing_methods
from seqjax.data import LMData, ParallelData, Tokenizer, holds_pairs, load_data
from seqjax.data.batching import pair_positions
from seqjax.data.batching.line_rows import check_lines_fit
from seqjax.data.batching.loader import IndexedBatches
from seqjax.data.batching.plan import BatchPlan, Rows
from seqjax.data.corpora.sources import to_stderr
from seqjax.data.datasets import Tokenizers
from seqjax.heads import build_head
from seqjax.models import (
    ENCODER_PARTS,
    MODEL_OBJECTIVES,
    SEQ2SEQ_KINDS,
    TRANSFORMER_KINDS,
    SelfAttentionRows,
    build_model,
    generates,
    is_latent,
    is_seq2seq,
    model_class,
    readable_length,
    takes_pretrained_encoder,
)
from seqjax.objectives import build_objective, feeds_gold_only
from seqjax.placement import gpu_capability
from seqjax.training.core.layout import validate_layout

PRECISIONS = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def validate_train(cfg: Config) -> None:
    check_choices(cfg)
    t = cfg.train
    for name in ("steps", "batch_size", "log_every", "keep_checkpoints", "printed_sample_len"):
        if getattr(t, name) < 1:
            raise ValueError(f"train.{name} must be >= 1, got {getattr(t, name)}")
    for name in ("eval_every", "eval_batches", "checkpoint_every", "num_printed_samples"):
        if getattr(t, name) < 0:
            raise ValueError(f"train.{name} must be >= 0, got {getattr(t, name)}")
    if t.precision not in PRECISIONS:
        raise ValueError(f"train.precision must be one of {', '.join(PRECISIONS)}, got {t.precision!r}")
    if t.batch_size % cfg.optim.accum_steps:
        raise ValueError(
            f"train.batch_size must be divisible by optim.accum_steps={cfg.optim.accum_steps}, got {t.batch_size}"
        )
    optim.validate(cfg.optim)
    if t.peak_tflops < 0:
        raise ValueError(
            f"train.peak_tflops must be >= 0 (0: a known device's peak, else measured), got {t.peak_tflops}"
        )
    if t.init_encoder_from and not takes_pretrained_encoder(cfg.model):
        takers = [kind for kind in ENCODER_PARTS if kind in SEQ2SEQ_KINDS]
        raise ValueError(
            f"train.init_encoder_from starts the encoder of a {' or '.join(takers)} run, "
            f"got model.kind={cfg.model.kind!r}"
        )
    if cfg.data.max_tokens and (cfg.data.packing or not is_seq2seq(cfg.model)):
        raise ValueError(
            f"data.max_tokens={cfg.data.max_tokens} fills batches of sentence pairs by length bucket: it needs an "
            f"encoder-decoder without data.packing, got model.kind={cfg.model.kind!r}, data.packing={cfg.data.packing}"
        )
    check_int("data.max_segments", cfg.data.max_segments, minimum=0)
    if cfg.data.max_segments and not cfg.data.packing:
        raise ValueError(f"data.max_segments={cfg.data.max_segments} bounds packed rows: it needs data.packing=true")
    if cfg.data.packing:
        validate_packing(cfg)
    validate_model_objective(cfg)


def validate_model_objective(cfg: Config) -> None:
    """A model with parts only one objective trains (the VAE's posterior, the BiLM's backward
    LM) goes with that objective, and that objective with it (it needs those parts)."""
    needed = MODEL_OBJECTIVES.get(cfg.model.kind)
    owner = {objective: kind for kind, objective in MODEL_OBJECTIVES.items()}.get(cfg.objective.kind)
    if needed != cfg.objective.kind and (needed is not None or owner is not None):
        model, objective = (cfg.model.kind, needed) if needed is not None else (owner, cfg.objective.kind)
        raise ValueError(
            f"model.kind={model} and objective.kind={objective} go together, got model.kind={cfg.model.kind!r} "
            f"with objective.kind={cfg.objective.kind!r}"
        )
    contract = OBJECTIVES[cfg.objective.kind].build.model_contract
    missing = [] if contract is None else missing_methods(model_class(cfg.model), contract)
    if missing:
        raise ValueError(
            f"objective.kind={cfg.objective.kind!r} calls the model's {', '.join(missing)} (a {contract.__name__}), "
            f"which model.kind={cfg.model.kind!r} does not have"
        )


def validate_packing(cfg: Config) -> None:
    """Packed rows need a model that reads segment ids and an objective that feeds gold tokens
    (one feeding its own predictions would carry a segment's last prediction into the next)."""
    if cfg.model.kind not in TRANSFORMER_KINDS:
        raise ValueError(
            f"data.packing needs a Transformer (model.kind in {', '.join(TRANSFORMER_KINDS)}), which keeps "
            f"attention within a segment; got model.kind={cfg.model.kind!r}"
        )
    if not feeds_gold_only(cfg.objective.kind):
        gold = [kind for kind in OBJECTIVES if feeds_gold_only(kind)]
        raise ValueError(
            f"data.packing needs an objective feeding gold tokens only (objective.kind in "
            f"{', '.join(gold)}), got {cfg.objective.kind!r}"
        )


@dataclasses.dataclass
class Experiment:
    """The data, model, head and objective of one run, built and checked from a Config."""

    cfg: Config
    data: LMData | ParallelData
    model: Model
    head: Head
    objective: Objective

    @property
    def is_seq2seq(self) -> bool:
        return is_seq2seq(self.cfg.model)

    @property
    def tokenizer(self) -> Tokenizer:
        """The target-side (or LM) tokenizer: what the head predicts and decoding emits."""
        return self.data.tokenizer

    @property
    def pairs(self) -> ParallelData:
        """The sentence pairs of an encoder-decoder run (`is_seq2seq`)."""
        if not isinstance(self.data, ParallelData):
            raise ValueError(f"model.kind={self.cfg.model.kind!r} is a language model: its data holds no pairs")
        return self.data

    @property
    def stream(self) -> LMData:
        """The token streams of a language-model run."""
        if not isinstance(self.data, LMData):
            raise ValueError(f"model.kind={self.cfg.model.kind!r} is an encoder-decoder: its data holds pairs")
        return self.data

    def train_batches(self, row_multiple: int = 1) -> IndexedBatches:
        """The train split's batches, as the run's `BatchPlan` chooses them (`row_multiple`: what
        a token budget's rows are a multiple of)."""
        return batch_plan(self.cfg).train(self.data, row_multiple)

    def example_batch(self) -> Batch:
        """A batch of one row of two positions with the keys the model reads: the shapes that
        initialize its parameters, which depend on neither B nor T (restoring a run needs no data)."""
        return {key: jnp.asarray(value) for key, value in batch_plan(self.cfg).example().items()}


def batch_plan(cfg: Config) -> BatchPlan:
    """How the run `cfg` cuts its data into batches, for training, evaluation and compiling: its
    model says what a row holds (sentence pairs, one whole line, chunks of the stream) and the
    longest sequence it reads."""
    rows: Rows = "pairs" if is_seq2seq(cfg.model) else "lines" if is_latent(cfg.model) else "stream"
    return BatchPlan.of(cfg, rows, readable_length(cfg.model))


def check_evaluated_pairs_fit(cfg: Config, data: ParallelData) -> None:
    """Evaluation scores every pair of valid and test (none is dropped, unlike training's longer
    than data.max_pair_len): each must fit the positions the model reads, or a run would stop at
    its first evaluation, after training. Raises ValueError naming the split, the count and the
    model.max_len that would hold them."""
    limit = readable_length(cfg.model)
    for split in ("valid", "test"):
        if limit is None or split not in data.splits:
            continue
        positions = pair_positions(*data.splits[split])
        if len(positions) and positions.max() > limit:
            raise ValueError(
                f"data.{split} has {int((positions > limit).sum()):,} pair(s) longer than model.max_len={limit} "
                f"positions (source + </s>, <s> + target; the longest needs {int(positions.max())}), which "
                f"evaluation scores: raise model.max_len to {int(positions.max())} or leave them out of data.{split}"
            )


def output_head(cfg: Config, vocab_size: int, counts: np.ndarray, mesh: Mesh | None) -> nn.Module:
    """The head of `cfg.head`, or, on a `mesh` with train.vocab_parallel, the full softmax
    whose loss splits the vocabulary over the model axis (same parameters, so checkpoints
    move between the two). Without a mesh (decoding a restored run) it is the plain head."""
    head = build_head(cfg.head, vocab_size, counts, cfg.train.precision)
    if mesh is not None and cfg.train.vocab_parallel:
        result: nn.Module = head.vocab_parallel(mesh)  # a head of the vocab_parallel family (validate_layout)
        return result
    return head


def build_experiment(
    cfg: Config,
    mesh: Mesh | None = None,
    tokenizers: Tokenizers = None,
    *,
    fingerprint: str | None = None,
    echo: Callable[[str], None] = to_stderr,
    splits: Sequence[str] | None = None,
) -> Experiment:
    """Validates `cfg` (and its layout on `mesh`, when given), reads the data and builds
    model, head and objective. Writes nothing but the corpus's token store, when it has none.

    tokenizers: a saved run's, as `RunDir.tokenizers` returns them (None: built from the data).
    fingerprint: a resumed run's token store fingerprint (`load_data`).
    echo: where the message that the token store is being prepared goes.
    splits: only these splits of the data, under the saved run's `tokenizers` (`load_data`):
      evaluating or decoding a trained run needs no other.
    """
    validate_train(cfg)
    seq2seq = is_seq2seq(cfg.model)
    if holds_pairs(cfg.data) != seq2seq:
        need = "a language model" if seq2seq else "an encoder-decoder (model.kind in " + ", ".join(SEQ2SEQ_KINDS) + ")"
        raise ValueError(
            f"model.kind={cfg.model.kind!r} does not fit data.kind={cfg.data.kind!r} data.task={cfg.data.task!r}: "
            f"that data needs {need}"
        )
    data = load_data(cfg.data, tokenizers, fingerprint=fingerprint, echo=echo, splits=splits)
    if isinstance(data, ParallelData):
        check_evaluated_pairs_fit(cfg, data)
    elif is_latent(cfg.model):  # its rows are whole lines: each must fit one, in every split
        for split, stream in data.splits.items():
            check_lines_fit(stream, cfg.data.seq_len, f"data.{split}")
    vocab = data.tokenizer.vocab
    src_vocab_size = data.src_tokenizer.vocab.size if isinstance(data, ParallelData) else None
    model, head, objective = build_parts(cfg, vocab.size, np.asarray(vocab.counts), mesh, src_vocab_size)
    return Experiment(cfg, data, model, head, objective)


def attention_rows(cfg: Config) -> SelfAttentionRows:
    """The rows the run's teacher-forced self-attention reads, which its attention kernel is
    chosen for: data.seq_len tokens (a language model) or the buckets' (an encoder-decoder),
    packed with data.packing, padded where the model reads padding (an encoder-decoder's
    sources, an encoder's rows)."""
    seq2seq = is_seq2seq(cfg.model)
    lengths = tuple(cfg.data.buckets) if seq2seq else (cfg.data.seq_len,)
    padded = seq2seq or not generates(cfg.model)
    return SelfAttentionRows(lengths, packed=cfg.data.packing, padded=padded, max_segments=cfg.data.max_segments)


def run_model(cfg: Config, vocab_size: int, device: Any = None, src_vocab_size: int | None = None) -> Model:
    """The run's model for a vocabulary of `vocab_size` words, its matmuls in train.precision, its
    attention kernel chosen for devices like `device` (one of the run's; None: JAX's default
    backend) and the run's rows (`attention_rows`)."""
    dtype = PRECISIONS[cfg.train.precision]
    rows = attention_rows(cfg)
    platform, capability = (None, None) if device is None else (device.platform, gpu_capability(device))
    return build_model(
        cfg.model,
        vocab_size,
        dtype=dtype,
        src_vocab_size=src_vocab_size,
        platform=platform,
        rows=rows,
        capability=capability,
    )


def build_parts(
    cfg: Config, vocab_size: int, counts: np.ndarray, mesh: Mesh | None, src_vocab_size: int | None = None
) -> tuple[Model, Head, Objective]:
    """Model, head and objective of `cfg` for a vocabulary of `vocab_size` words with `counts`
    [V] (the tree heads are built from them), the layout checked on `mesh` when given.

    The model is built for the devices of `mesh` (JAX's default backend without one): that is
    what `model.attention_kernel=auto` is resolved for."""
    device = None
    if mesh is not None:
        validate_layout(cfg, mesh, vocab_size)
        device = mesh.devices.flat[0]
    model = run_model(cfg, vocab_size, device, src_vocab_size)
    return model, output_head(cfg, vocab_size, counts, mesh), build_objective(cfg.objective)
