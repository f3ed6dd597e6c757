"""The sections of an experiment's configuration: one frozen dataclass per concern (data, model,
head, objective, optimizer, training), composed once as `Config`.

Each field carries its description and, where it only means something for some kinds, the family
of kinds that read it (`seqjax.config.kinds`). A field of a few fixed values is typed as their
`Literal`; the kinds of a section are its registry's. The options only one kind reads are a group
named for that kind (`model.rnn_vae.latent_size`, `objective.scheduled_sampling.k`), declared by
the kind where it is registered.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from seqjax.config.fields import OrAuto, option
from seqjax.config.groups import KindSection
from seqjax.config.kinds import ATTENTION_KERNELS, DATA_FORMATS, HEADS, MODELS, OBJECTIVES, OPTIMIZERS

DataKind = Literal["synthetic", "text", "parallel"]
SyntheticTask = Literal["grammar", "oracle", "copy", "reverse", "sort", "addition"]
TokenizerKind = Literal["char", "word", "bpe", "pretrained"]
Cell = Literal["lstm", "gru", "elman"]
Positions = Literal["sinusoidal", "learned", "rope"]
RopeScaling = Literal["none", "llama3"]
Norm = Literal["pre", "post"]
NormType = Literal["layernorm", "rmsnorm"]
Mlp = Literal["gelu", "gelu_exact", "relu", "swiglu"]
Remat = Literal["auto", "none", "dots", "full"]  # auto, then the policies from lightest to heaviest
Proposal = Literal["uniform", "unigram", "log_uniform"]
Schedule = Literal["cosine", "linear", "constant"]
Decay = Literal["all", "matrices"]
Precision = Literal["float32", "bfloat16"]
Sharding = Literal["data", "fsdp", "tensor", "fsdp_tensor"]
StepKind = Literal["jit", "shard_map"]

FILES = ("text", "parallel")  # the data kinds read from files

NEURAL = MODELS.family("neural")
RECURRENT = MODELS.family("recurrent")
RNN_ENCODERS = MODELS.family("rnn_encoder")
ATTENTION = MODELS.family("attention")  # models built of the Transformer blocks
TRANSFORMERS = MODELS.family("causal_attention")
ENCODERS = MODELS.family("encoder_only")  # encoder-only, masked-LM pre-training
CONTEXT = MODELS.family("context")
TIED_HEADS = HEADS.family("tied")
BIASED_HEADS = HEADS.family("word_bias")
SAMPLING_HEADS = HEADS.family("sampling")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    kind: DataKind = option("synthetic", "synthetic (generated in code) | text (a file per split) | parallel (pairs)")
    task: SyntheticTask = option(
        "grammar", "grammar | oracle (LMs) | copy | reverse | sort | addition (seq2seq)", kinds=("synthetic",)
    )
    root: str = option(
        "",
        "directory that relative train/valid/test paths are under ('': $SEQJAX_DATA, else the working directory)",
        kinds=FILES,
    )
    train: str = option(
        "",
        "text: a file per split; parallel: a prefix per split (PREFIX.SRC, PREFIX.TGT), or a file of pairs in records "
        "(jsonl, parquet); a file may be a glob of shards (train-*.parquet), read in sorted order as one",
        kinds=FILES,
    )
    valid: str = option("", "as train, for the validation split", kinds=FILES)
    test: str = option("", "as train, for the test split", kinds=FILES)
    format: str = option(
        "lines",
        "how a corpus file is read: lines (one text a line) | jsonl (JSON Lines) | parquet; jsonl and parquet hold "
        "a parallel split's pairs in one file of records; gzip and zstd files are read as they are",
        kinds=FILES,
        choices=DATA_FORMATS,
    )
    text_field: str = option(
        "text",
        "jsonl, parquet: the field of a record holding its text (a text corpus's, an input to generate from); "
        "a dot reaches into a nested record",
        kinds=FILES,
    )
    store: str = option(
        "",
        "directory of the corpus's token store (seqjax prepare); '': a cache directory under $SEQJAX_CACHE, else "
        "~/.cache/seqjax, named by the tokenization config",
        kinds=FILES,
    )
    src: str = option("en", "parallel: the source language suffix", kinds=("parallel",))
    tgt: str = option("de", "parallel: the target language suffix", kinds=("parallel",))
    src_field: str = option(
        "",
        "parallel jsonl, parquet: the field of a record holding the source text ('': the one named data.src; "
        "Hugging Face translation datasets: translation.<src>)",
        kinds=("parallel",),
    )
    tgt_field: str = option(
        "",
        "parallel jsonl, parquet: the field holding the target text ('': the one named data.tgt)",
        kinds=("parallel",),
    )
    tokenizer: TokenizerKind = option(
        "char",
        "char | word | bpe (built from the train split) | pretrained (a run's own, as it is: data.tokenizer_from)",
        kinds=FILES,
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
    buckets: tuple[int, ...] = option((16, 32, 64), "seq2seq: padded lengths, the train step compiled once for each")
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
    max_segments: int = option(
        0,
        "data.packing: the most segments (lines or pairs) a packed row holds, a row closing when it has them; "
        "cuDNN's fused attention takes packed rows only with this bound (its per-row arrays are this long); "
        "0: as many as fit",
    )
    num_train: int = option(20000, "examples (seq2seq) or sentences (LM) in the train split", kinds=("synthetic",))
    num_eval: int = option(500, "examples or sentences in each of valid and test", kinds=("synthetic",))
    seed: int = option(0, "seed of the generated data", kinds=("synthetic",))


@dataclasses.dataclass(frozen=True)
class ModelConfig(KindSection):
    kind: str = option("transformer", "", choices=MODELS)
    d_model: int = option(128, "width of embeddings and hidden states", kinds=NEURAL)
    layers: int = option(2, "stacked layers (encoder and decoder each, for seq2seq)", kinds=NEURAL)
    dropout: float = option(0.1, "dropout rate in training", kinds=NEURAL)
    cell: Cell = option("lstm", "lstm | gru | elman", kinds=RECURRENT)
    residual: bool = option(False, "residual connections around the layers after the first", kinds=RECURRENT)
    bidirectional: bool = option(True, "encoder layers run forward and backward (D/2 each)", kinds=RNN_ENCODERS)
    num_heads: int = option(4, "attention heads", kinds=ATTENTION)
    d_ff: int = option(512, "feed-forward hidden width", kinds=ATTENTION)
    positions: Positions = option(
        "sinusoidal",
        "sinusoidal | learned (added to the embeddings) | rope (rotary, turns queries and keys)",
        kinds=ATTENTION,
    )
    rope_base: float = option(10000.0, "rope: pair i of a head turns by position · base^(-2i/Dh)", kinds=ATTENTION)
    rope_scaling: RopeScaling = option(
        "none",
        "rope: none | llama3 (Llama 3.1's frequencies: those of wavelength over rope_original_max_len / "
        "rope_low_freq_factor divided by rope_factor, under rope_original_max_len / rope_high_freq_factor kept, "
        "between them interpolated)",
        kinds=ATTENTION,
    )
    rope_factor: float = option(8.0, "rope_scaling=llama3: what the low frequencies are divided by", kinds=ATTENTION)
    rope_low_freq_factor: float = option(1.0, "rope_scaling=llama3: low_freq_factor", kinds=ATTENTION)
    rope_high_freq_factor: float = option(4.0, "rope_scaling=llama3: high_freq_factor", kinds=ATTENTION)
    rope_original_max_len: int = option(
        8192, "rope_scaling=llama3: the context length the model was pretrained at", kinds=ATTENTION
    )
    max_len: int = option(512, "longest sequence the positions and the KV cache hold", kinds=ATTENTION)
    norm: Norm = option("pre", "pre | post: normalize before or after each residual add", kinds=ATTENTION)
    norm_type: NormType = option("layernorm", "layernorm | rmsnorm (no centring, no bias)", kinds=ATTENTION)
    norm_eps: float = option(1e-6, "epsilon added to the variance (mean square) inside each norm", kinds=ATTENTION)
    scale_embeddings: bool = option(
        True,
        "token embeddings multiplied by √D on input (false: added as they are, as in GPT-2 and Llama)",
        kinds=ATTENTION,
    )
    mlp: Mlp = option(
        "gelu",
        "feed-forward: gelu (tanh approximation) | gelu_exact (erf) | relu | swiglu (silu(x W_gate) · x W_up, each "
        "d_ff wide)",
        kinds=ATTENTION,
    )
    head_dim: int = option(
        0, "width of each attention head (queries, keys, values): 0 = d_model / num_heads", kinds=ATTENTION
    )
    kv_heads: int = option(
        0,
        "key/value heads (grouped-query attention) dividing num_heads: 0 = num_heads, 1 = multi-query",
        kinds=ATTENTION,
    )
    bias: bool = option(True, "biases in the attention projections and feed-forward layers", kinds=ATTENTION)
    qkv_bias: bool = option(
        False,
        "biases in the query, key and value projections whatever model.bias says (with bias=false: Qwen2's "
        "attention, no output or feed-forward biases)",
        kinds=ATTENTION,
    )
    qk_norm: bool = option(
        False,
        "self-attention: an RMSNorm (model.norm_eps, a scale per head feature shared by the heads) of each query "
        "and key head before rope turns them (Qwen3)",
        kinds=ATTENTION,
    )
    window: int = option(0, "self-attention: keys seen per query (sliding window), 0 = all", kinds=TRANSFORMERS)
    dilation: int = option(1, "sliding window: gap between attended keys", kinds=TRANSFORMERS)
    attention_kernel: str = option(
        "auto",
        "teacher-forced self-attention's kernel: auto (the fastest the run's devices and masks allow; the run "
        "says which) or one of the registered kernels (seqjax compile and docs/scaling.md describe each)",
        kinds=ATTENTION,
        choices=OrAuto(ATTENTION_KERNELS),
    )
    scan_layers: bool = option(
        False, "the layer stack as one nn.scan over stacked parameters (compile time flat in depth)", kinds=ATTENTION
    )
    remat: Remat = option(
        "auto",
        "recompute activations in the backward pass: auto (the lightest policy whose compiled train step fits the "
        "run's devices; the run says which) | none | dots (keep matmul outputs without batch dims) | full",
        kinds=ATTENTION,
    )
    context: int = option(4, "nnlm: previous tokens read; ngram: the order - 1", kinds=CONTEXT)
    groups: tuple[Any, ...] = dataclasses.field(default=())  # a kind's own options: `KindSection`
    KINDS = MODELS

    @property
    def head_width(self) -> int:
        """Dh, the width of each attention head: `head_dim`, else d_model / num_heads."""
        return self.head_dim or self.d_model // self.num_heads


@dataclasses.dataclass(frozen=True)
class HeadConfig(KindSection):
    kind: str = option("full", "", choices=HEADS)
    tied: bool = option(False, "share the output word vectors with the (target) input embedding", kinds=TIED_HEADS)
    learn_bias: bool = option(
        True,
        "train the word biases (false: they stay where they start, e.g. an imported model's: 0, and far below "
        "every score for the ids it has no token for)",
        kinds=BIASED_HEADS,
    )
    num_samples: int = option(512, "K samples per step, 0 < K < V", kinds=SAMPLING_HEADS)
    proposal: Proposal = option("log_uniform", "uniform | unigram | log_uniform", kinds=SAMPLING_HEADS)
    power: float = option(1.0, "unigram proposal q ∝ count^power (0.75: word2vec)", kinds=SAMPLING_HEADS)
    unique: bool = option(
        True, "deduplicate the K draws (negative always draws with replacement)", kinds=("sampled", "nce")
    )
    per_row_samples: bool = option(False, "draw K samples per row instead of one set per batch", kinds=SAMPLING_HEADS)
    groups: tuple[Any, ...] = dataclasses.field(default=())
    KINDS = HEADS


@dataclasses.dataclass(frozen=True)
class ObjectiveConfig(KindSection):
    """The objective of a run: `kind`, and each objective's options as a group named for it
    (`objective.scheduled_sampling.k`), of which only `kind`'s is used."""

    kind: str = option("teacher_forcing", "", choices=OBJECTIVES)
    groups: tuple[Any, ...] = dataclasses.field(default=())
    KINDS = OBJECTIVES


@dataclasses.dataclass(frozen=True)
class OptimConfig(KindSection):
    kind: str = option("adamw", "", choices=OPTIMIZERS)
    learning_rate: float = option(3e-3, "peak learning rate")
    schedule: Schedule = option("cosine", "cosine | linear | constant (each after linear warmup)")
    warmup_steps: int = option(100, "steps of linear warmup from 0")
    end_lr_fraction: float = option(0.05, "decay ends at this fraction of the peak")
    weight_decay: float = option(0.01, "decoupled weight decay: each step, learning rate x weight_decay x parameter")
    decay: Decay = option(
        "all",
        "the parameters weight_decay shrinks: all | matrices (weights and embeddings: 2 dimensions or more, not "
        "named bias or scale; biases, norm scales, vectors and scalars are not decayed)",
    )
    clip_norm: float = option(1.0, "global-norm gradient clipping; 0 disables")
    accum_steps: int = option(1, "gradient accumulation: microbatches per optimizer update")
    groups: tuple[Any, ...] = dataclasses.field(default=())
    KINDS = OPTIMIZERS


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    steps: int = option(1000, "optimizer updates of the run")
    batch_size: int = option(32, "global batch, rows")
    seed: int = option(0, "seed of initialization, dropout, sampling and batch order")
    precision: Precision = option("float32", "float32 | bfloat16 (matmuls; parameters and softmax stay float32)")
    mesh: str = option("data:-1", "axis sizes, -1 takes the remaining devices; axes: slice (TPU slices), data, model")
    sharding: Sharding = option("data", "data | fsdp | tensor | fsdp_tensor (docs/scaling.md)")
    step_kind: StepKind = option("jit", "jit (compiler-placed collectives) | shard_map (explicit gradient all-reduce)")
    vocab_parallel: bool = option(False, "the head's loss with the vocabulary split over the model axis")
    distributed: bool = option(False, "join a multi-process run (jax.distributed.initialize)")
    coordinator: str = option("", "HOST:PORT of process 0; '': $JAX_COORDINATOR_ADDRESS or cluster detection")
    num_processes: int = option(0, "0: $JAX_NUM_PROCESSES or cluster detection")
    process_id: int = option(-1, "-1: $JAX_PROCESS_ID or cluster detection")
    heartbeat_timeout: int = option(100, "seconds without heartbeats before a process counts as dead")
    log_every: int = option(20, "steps between logged training metrics")
    loggers: tuple[str, ...] = option(
        ("tensorboard",),
        "where metrics go besides metrics.jsonl: any of tensorboard, wandb (pip install 'seqjax[wandb]'; "
        "WANDB_MODE=offline logs without a network)",
    )
    wandb_project: str = option("seqjax", "the W&B project of a run whose train.loggers include wandb")
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
