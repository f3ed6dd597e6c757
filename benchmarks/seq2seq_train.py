"""Training throughput of seqjax's encoder–decoders against PyTorch on the same shapes, in one process.

    python benchmarks/seq2seq_train.py [--quick] [--repeats 5] [--steps 5] [--models a,b]

Three pairs: `rnn_seq2seq` vs encoder nn.LSTM → decoder nn.LSTM started from its final
state; `attention_seq2seq` (additive attention, input feeding) vs nn.LSTMCell stepped in a
Python loop (torch has no module for it); `transformer_seq2seq` vs nn.Transformer. seqjax
runs the library's jitted train step (`make_train_step`: teacher forcing, full softmax,
AdamW with global-norm clipping); torch runs the same update with the same OptimConfig.
Each repeat times `--steps` steps of seqjax and then of torch, round-robin; the table
reports median target tokens/s, the ratio, and each side's fraction of the measured fp32
matmul peak. Writes benchmarks/results/seq2seq_train.md (`--quick`: tiny shapes,
seq2seq_train_quick.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    add_timing_arguments,
    interleaved,
    machine,
    markdown_table,
    matmul_peak,
    parse_names,
    publish,
    step_runner,
    timing,
    torch_or_none,
)

from seqjax.config import HeadConfig, ModelConfig, OptimConfig  # noqa: E402
from seqjax.heads import build_head  # noqa: E402
from seqjax.models import build_model  # noqa: E402
from seqjax.models.recurrent.cells import GATES  # noqa: E402
from seqjax.models.transformer.positions import sinusoidal_positions  # noqa: E402
from seqjax.objectives import TeacherForcing  # noqa: E402
from seqjax.optimizers import learning_rate_schedule, make_optimizer  # noqa: E402
from seqjax.training.core.layout import make_mesh  # noqa: E402
from seqjax.training.core.state import init_state  # noqa: E402
from seqjax.training.core.steps import make_train_step  # noqa: E402

# Both sides take these; constant rate so that no step of the timed window differs.
OPTIM = OptimConfig(warmup_steps=0, schedule="constant")
TOTAL_STEPS = 1000  # the schedule's horizon, which a constant rate ignores


# A torch model: (its nn.Module, forward(src [B, S], inputs [B, T] int64) -> logits [B, T, V]
# float32); torch has no types here, so its modules and tensors are Any.
TorchModel = tuple[Any, Callable[[Any, Any], Any]]


@dataclasses.dataclass(frozen=True)
class Setup:
    """One row's shapes: B rows of S source and T target tokens, one vocabulary V per side."""

    batch: int
    src_len: int
    tgt_len: int
    vocab: int
    cfg: ModelConfig


def _rnn(kind: str, d: int) -> ModelConfig:
    # Library defaults otherwise: LSTM cells, bidirectional encoder (D/2 per direction), additive score.
    return ModelConfig(kind=kind, d_model=d, layers=1, dropout=0.0)


def _transformer(d: int, layers: int, heads: int, d_ff: int, max_len: int) -> ModelConfig:
    return ModelConfig(
        kind="transformer_seq2seq", d_model=d, layers=layers, num_heads=heads, d_ff=d_ff, dropout=0.0, max_len=max_len
    )


SETUPS = {
    "rnn_seq2seq": Setup(32, 32, 32, 8000, _rnn("rnn_seq2seq", 512)),
    "attention_seq2seq": Setup(32, 32, 32, 8000, _rnn("attention_seq2seq", 512)),
    "transformer_seq2seq": Setup(32, 32, 32, 8000, _transformer(512, 3, 8, 2048, 32)),
}
QUICK_SETUPS = {
    "rnn_seq2seq": Setup(4, 8, 8, 200, _rnn("rnn_seq2seq", 32)),
    "attention_seq2seq": Setup(4, 8, 8, 200, _rnn("attention_seq2seq", 32)),
    "transformer_seq2seq": Setup(4, 8, 8, 200, _transformer(32, 1, 2, 64, 8)),
}


def describe(setup: Setup) -> str:
    c = setup.cfg
    shape = f"B={setup.batch} S={setup.src_len} T={setup.tgt_len} D={c.d_model} V={setup.vocab}"
    if c.kind == "transformer_seq2seq":
        return f"{shape} L={c.layers}+{c.layers} H={c.num_heads} F={c.d_ff} {c.norm}-LN"
    return f"{shape} L={c.layers} {c.cell}{' bi-enc' if c.bidirectional else ''}"


def synthetic_batch(setup: Setup, seed: int = 0) -> dict[str, np.ndarray]:
    """src [B, S] / inputs, targets [B, T] int32 ids >= 4 (past the specials); masks float32, all 1:
    full-length rows, so torch needs no packing and the comparison is of the models alone."""
    rng = np.random.default_rng(seed)
    b, s, t, v = setup.batch, setup.src_len, setup.tgt_len, setup.vocab
    return {
        "src": rng.integers(4, v, (b, s)).astype(np.int32),
        "src_mask": np.ones((b, s), np.float32),
        "inputs": rng.integers(4, v, (b, t)).astype(np.int32),
        "targets": rng.integers(4, v, (b, t)).astype(np.int32),
        "mask": np.ones((b, t), np.float32),
    }


def train_flops_per_target_token(setup: Setup) -> float:
    """Matmul FLOPs per target token of one train step: 6 per multiply-add (2 forward, 4 backward).

    Source-side work is spread over the T target tokens (× S/T). Gathers, gates, softmaxes and
    the optimizer are left out: a lower bound on the work, so % of peak understates it.
    """
    c, d, s, t, v = setup.cfg, setup.cfg.d_model, setup.src_len, setup.tgt_len, setup.vocab
    if c.kind == "transformer_seq2seq":
        per_source = c.layers * (
            4 * d * d
            + 2 * d * c.d_ff
            + 2 * s * d  # qkv + out, mlp, scores + values
            + 2 * d * d
        )  # the decoder's cross-attention keys and values
        per_target = c.layers * (
            4 * d * d
            + 2 * d * c.d_ff
            + 2 * t * d  # self-attention (all T keys, masked), mlp
            + 2 * d * d
            + 2 * s * d
        )  # cross query + out, scores + values
    else:
        g, dirs = GATES[c.cell], 2 if c.bidirectional else 1
        width = d // dirs
        per_source = c.layers * dirs * g * width * (d + width)  # input and recurrent kernels
        per_target = c.layers * g * d * (d + d)
        if c.kind == "attention_seq2seq":
            per_source += d * d  # attention keys, once per source
            per_target += g * d * d  # input feeding widens the first layer's input to 2D
            per_target += d * d + 2 * s * d + 2 * d * d  # query, scores + context, combine [c; h]
    return 6.0 * (per_source * s / t + per_target + d * v)


def seqjax_step(setup: Setup) -> tuple[Callable[[int], None], int]:
    """The library's jitted train step on one fixed batch; returns (run n steps, parameter count)."""
    model = build_model(setup.cfg, setup.vocab, src_vocab_size=setup.vocab)
    head = build_head(HeadConfig(kind="full"), setup.vocab, np.ones(setup.vocab, np.int64))
    optimizer = make_optimizer(OPTIM, TOTAL_STEPS)
    mesh = make_mesh("data:1", jax.devices()[:1])
    batch = synthetic_batch(setup)
    state = init_state(model, head, optimizer, 0, batch, mesh)
    step = make_train_step(
        model, head, TeacherForcing(), optimizer, learning_rate_schedule(OPTIM, TOTAL_STEPS), mesh, state
    )
    count = sum(x.size for x in jax.tree.leaves(state.params))
    return step_runner(step, state, jax.device_put(batch)), count


def _decoder_start(final: Any, layers: int) -> Any:
    """nn.LSTM's final h or c [L·dirs, B, W] -> [L, B, dirs·W], directions concatenated
    [forward; backward] per layer as seqjax's RNNEncoder does."""
    per_layer = final.view(layers, -1, *final.shape[1:])
    return per_layer.permute(0, 2, 1, 3).reshape(layers, final.shape[1], -1)


def _torch_encoder(nn: ModuleType, setup: Setup) -> Any:
    c = setup.cfg
    width = c.d_model // 2 if c.bidirectional else c.d_model
    return nn.LSTM(c.d_model, width, c.layers, batch_first=True, bidirectional=c.bidirectional)


def torch_rnn_seq2seq(torch: ModuleType, setup: Setup) -> TorchModel:
    """Sutskever et al.: encoder nn.LSTM, decoder nn.LSTM from its final (h, c), nn.Linear head."""
    nn, c, v = torch.nn, setup.cfg, setup.vocab
    m = nn.ModuleDict(
        {
            "src_embed": nn.Embedding(v, c.d_model),
            "embed": nn.Embedding(v, c.d_model),
            "encoder": _torch_encoder(nn, setup),
            "decoder": nn.LSTM(c.d_model, c.d_model, c.layers, batch_first=True),
            "out": nn.Linear(c.d_model, v),
        }
    )

    def forward(src: Any, inputs: Any) -> Any:
        """src: [B, S], inputs: [B, T] int64 -> logits [B, T, V] float32."""
        _, (h, cell) = m["encoder"](m["src_embed"](src))
        start = (_decoder_start(h, c.layers), _decoder_start(cell, c.layers))
        hidden, _ = m["decoder"](m["embed"](inputs), start)
        return m["out"](hidden)

    return m, forward


def torch_attention_seq2seq(torch: ModuleType, setup: Setup) -> TorchModel:
    """Bahdanau-scored, Luong input-fed decoder written the usual way: nn.LSTMCell per layer
    stepped in a Python loop over target positions, attention over the encoder outputs."""
    nn, c, v, d = torch.nn, setup.cfg, setup.vocab, setup.cfg.d_model
    m = nn.ModuleDict(
        {
            "src_embed": nn.Embedding(v, d),
            "embed": nn.Embedding(v, d),
            "encoder": _torch_encoder(nn, setup),
            "cells": nn.ModuleList([nn.LSTMCell(2 * d if i == 0 else d, d) for i in range(c.layers)]),
            "key_projection": nn.Linear(d, d, bias=False),
            "query_projection": nn.Linear(d, d),
            "score": nn.Linear(d, 1, bias=False),  # the score vector v of vᵀ tanh(W_q h + W_k m)
            "combine": nn.Linear(2 * d, d),
            "out": nn.Linear(d, v),
        }
    )

    def forward(src: Any, inputs: Any) -> Any:
        """src: [B, S], inputs: [B, T] int64 -> logits [B, T, V] float32."""
        memory, (h, cell) = m["encoder"](m["src_embed"](src))
        h, cell = _decoder_start(h, c.layers), _decoder_start(cell, c.layers)
        carries = [(h[i], cell[i]) for i in range(c.layers)]
        keys = m["key_projection"](memory)  # [B, S, D], once per source
        embedded = m["embed"](inputs)
        feed = memory.new_zeros(inputs.shape[0], d)
        outputs = []
        for t in range(inputs.shape[1]):
            x = torch.cat([embedded[:, t], feed], dim=-1)
            for i, layer in enumerate(m["cells"]):
                carries[i] = layer(x, carries[i])
                x = carries[i][0]
            scores = m["score"](torch.tanh(keys + m["query_projection"](x)[:, None])).squeeze(-1)  # [B, S]
            context = torch.bmm(scores.softmax(-1)[:, None], memory)[:, 0]
            feed = torch.tanh(m["combine"](torch.cat([context, x], dim=-1)))
            outputs.append(feed)
        return m["out"](torch.stack(outputs, dim=1))

    return m, forward


def torch_transformer_seq2seq(torch: ModuleType, setup: Setup) -> TorchModel:
    """nn.Transformer with seqjax's choices: GELU (tanh form, flax's default), LayerNorm ε 1e-6,
    √D-scaled embeddings plus the same sinusoidal positions, causal target mask."""
    nn, c, v, d = torch.nn, setup.cfg, setup.vocab, setup.cfg.d_model
    with warnings.catch_warnings():
        # Nested tensors only speed up padded inference; pre-LN layers just cannot use them.
        warnings.filterwarnings("ignore", message="enable_nested_tensor")
        transformer = nn.Transformer(
            d,
            c.num_heads,
            c.layers,
            c.layers,
            c.d_ff,
            dropout=0.0,
            activation=functools.partial(nn.functional.gelu, approximate="tanh"),
            layer_norm_eps=1e-6,
            batch_first=True,
            norm_first=c.norm == "pre",
        )
    if c.norm == "post":  # seqjax's post-LN stacks end on a block's own LayerNorm, with no extra final one
        transformer.encoder.norm = transformer.decoder.norm = None
    m = nn.ModuleDict(
        {
            "src_embed": nn.Embedding(v, d),
            "embed": nn.Embedding(v, d),
            "transformer": transformer,
            "out": nn.Linear(d, v),
        }
    )
    length = max(setup.src_len, setup.tgt_len)
    positions = torch.from_numpy(np.array(sinusoidal_positions(jnp.arange(length), d)))
    causal = nn.Transformer.generate_square_subsequent_mask(setup.tgt_len)

    def forward(src: Any, inputs: Any) -> Any:
        """src: [B, S], inputs: [B, T] int64 -> logits [B, T, V] float32."""
        x = m["src_embed"](src) * math.sqrt(d) + positions[: src.shape[1]]
        y = m["embed"](inputs) * math.sqrt(d) + positions[: inputs.shape[1]]
        return m["out"](m["transformer"](x, y, tgt_mask=causal, tgt_is_causal=True))

    return m, forward


TORCH_MODELS: dict[str, Callable[[ModuleType, Setup], TorchModel]] = {
    "rnn_seq2seq": torch_rnn_seq2seq,
    "attention_seq2seq": torch_attention_seq2seq,
    "transformer_seq2seq": torch_transformer_seq2seq,
}


def torch_step(torch: ModuleType, setup: Setup) -> tuple[Callable[[int], None], int]:
    """The torch train step (cross-entropy, global-norm clipping, AdamW from OPTIM) on the
    batch seqjax trains on; returns (run n steps, parameter count)."""
    module, forward = TORCH_MODELS[setup.cfg.kind](torch, setup)
    opt = torch.optim.AdamW(
        module.parameters(),
        lr=OPTIM.learning_rate,
        betas=(OPTIM.options.b1, OPTIM.options.b2),
        weight_decay=OPTIM.weight_decay,
    )
    # The masks are all ones, so the plain mean cross-entropy is seqjax's masked mean.
    batch = {k: torch.from_numpy(x).long() for k, x in synthetic_batch(setup).items() if "mask" not in k}
    count = sum(p.numel() for p in module.parameters())

    def run(steps: int) -> None:
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            logits = forward(batch["src"], batch["inputs"])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, setup.vocab), batch["targets"].reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), OPTIM.clip_norm)
            opt.step()

    return run, count


def result_row(
    name: str, setup: Setup, seconds: dict[str, float], counts: dict[str, int], steps: int, peak: float
) -> list[str]:
    """model, shape, parameters (seqjax / torch), tok/s and % of peak per side, seqjax / torch."""
    tokens = setup.batch * setup.tgt_len * steps
    flops = train_flops_per_target_token(setup)
    tps = {k: tokens / s for k, s in seconds.items()}

    def side(key: str) -> list[str]:
        return [f"{tps[key]:,.0f}", f"{tps[key] * flops / 1e9 / peak:.1%}"] if key in tps else ["n/a", "n/a"]

    params = " / ".join(f"{counts[k]:,}" if k in counts else "n/a" for k in ("seqjax", "torch"))
    ratio = f"{tps['seqjax'] / tps['torch']:.2f}x" if "torch" in tps else "n/a"
    return [name, describe(setup), params, *side("seqjax"), *side("torch"), ratio]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_timing_arguments(p, default_steps=5)
    p.add_argument("--models", default=",".join(SETUPS))
    args = p.parse_args(argv)
    repeats, steps = timing(args, default_steps=5)
    names = parse_names(args.models, SETUPS, "--models")
    setups = QUICK_SETUPS if args.quick else SETUPS
    print("machine:", machine())
    peak = matmul_peak()
    print(f"measured fp32 matmul peak: {peak:.0f} GFLOP/s")
    torch = torch_or_none()
    rows = []
    for name in names:
        setup = setups[name]
        built = {"seqjax": seqjax_step(setup)}
        if torch is not None:
            built["torch"] = torch_step(torch, setup)
        runs = {k: run for k, (run, _) in built.items()}
        counts = {k: count for k, (_, count) in built.items()}
        print(f"{name}: parameters " + ", ".join(f"{k} {n:,}" for k, n in counts.items()), flush=True)
        for run in runs.values():
            run(2)  # compile / warm up
        seconds = interleaved({k: functools.partial(r, steps) for k, r in runs.items()}, repeats)
        rows.append(result_row(name, setup, seconds, counts, steps, peak))
        print(" | ".join(rows[-1]), flush=True)
    table = markdown_table(
        [
            "model",
            "shape",
            "params seqjax / torch",
            "seqjax tok/s",
            "seqjax % peak",
            "torch tok/s",
            "torch % peak",
            "seqjax / torch",
        ],
        rows,
    )
    body = (
        f"Measured fp32 matmul peak (JAX, 2048^3): {peak:.0f} GFLOP/s. Medians of {repeats} interleaved repeats "
        f"of {steps} train step(s) (forward, backward, global-norm clipping {OPTIM.clip_norm:g}, AdamW lr "
        f"{OPTIM.learning_rate:g} b2 {OPTIM.options.b2:g} wd {OPTIM.weight_decay:g}) on one fixed batch of full-length "
        "rows; teacher forcing, full softmax, dropout 0, float32. tok/s counts target tokens; % peak counts "
        "matmul FLOPs only (6 per multiply-add, source work included).\n\n"
        "Torch sides: rnn_seq2seq is a bidirectional nn.LSTM encoder (D/2 per direction, finals concatenated, "
        "as seqjax's) whose final (h, c) start an nn.LSTM decoder; **attention_seq2seq's torch side is a "
        "hand-written loop** (nn.LSTMCell per target position, additive attention, input feeding), torch "
        "having no module for it; transformer_seq2seq is nn.Transformer (norm_first as seqjax's LN placement, "
        "tanh-GELU, causal target mask). torch's LSTMs carry two bias vectors (b_ih, b_hh) where seqjax's "
        "carry one, hence 4H more torch parameters per LSTM direction and layer; the Transformers match "
        f"exactly.\n\n{table}\n"
    )
    print(table)
    publish("seq2seq_train", args.quick, "Encoder–decoder training throughput: seqjax vs PyTorch", body)


if __name__ == "__main__":
    main()
