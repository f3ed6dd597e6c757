"""Typed experiment configuration: one frozen dataclass per concern, composed once.

An experiment file defines `get_config() -> Config`; the CLI applies `--set a.b=c`
overrides on top with `override`, which checks every key and value type on the host.

Each field carries its description and, where it only means something for some values of
its section's `kind`, those kinds (`option(...)`); a section may also group the options of
one kind in a nested dataclass named for it (`objective.scheduled_sampling.k`). A key set
explicitly for a kind that is not the resolved one is refused: it would be ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from typing import Any

from seqjax import head_options, model_options
from seqjax.kind_section import KindGroup, KindSection, member_types, members
from seqjax.kinds import HEADS, MODELS
from seqjax.objective_config import ObjectiveConfig
from seqjax.options import option

# The names each named choice may take; the registries that map them to code
# (`seqjax.data.tokenizers.TOKENIZER_KINDS`, ...) are keyed by these.
DATA_KINDS = ("synthetic", "text", "parallel")
SYNTHETIC_TASKS = ("grammar", "oracle", "copy", "reverse", "sort", "addition")
TOKENIZERS = ("char", "word", "bpe", "pretrained")
CELLS = ("lstm", "gru", "elman")
PROPOSALS = ("uniform", "unigram", "log_uniform")
# The model and head kinds, and the families of them that read a group of options, are declared in
# `seqjax.kinds`; these are live views of those tables.
MODEL_KINDS = MODELS
HEAD_KINDS = HEADS
NEURAL = MODEL_KINDS.reading("neural")
RECURRENT = MODEL_KINDS.reading("recurrent")
RNN_ENCODERS = MODEL_KINDS.reading("rnn_encoder")
ATTENTION = MODEL_KINDS.reading("attention")  # models built of the Transformer blocks
TRANSFORMERS = MODEL_KINDS.reading("causal_attention")
ENCODERS = MODEL_KINDS.reading("encoder_only")  # encoder-only, masked-LM pre-training
CONTEXT = MODEL_KINDS.reading("context")
TIED_HEADS = HEAD_KINDS.reading("tied")
BIASED_HEADS = HEAD_KINDS.reading("word_bias")
SAMPLING_HEADS = HEAD_KINDS.reading("sampling")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    kind: str = option("synthetic", " | ".join(DATA_KINDS), choices=DATA_KINDS)
    task: str = option(
        "grammar",
        "grammar | oracle (LMs) | copy | reverse | sort | addition (seq2seq)",
        kinds=("synthetic",),
        choices=SYNTHETIC_TASKS,
    )
    root: str = option(
        "",
        "directory that relative train/valid/test paths are under ('': $SEQJAX_DATA, else the working directory)",
        kinds=("text", "parallel"),
    )
    train: str = option(
        "", "text: a file per split; parallel: a prefix per split (PREFIX.SRC, PREFIX.TGT)", kinds=("text", "parallel")
    )
    valid: str = option("", "as train, for the validation split", kinds=("text", "parallel"))
    test: str = option("", "as train, for the test split", kinds=("text", "parallel"))
    store: str = option(
        "",
        "directory of the corpus's token store (seqjax prepare); '': a cache directory under $SEQJAX_CACHE, else "
        "~/.cache/seqjax, named by the tokenization config",
        kinds=("text", "parallel"),
    )
    src: str = option("en", "parallel: the source language suffix", kinds=("parallel",))
    tgt: str = option("de", "parallel: the target language suffix", kinds=("parallel",))
    tokenizer: str = option(
        "char",
        "char | word | bpe (built from the train split) | pretrained (a run's own, as it is: data.tokenizer_from)",
        kinds=("text", "parallel"),
        choices=TOKENIZERS,
    )
    tokenizer_from: str = option(
        "",
        "tokenizer=pretrained: the run directory (e.g. written by seqjax import-hf) whose tokenizer encodes the "
        "corpus; such a corpus may leave data.train empty",
        kinds=("text",),
    )
    vocab_size: int = option(0, "upper bound on the vocabulary (0: no bound; bpe requires one)")
    min_count: int = option(1, "word tokenizer: rarer words become <unk>")
    seq_len: int = option(
        64, "LM: tokens per training row (concatenate-and-chunk; a VAE LM's row is one whole line padded to it)"
    )
    max_pair_len: int = option(
        63, "seq2seq: longest source or target kept in training, in tokens (+1 for BOS/EOS fits buckets[-1])"
    )
    buckets: tuple[int, ...] = option((16, 32, 64), "seq2seq: padded lengths, bounded recompilation")
    max_tokens: int = option(
        0,
        "seq2seq: training batches of a token budget (fairseq's --max-tokens): a batch of bucket L holds "
        "max_tokens // L pairs (rounded down to a multiple of the data devices times optim.accum_steps), so "
        "its shapes are one [rows, L] per bucket; evaluation batches stay train.batch_size pairs; "
        "0: train.batch_size pairs",
    )
    packing: bool = option(
        False,
        "training rows of whole lines (LM) or pairs (seq2seq, rows of buckets[-1]) packed with segment ids and "
        "per-segment positions (Transformers; objectives feeding gold tokens); an LM is then also evaluated "
        "line by line",
    )
    num_train: int = option(20000, "examples (seq2seq) or sentences (LM) in the train split", kinds=("synthetic",))
    num_eval: int = option(500, "examples or sentences in each of valid and test", kinds=("synthetic",))
    seed: int = option(0, "seed of the generated data", kinds=("synthetic",))


@dataclasses.dataclass(frozen=True)
class ModelConfig(KindSection):
    kind: str = option("transformer", "", choices=MODEL_KINDS)
    d_model: int = option(128, "width of embeddings and hidden states", kinds=NEURAL)
    layers: int = option(2, "stacked layers (encoder and decoder each, for seq2seq)", kinds=NEURAL)
    dropout: float = option(0.1, "dropout rate in training", kinds=NEURAL)
    cell: str = option("lstm", " | ".join(CELLS), kinds=RECURRENT, choices=CELLS)
    residual: bool = option(False, "residual connections around the layers after the first", kinds=RECURRENT)
    bidirectional: bool = option(True, "encoder layers run forward and backward (D/2 each)", kinds=RNN_ENCODERS)
    num_heads: int = option(4, "attention heads", kinds=ATTENTION)
    d_ff: int = option(512, "feed-forward hidden width", kinds=ATTENTION)
    positions: str = option(
        "sinusoidal",
        "sinusoidal | learned (added to the embeddings) | rope (rotary, turns queries and keys)",
        kinds=ATTENTION,
    )
    rope_base: float = option(10000.0, "rope: pair i of a head turns by position · base^(-2i/Dh)", kinds=ATTENTION)
    max_len: int = option(512, "longest sequence the positions and the KV cache hold", kinds=ATTENTION)
    norm: str = option("pre", "pre | post: normalize before or after each residual add", kinds=ATTENTION)
    norm_type: str = option("layernorm", "layernorm | rmsnorm (no centring, no bias)", kinds=ATTENTION)
    norm_eps: float = option(1e-6, "epsilon added to the variance (mean square) inside each norm", kinds=ATTENTION)
    scale_embeddings: bool = option(
        True,
        "token embeddings multiplied by √D on input (false: added as they are, as in GPT-2 and Llama)",
        kinds=ATTENTION,
    )
    mlp: str = option(
        "gelu",
        "feed-forward: gelu (tanh approximation) | gelu_exact (erf) | relu | swiglu (silu(x W_gate) · x W_up, each "
        "d_ff wide)",
        kinds=ATTENTION,
    )
    kv_heads: int = option(
        0,
        "key/value heads (grouped-query attention) dividing num_heads: 0 = num_heads, 1 = multi-query",
        kinds=ATTENTION,
    )
    bias: bool = option(True, "biases in the attention projections and feed-forward layers", kinds=ATTENTION)
    window: int = option(0, "self-attention: keys seen per query (sliding window), 0 = all", kinds=TRANSFORMERS)
    dilation: int = option(1, "sliding window: gap between attended keys", kinds=TRANSFORMERS)
    attention_kernel: str = option(
        "auto",
        "auto | xla | cudnn: teacher-forced self-attention's kernel, cudnn = jax.nn.dot_product_attention's fused "
        "cuDNN kernel (auto: on a GPU in 16 bits), xla = grouped matmuls with a hand-written backward, by blocks of "
        "64 queries that skip the keys the causal mask and window hide; masks cudnn cannot express (padding, "
        "segments, dilation) run on xla",
        kinds=ATTENTION,
    )
    scan_layers: bool = option(
        False, "the layer stack as one nn.scan over stacked parameters (compile time flat in depth)", kinds=ATTENTION
    )
    remat: str = option(
        "none",
        "recompute activations in the backward pass: none | dots (keep matmul outputs without batch dims) | full",
        kinds=ATTENTION,
    )
    context: int = option(4, "nnlm: previous tokens read; ngram: the order - 1", kinds=CONTEXT)
    # the options only one kind reads, a group per kind (`model.rnn_vae.latent_size`): `KindSection`
    groups: tuple[Any, ...] = dataclasses.field(default=())
    KINDS = MODEL_KINDS
    rnn_vae = KindGroup("rnn_vae", model_options.RNNVAEOptions)
    electra = KindGroup("electra", model_options.ElectraModelOptions)
    nnlm = KindGroup("nnlm", model_options.NNLMOptions)
    attention_seq2seq = KindGroup("attention_seq2seq", model_options.AttentionSeq2SeqOptions)


@dataclasses.dataclass(frozen=True)
class HeadConfig(KindSection):
    kind: str = option("full", "", choices=HEAD_KINDS)
    tied: bool = option(
        False,
        "share the output word vectors with the (target) input embedding",
        kinds=TIED_HEADS,
    )
    learn_bias: bool = option(
        True,
        "train the word biases (false: they stay where they start, e.g. an imported model's: 0, and far below "
        "every score for the ids it has no token for)",
        kinds=BIASED_HEADS,
    )
    num_samples: int = option(512, "K samples per step, 0 < K < V", kinds=SAMPLING_HEADS)
    proposal: str = option("log_uniform", " | ".join(PROPOSALS), kinds=SAMPLING_HEADS, choices=PROPOSALS)
    power: float = option(1.0, "unigram proposal q ∝ count^power (0.75: word2vec)", kinds=SAMPLING_HEADS)
    unique: bool = option(
        True, "deduplicate the K draws (negative always draws with replacement)", kinds=("sampled", "nce")
    )
    per_row_samples: bool = option(False, "draw K samples per row instead of one set per batch", kinds=SAMPLING_HEADS)
    groups: tuple[Any, ...] = dataclasses.field(default=())  # `head.adaptive.cutoffs`, as the model's
    KINDS = HEAD_KINDS
    full = KindGroup("full", head_options.FullOptions)
    sampled = KindGroup("sampled", head_options.SampledOptions)
    nce = KindGroup("nce", head_options.NCEOptions)
    tree = KindGroup("tree", head_options.TreeOptions)
    class_ = KindGroup("class", head_options.ClassOptions)  # head.class: a Python keyword
    adaptive = KindGroup("adaptive", head_options.AdaptiveOptions)


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    learning_rate: float = option(3e-3, "peak learning rate (AdamW)")
    schedule: str = option("cosine", "cosine | linear | constant (each after linear warmup)")
    warmup_steps: int = option(100, "steps of linear warmup from 0")
    end_lr_fraction: float = option(0.05, "decay ends at this fraction of the peak")
    weight_decay: float = option(0.01, "AdamW decoupled weight decay")
    b1: float = option(0.9, "AdamW beta1")
    b2: float = option(0.98, "AdamW beta2")
    clip_norm: float = option(1.0, "global-norm gradient clipping; 0 disables")
    accum_steps: int = option(1, "gradient accumulation: microbatches per optimizer update")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    steps: int = option(1000, "optimizer updates of the run")
    batch_size: int = option(32, "global batch, rows")
    seed: int = option(0, "seed of initialization, dropout, sampling and batch order")
    precision: str = option("float32", "float32 | bfloat16 (matmuls; parameters and softmax stay float32)")
    mesh: str = option("data:-1", "axis sizes, -1 takes the remaining devices; axes: slice (TPU slices), data, model")
    sharding: str = option("data", "data | fsdp | tensor | fsdp_tensor (docs/scaling.md)")
    step_kind: str = option("jit", "jit (compiler-placed collectives) | shard_map (explicit gradient all-reduce)")
    vocab_parallel: bool = option(False, "full-softmax loss with the vocabulary split over the model axis")
    distributed: bool = option(False, "join a multi-process run (jax.distributed.initialize)")
    coordinator: str = option("", "HOST:PORT of process 0; '': $JAX_COORDINATOR_ADDRESS or cluster detection")
    num_processes: int = option(0, "0: $JAX_NUM_PROCESSES or cluster detection")
    process_id: int = option(-1, "-1: $JAX_PROCESS_ID or cluster detection")
    heartbeat_timeout: int = option(100, "seconds without heartbeats before a process counts as dead")
    log_every: int = option(20, "steps between logged training metrics")
    peak_tflops: float = option(
        0.0,
        "per-device peak TFLOP/s that MFU is against (0: a known device's bf16 peak, else a float32 matmul measured)",
    )
    eval_every: int = option(500, "steps between validation evaluations; 0: only at the end")
    eval_batches: int = option(0, "batches per evaluation; 0: the whole split (exact perplexity)")
    checkpoint_every: int = option(500, "steps between checkpoints; 0: only at the end")
    keep_checkpoints: int = option(3, "checkpoints kept (the newest)")
    init_from: str = option("", "a run directory whose latest parameters start a fresh run (e.g. RL after MLE)")
    init_encoder_from: str = option(
        "",
        "an encoder-only run (masked_lm or electra) whose encoder starts this transformer_seq2seq's encoder",
    )
    num_printed_samples: int = option(4, "generated samples printed at the end of a run")
    printed_sample_len: int = option(64, "tokens generated per printed sample")


@dataclasses.dataclass(frozen=True)
class Config:
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    head: HeadConfig = HeadConfig()
    objective: ObjectiveConfig = ObjectiveConfig()
    optim: OptimConfig = OptimConfig()
    train: TrainConfig = TrainConfig()


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


# Keys of earlier versions, refused with the name that replaced them.
RENAMED = {
    "model.heads": "model.num_heads",
    "data.max_len": "data.max_pair_len",
    "train.samples": "train.num_printed_samples",
    "train.sample_len": "train.printed_sample_len",
    # objective options were one flat section; now a group per objective
    "objective.schedule": "objective.scheduled_sampling.schedule",
    "objective.k": "objective.scheduled_sampling.k",
    "objective.c": "objective.scheduled_sampling.c",
    "objective.eps_min": "objective.scheduled_sampling.eps_min",
    "objective.feed": "objective.scheduled_sampling.feed",
    "objective.mode": "objective.scheduled_sampling.mode",
    "objective.passes": "objective.scheduled_sampling.passes",
    "objective.first_pass_grad": "objective.scheduled_sampling.first_pass_grad",
    "objective.sequence_rate": "objective.random_replacement.sequence_rate",
    "objective.token_rate": "objective.random_replacement.token_rate",
    "objective.pool": "objective.random_replacement.pool",
    "objective.penalty": "objective.gradient_penalty.penalty",
    "objective.samples": (
        "objective.reinforce.sequences_per_source (objective.mixer.sequences_per_source, "
        "objective.minimum_risk.num_candidates)"
    ),
    # the sequences REINFORCE samples per source, not a sampling head's head.num_samples
    "objective.reinforce.num_samples": "objective.reinforce.sequences_per_source",
    "objective.mixer.num_samples": "objective.mixer.sequences_per_source",
    "objective.baseline": "objective.reinforce.baseline (or objective.mixer.baseline)",
    "objective.mle_weight": (
        "objective.reinforce.mle_weight (or objective.mixer.mle_weight, objective.minimum_risk.mle_weight)"
    ),
    "objective.delta_start": "objective.mixer.delta_start",
    "objective.delta_growth": "objective.mixer.delta_growth",
    "objective.delta_every": "objective.mixer.delta_every",
    "objective.candidates": "objective.minimum_risk.search",
    "objective.alpha": "objective.minimum_risk.alpha",
}
# The options of one model or head kind were flat in their section; now a group per kind. A
# saved config (`from_dict`) still reads them, moved into their groups; `--set` names the new key.
MOVED = {
    f"{section}.{name}": f"{section}.{kind}.{name}"
    for section, moves in {
        "model": {
            "rnn_vae": ("latent_size", "feed_latent"),
            "electra": ("generator_layers", "generator_width"),
            "nnlm": ("direct",),
            "attention_seq2seq": ("attention",),
        },
        "head": {
            "full": ("chunk_size", "block_residuals", "z_loss"),
            "sampled": ("remove_accidental_hits",),
            "nce": ("log_normalizer", "learn_normalizer"),
            "tree": ("tree",),
            "class": ("num_classes",),
            "adaptive": ("cutoffs", "div_value", "head_bias"),
        },
    }.items()
    for kind, names in moves.items()
    for name in names
}


def valid_keys(node: Any, prefix: str = "") -> list[str]:
    """Every settable `a.b(.c)` key under a config (or a section of one), in declaration order."""
    keys = []
    for name, _, value in members(node):
        if dataclasses.is_dataclass(value):
            keys += valid_keys(value, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def _did_you_mean(options: list[str]) -> str:
    return f"; did you mean {' or '.join(options)}?" if options else ""


def _unknown_key(config: Config, key: str) -> ValueError:
    if key in RENAMED:
        return ValueError(f"config key {key!r} was renamed to {RENAMED[key]!r}")
    if key in MOVED:
        return ValueError(f"{key} is now {MOVED[key]}, in the group of the one kind that reads it")
    keys = valid_keys(config)
    # A misspelt key, else the same name elsewhere (model.cutoffs -> head.adaptive.cutoffs).
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.8)
    close = close or [k for k in keys if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]]
    return ValueError(
        f"unknown config key {key!r}{_did_you_mean(close)} (`seqjax config` lists every key with its description)"
    )


def _choice_hint(node: Any, prefix: str, name: str, value: str, choices: tuple[str, ...]) -> str:
    """' ; did you mean ...?': a close spelling of `value` among `choices`, or, for a `kind`, the
    kind whose option takes `value` (model.kind=lstm -> model.kind=rnn with model.cell=lstm)."""
    close = difflib.get_close_matches(value, choices, n=2, cutoff=0.75)
    if close or name != "kind":
        return _did_you_mean([f"{prefix}{name}={c}" for c in close])
    for member, field, group in members(node):
        if field is not None:
            applies_to = tuple(field.metadata.get("kinds", ()))
            if value in field.metadata.get("choices", ()) and applies_to:
                return _did_you_mean([f"{prefix}kind={applies_to[0]} with {prefix}{member}={value}"])
        elif dataclasses.is_dataclass(group):  # a kind's group: its option that takes `value`
            for option_field in dataclasses.fields(group):
                if value in option_field.metadata.get("choices", ()):
                    return _did_you_mean([f"{prefix}kind={member} with {prefix}{member}.{option_field.name}={value}"])
    return ""


def check_choices(node: Any, prefix: str = "") -> None:
    """Raises ValueError naming the first key of `node` (a config, or a section of one) whose
    value is not one of its field's choices (`option(choices=...)`), e.g. a model.kind that
    does not exist, with the value likely meant when there is one."""
    for name, field, value in members(node):
        if dataclasses.is_dataclass(value):
            check_choices(value, f"{prefix}{name}.")
            continue
        choices = field.metadata.get("choices", ()) if field is not None else ()
        if choices and value not in choices:
            hint = _choice_hint(node, prefix, name, value, choices)
            raise ValueError(f"{prefix}{name} must be one of {', '.join(choices)}, got {value!r}{hint}")


def _replace(node: Any, assignments: list[tuple[list[str], Any, str]], config: Config, prefix: str = "") -> Any:
    """`node` with each (path, value, key) assignment set, values converted to their annotated
    types. Each dataclass is rebuilt once with all of its assignments, so that options checked
    together (a group's `__post_init__`) can be changed together; a group's check names the
    key it refuses by its full path (`objective.scheduled_sampling.passes must be ...`)."""
    types_ = member_types(type(node))
    updates: dict[str, Any] = {}
    groups: dict[str, list[tuple[list[str], Any, str]]] = {}
    for path, value, key in assignments:
        name = path[0]
        if name not in types_:
            raise _unknown_key(config, key)
        child = getattr(node, name)
        if len(path) == 1:
            if key in MOVED:  # head.tree, the tree head's group, was its option
                raise _unknown_key(config, key)
            if dataclasses.is_dataclass(child):
                raise ValueError(
                    f"{key} is a group of keys, not a value: set one of {', '.join(valid_keys(child, key + '.'))}"
                )
            updates[name] = _coerce(value, types_[name], key)
        elif dataclasses.is_dataclass(child):
            groups.setdefault(name, []).append((path[1:], value, key))
        else:
            raise _unknown_key(config, key)
    for name, group in groups.items():
        updates[name] = _replace(getattr(node, name), group, config, f"{prefix}{name}.")
    try:
        return _rebuilt(node, updates)
    except ValueError as error:
        if not prefix:
            raise
        raise ValueError(f"{prefix}{error}") from None


def _rebuilt(node: Any, updates: dict[str, Any]) -> Any:
    """`node` with `updates` (name -> value, or a kind's options under the kind's name)."""
    fields = {f.name for f in dataclasses.fields(node)}
    groups = {name: value for name, value in updates.items() if name not in fields}
    node = node.with_groups(**groups) if groups else node
    return dataclasses.replace(node, **{name: value for name, value in updates.items() if name in fields})


def inapplicable(config: Config, key: str) -> str | None:
    """Why `key` means nothing under `config`'s kinds (a field declared for other kinds, or a
    group named for another kind), or None when it applies."""
    node: Any = config
    parts = key.split(".")
    for depth, name in enumerate(parts):
        field, child = {member: (f, value) for member, f, value in members(node)}[name]
        owner = ".".join(parts[:depth])
        kind = getattr(node, "kind", None)
        if kind is not None and dataclasses.is_dataclass(child) and name != kind:
            return f"{key} applies to {owner}.kind={name}, not {kind!r}"
        kinds = field.metadata.get("kinds", ()) if field is not None else ()
        if kind is not None and kinds and kind not in kinds:
            return f"{key} applies to {owner}.kind in ({', '.join(kinds)}), not {kind!r}"
        node = child
    return None


def override(config: Config, assignments: list[str]) -> Config:
    """Applies `section.key=value` assignments, each checked against the dataclass types.

    Raises:
      ValueError: malformed assignment, unknown key (the message names the likely meant one),
        a renamed key (the message names the new one), a value that does not convert to the
        field's type or is not one of its choices (`check_choices`, for every key of the
        result), or a key that does not apply to the resolved kind (it would be ignored).
    """
    keys, parsed = [], []
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"--set expects key=value, got {assignment!r}")
        keys.append(key)
        parsed.append((key.split("."), value, key))
    config = _replace(config, parsed, config)
    check_choices(config)
    for key in keys:
        reason = inapplicable(config, key)
        if reason:
            raise ValueError(f"{reason}: it would be ignored")
    return config


def to_dict(config: Any) -> dict[str, Any]:
    """Every key of a config (or a section or group of one), nested by its path."""
    return {name: to_dict(value) if dataclasses.is_dataclass(value) else value for name, _, value in members(config)}


def _from_dict(cls: Any, values: dict[str, Any], prefix: str) -> Any:
    types_ = member_types(cls)
    updates = {}
    for name, value in values.items():
        key = f"{prefix}{name}"
        if key in RENAMED:
            raise ValueError(f"saved config key {key!r} was renamed to {RENAMED[key]!r}; this version cannot read it")
        if name not in types_:
            raise ValueError(f"unknown config key {key!r} in saved config")
        kind = types_[name]
        if dataclasses.is_dataclass(kind):
            if not isinstance(value, dict):
                raise ValueError(f"{key} must be a group of keys in saved config, got {value!r}")
            updates[name] = _from_dict(kind, value, key + ".")
        else:
            updates[name] = _coerce(value, kind, key)
    try:
        return _rebuilt(cls(), updates) if issubclass(cls, KindSection) else cls(**updates)
    except ValueError as error:  # a group's own check names its option; the key is its full path
        if not prefix:
            raise
        raise ValueError(f"{prefix}{error}") from None


def from_dict(values: dict[str, Any]) -> Config:
    """Rebuilds a Config from `to_dict` output (e.g. a checkpoint's saved config).

    Unknown or renamed keys and values outside their choices raise ValueError, so that a
    config from an incompatible version is refused rather than silently half-read.
    """
    config = _from_dict(Config, _moved_into_groups(values), "")
    check_choices(config)
    return config


def _moved_into_groups(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with each key of `MOVED` (a config saved before model and head kinds had groups)
    moved to its key in the group of its kind."""
    moved = {section: dict(keys) if isinstance(keys, dict) else keys for section, keys in values.items()}
    for old, new in MOVED.items():
        section, name = old.split(".")
        keys = moved.get(section)
        # head.tree was the tree's option and is now the tree head's group: only a value moves
        if isinstance(keys, dict) and name in keys and not isinstance(keys[name], dict):
            kind = new.split(".")[1]
            value = keys.pop(name)
            keys[kind] = {**keys.get(kind, {}), name: value}
    return moved


def dumps(config: Config) -> str:
    return json.dumps(to_dict(config), indent=2)
