"""Typed experiment configuration: one frozen dataclass per concern, composed once.

An experiment file defines `get_config() -> Config`; the CLI applies `--set a.b=c`
overrides on top with `override`, which checks every key and value type on the host.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any


@dataclasses.dataclass(frozen=True)
class DataConfig:
    kind: str = "synthetic"  # synthetic | text | parallel
    task: str = "grammar"  # synthetic task: grammar | oracle (LMs) | copy | reverse | sort | addition (seq2seq)
    train: str = ""  # text: a file per split; parallel: a prefix per split (PREFIX.SRC, PREFIX.TGT)
    valid: str = ""
    test: str = ""
    src: str = "en"
    tgt: str = "de"
    tokenizer: str = "char"  # char | word | bpe
    vocab_size: int = 0  # upper bound on the vocabulary (0: no bound; bpe requires one)
    min_count: int = 1  # word tokenizer: rarer words become <unk>
    seq_len: int = 64  # LM: tokens per training row (concatenate-and-chunk)
    max_len: int = 63  # parallel/seq2seq: longest source or target kept, in tokens (+1 for BOS/EOS fits buckets[-1])
    buckets: tuple[int, ...] = (16, 32, 64)  # seq2seq: padded lengths, bounded recompilation
    num_train: int = 20000  # synthetic: examples (seq2seq) or sentences (LM) per split
    num_eval: int = 500
    seed: int = 0  # synthetic data generation


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    kind: str = "transformer"  # rnn | transformer | nnlm | ngram | rnn_seq2seq | attention_seq2seq | transformer_seq2seq
    cell: str = "lstm"  # rnn: lstm | gru | elman
    d_model: int = 128
    layers: int = 2
    heads: int = 4
    d_ff: int = 512
    dropout: float = 0.1
    positions: str = "sinusoidal"  # sinusoidal | learned
    max_len: int = 512  # longest sequence a Transformer (positions, KV cache) handles
    residual: bool = False  # rnn: residual connections around layers after the first
    norm: str = "pre"  # transformer: pre | post (LayerNorm before or after each residual add)
    window: int = 0  # transformer self-attention: keys seen per query (sliding window), 0 = all
    dilation: int = 1  # transformer sliding window: gap between attended keys
    context: int = 4  # nnlm: previous tokens whose embeddings are concatenated; ngram: the order − 1
    direct: bool = False  # nnlm: direct (linear) connections from the context to the hidden
    bidirectional: bool = True  # rnn seq2seq encoders: forward and backward layers
    attention: str = "additive"  # attention_seq2seq score: additive | dot | general


@dataclasses.dataclass(frozen=True)
class HeadConfig:
    kind: str = "full"  # full | sampled | nce | negative | class | tree | adaptive
    tied: bool = False  # share the output weights with the (target) input embedding
    chunk_size: int = 0  # full softmax: 0 materializes [N, V] logits, else blocks of the vocabulary
    num_samples: int = 512  # sampled | nce | negative: K samples per step, 0 < K < V
    proposal: str = "log_uniform"  # sampled | nce | negative: uniform | unigram | log_uniform
    power: float = 1.0  # unigram proposal q ∝ count^power (0.75: word2vec)
    unique: bool = True  # sampled | nce: deduplicate the K draws (negative always draws with replacement)
    per_row_samples: bool = False  # draw K samples per row instead of one set per batch
    remove_accidental_hits: bool = True  # sampled: a sample equal to the target is not a negative
    log_normalizer: float = 0.0  # nce: log Z (the initial value when learned)
    learn_normalizer: bool = False  # nce: learn log Z instead of fixing it
    tree: str = "huffman"  # tree: huffman | balanced
    num_classes: int = 0  # class: number of classes, 0 for ceil(sqrt(V))
    cutoffs: tuple[int, ...] = ()  # adaptive: increasing, < V: shortlist end, then cluster starts
    div_value: float = 4.0  # adaptive: tail cluster i projects to D / div_value^i


@dataclasses.dataclass(frozen=True)
class ObjectiveConfig:
    # teacher_forcing | scheduled_sampling | random_replacement | gradient_penalty | reinforce | mixer | minimum_risk
    kind: str = "teacher_forcing"
    # scheduled sampling: ε, the probability of feeding the gold token, decays with the step:
    # linear max(eps_min, k − c·step) | exponential k^step | inverse_sigmoid k / (k + e^(step/k))
    schedule: str = "inverse_sigmoid"
    k: float = 200.0  # linear: in (0, 1]; exponential: in (0, 1); inverse_sigmoid: >= 1
    c: float = 1e-4  # linear: decrease of ε per step
    eps_min: float = 0.0  # linear: floor of ε
    feed: str = "argmax"  # the model's own token: argmax | sample | soft (parallel mode: expected embedding)
    mode: str = "auto"  # scan (over the decode step) | parallel (n passes) | auto: scan for RNNs fed tokens
    passes: int = 2  # parallel: model passes, the last one gets the loss
    first_pass_grad: bool = False  # parallel with soft feed: backpropagate through the earlier passes
    # random replacement: per row with sequence_rate, per decoder input with token_rate
    sequence_rate: float = 0.5
    token_rate: float = 0.3
    pool: str = "target"  # replacement tokens: target (the row's own tokens) | vocab (uniform, no specials)
    penalty: float = 0.5  # gradient_penalty: λ of λ·||∂CE/∂(input embeddings)||²
    # sequence level: reinforce | mixer | minimum_risk
    samples: int = 4  # sequences per source (MRT candidates)
    baseline: str = "self_critical"  # reinforce, mixer: self_critical | mean (of the other samples) | none
    mle_weight: float = 0.0  # loss = mle_weight·teacher forcing + (1 − mle_weight)·sequence loss
    delta_start: int = 2  # mixer: Δ = delta_start + delta_growth·floor(step / delta_every) last tokens are RL
    delta_growth: int = 2
    delta_every: int = 1000
    candidates: str = "sample"  # minimum_risk: sample | beam
    alpha: float = 5e-3  # minimum_risk: Q ∝ p^alpha on the candidates


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    learning_rate: float = 3e-3
    schedule: str = "cosine"  # cosine | linear | constant (each after linear warmup)
    warmup_steps: int = 100
    end_lr_fraction: float = 0.05  # decay ends at this fraction of the peak
    weight_decay: float = 0.01
    b1: float = 0.9
    b2: float = 0.98
    clip_norm: float = 1.0  # global-norm clipping; 0 disables
    accum_steps: int = 1  # gradient accumulation: microbatches per optimizer update


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    steps: int = 1000
    batch_size: int = 32  # global batch, rows
    seed: int = 0
    precision: str = "float32"  # float32 | bfloat16 (matmuls; parameters and softmax stay float32)
    mesh: str = "data:-1"  # axis sizes, -1 takes the remaining devices; axes: data, model
    sharding: str = "data"  # data | fsdp | tensor | fsdp_tensor (docs/scaling.md)
    step_kind: str = "jit"  # jit (compiler-placed collectives) | shard_map (explicit gradient all-reduce)
    vocab_parallel: bool = False  # full-softmax loss with the vocabulary split over the model axis
    distributed: bool = False  # join a multi-process run (jax.distributed.initialize)
    coordinator: str = ""  # HOST:PORT of process 0; "": $JAX_COORDINATOR_ADDRESS or cluster detection
    num_processes: int = 0  # 0: $JAX_NUM_PROCESSES or cluster detection
    process_id: int = -1  # -1: $JAX_PROCESS_ID or cluster detection
    heartbeat_timeout: int = 100  # seconds without heartbeats before a process counts as dead
    log_every: int = 20
    eval_every: int = 500  # 0: only at the end
    eval_batches: int = 0  # 0: the whole split (exact perplexity)
    checkpoint_every: int = 500  # 0: only at the end
    keep_checkpoints: int = 3
    init_from: str = ""  # a run directory whose latest parameters start a fresh run (e.g. RL after MLE)
    samples: int = 4  # generated samples printed at the end
    sample_len: int = 64


@dataclasses.dataclass(frozen=True)
class Config:
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    head: HeadConfig = HeadConfig()
    objective: ObjectiveConfig = ObjectiveConfig()
    optim: OptimConfig = OptimConfig()
    train: TrainConfig = TrainConfig()


def _field_types(cls) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _coerce(text_or_value: Any, kind: Any, key: str) -> Any:
    """Converts a CLI string (or a JSON value) to the annotated type, or raises ValueError."""
    origin = typing.get_origin(kind)
    if origin is tuple:
        (item,) = {a for a in typing.get_args(kind) if a is not Ellipsis}
        if isinstance(text_or_value, str):
            parts = [p for p in text_or_value.replace("(", "").replace(")", "").split(",") if p.strip()]
        else:
            parts = list(text_or_value)
        return tuple(_coerce(p, item, key) for p in parts)
    if origin in (typing.Union, types.UnionType):
        raise TypeError(f"unsupported config type {kind} for {key}")
    value = text_or_value
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            lowered = str(value).strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if kind is str:
            if not isinstance(value, str):
                raise ValueError
            return value
    except ValueError:
        raise ValueError(f"{key} must be {kind.__name__}, got {value!r}") from None
    raise TypeError(f"unsupported config type {kind} for {key}")


def valid_keys(config: Config) -> list[str]:
    return [
        f"{section.name}.{field}"
        for section in dataclasses.fields(config)
        for field in _field_types(type(getattr(config, section.name)))
    ]


def override(config: Config, assignments: list[str]) -> Config:
    """Applies `section.key=value` assignments, each checked against the dataclass types.

    Raises:
      ValueError: malformed assignment, unknown key (the message lists the valid ones), or
        a value that does not convert to the field's type.
    """
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"--set expects key=value, got {assignment!r}")
        section, dot, field = key.partition(".")
        if not dot or section not in {f.name for f in dataclasses.fields(config)}:
            raise ValueError(f"unknown config key {key!r}; valid keys: {', '.join(valid_keys(config))}")
        sub = getattr(config, section)
        types_ = _field_types(type(sub))
        if field not in types_:
            raise ValueError(f"unknown config key {key!r}; valid keys: {', '.join(valid_keys(config))}")
        sub = dataclasses.replace(sub, **{field: _coerce(value, types_[field], key)})
        config = dataclasses.replace(config, **{section: sub})
    return config


def to_dict(config: Config) -> dict[str, Any]:
    return dataclasses.asdict(config)


def from_dict(values: dict[str, Any]) -> Config:
    """Rebuilds a Config from `to_dict` output (e.g. a checkpoint's saved config).

    Unknown keys raise ValueError, so that a config from an incompatible version is refused
    rather than silently half-read.
    """
    config = Config()
    for section, fields in values.items():
        if section not in {f.name for f in dataclasses.fields(config)}:
            raise ValueError(f"unknown config section {section!r} in saved config")
        sub = getattr(config, section)
        types_ = _field_types(type(sub))
        updates = {}
        for field, value in fields.items():
            if field not in types_:
                raise ValueError(f"unknown config key {section}.{field!r} in saved config")
            updates[field] = _coerce(value, types_[field], f"{section}.{field}")
        config = dataclasses.replace(config, **{section: dataclasses.replace(sub, **updates)})
    return config


def dumps(config: Config) -> str:
    return json.dumps(to_dict(config), indent=2)
