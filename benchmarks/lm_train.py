"""Training throughput of seqjax's LMs against PyTorch on the same shapes, in one process.

    python benchmarks/lm_train.py [--quick] [--repeats 5] [--steps 5] [--models lstm,transformer,modern]

Each repeat times `--steps` train steps (forward, backward, AdamW update) of seqjax and
then of torch, round-robin, each turn after one untimed step of the same framework, so that a
turn measures a framework's steady state rather than what taking the process over from the
other costs it (on a virtual machine whose host takes freed memory back, that first step is
dearer; the header records `fresh_memory_ms`, the price of new memory on the machine). The
table reports median tokens/s, the ratio, and each model's fraction of the measured fp32
matmul peak. The "modern" row is the Transformer row's shapes with Llama's blocks (rotary
positions, RMSNorm, SwiGLU, grouped-query attention with 2 key/value heads, no biases),
written out in torch with the same blocks. Writes
benchmarks/results/lm_train.md (`--quick`: tiny shapes, lm_train_quick.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    LLAMA_BLOCKS,
    LMShapes,
    add_timing_arguments,
    fresh_memory_ms,
    interleaved,
    lm_train_step,
    machine,
    markdown_table,
    matmul_peak,
    parse_names,
    publish,
    timing,
    torch_or_none,
)

from seqjax.config import Config, ModelConfig  # noqa: E402
from seqjax.training.core.mfu import train_flops_per_token as transformer_flops_per_token  # noqa: E402

V = 10_000
QUICK_V = 1_000
TRANSFORMER = ModelConfig(kind="transformer", d_model=512, layers=4, num_heads=8, d_ff=2048, dropout=0.0, max_len=128)
MODERN = dataclasses.replace(TRANSFORMER, kv_heads=2, **LLAMA_BLOCKS)


class Shape(TypedDict):
    """A row's batch: `batch` rows of `time` tokens through the model `cfg`."""

    batch: int
    time: int
    cfg: ModelConfig


SHAPES: dict[str, Shape] = {
    "lstm": dict(batch=32, time=64, cfg=ModelConfig(kind="rnn", cell="lstm", d_model=512, layers=1, dropout=0.0)),
    "gru": dict(batch=32, time=64, cfg=ModelConfig(kind="rnn", cell="gru", d_model=512, layers=1, dropout=0.0)),
    "elman": dict(batch=32, time=64, cfg=ModelConfig(kind="rnn", cell="elman", d_model=512, layers=1, dropout=0.0)),
    "transformer": dict(batch=16, time=128, cfg=TRANSFORMER),
    "modern": dict(batch=16, time=128, cfg=MODERN),
}


def quick_shape(name: str) -> Shape:
    """The row's model at tiny sizes (a smoke run): B=4, T=32, D=64, 2 layers."""
    shape = SHAPES[name]
    small: dict[str, Any] = dict(d_model=64, layers=min(shape["cfg"].layers, 2))
    if shape["cfg"].kind == "transformer":
        small.update(num_heads=4, d_ff=256, max_len=32, kv_heads=min(shape["cfg"].kv_heads, 2))
    return Shape(batch=4, time=32, cfg=dataclasses.replace(shape["cfg"], **small))


def train_flops_per_token(name: str, cfg: ModelConfig, t: int, vocab: int = V) -> float:
    """Matmul FLOPs per token of forward + backward (3x the forward's 2 per multiply-add); the
    Transformers' is PaLM's count (`seqjax.training.core.mfu`), attention scores and values included."""
    if cfg.kind == "transformer":
        flops = transformer_flops_per_token(Config(model=cfg), cfg.d_model * vocab, t)
        if flops is None:
            raise ValueError(f"the {cfg.kind} model {name!r} does not count its matmul weights")
        return flops
    gates = {"lstm": 4, "gru": 3, "elman": 1}[name]
    return 6.0 * (cfg.layers * gates * (2 * cfg.d_model**2) + cfg.d_model * vocab)


def torch_modern_body(torch: ModuleType, cfg: ModelConfig, time: int) -> Any:
    """Llama's decoder blocks in torch, as seqjax builds them for `cfg`: pre-RMSNorm, rotary
    positions (pairs i, i + Dh/2), grouped-query SDPA, SwiGLU, no biases, a final RMSNorm."""
    nn, functional = torch.nn, torch.nn.functional
    d, heads, kv_heads, head_dim = cfg.d_model, cfg.num_heads, cfg.kv_heads, cfg.head_width
    half = head_dim // 2
    angles = torch.arange(time)[:, None] * cfg.rope_base ** (-torch.arange(half) / half)
    cos, sin = torch.cos(angles), torch.sin(angles)  # [T, Dh/2]

    def rotary(x: Any) -> Any:  # [B, heads, T, Dh] torch tensor
        first, second = x[..., :half], x[..., half:]
        return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)

    module: Any = nn.Module  # a dynamic base: torch has no types here

    class Layer(module):
        def __init__(self) -> None:
            super().__init__()
            self.attention_norm, self.ff_norm = nn.RMSNorm(d, eps=1e-6), nn.RMSNorm(d, eps=1e-6)
            self.query = nn.Linear(d, d, bias=False)
            self.kv = nn.Linear(d, 2 * kv_heads * head_dim, bias=False)
            self.out = nn.Linear(d, d, bias=False)
            self.gate_up = nn.Linear(d, 2 * cfg.d_ff, bias=False)
            self.down = nn.Linear(cfg.d_ff, d, bias=False)

        def forward(self, x: Any) -> Any:  # [B, T, D] torch tensor
            b, t, _ = x.shape
            h = self.attention_norm(x)
            q = rotary(self.query(h).view(b, t, heads, head_dim).transpose(1, 2))
            k, v = self.kv(h).view(b, t, 2, kv_heads, head_dim).permute(2, 0, 3, 1, 4)
            attended = functional.scaled_dot_product_attention(q, rotary(k), v, is_causal=True, enable_gqa=True)
            x = x + self.out(attended.transpose(1, 2).reshape(b, t, d))
            gate, up = self.gate_up(self.ff_norm(x)).chunk(2, dim=-1)
            return x + self.down(functional.silu(gate) * up)

    return nn.Sequential(*[Layer() for _ in range(cfg.layers)], nn.RMSNorm(d, eps=1e-6))


def torch_step(
    torch: ModuleType, name: str, batch: int, time: int, cfg: ModelConfig, vocab: int = V
) -> Callable[[int], None]:
    """`run(n)`: n train steps (AdamW) of the row's model written in `torch`."""
    nn = torch.nn
    d = cfg.d_model

    module: Any = nn.Module  # a dynamic base: torch has no types here

    class LM(module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            if name == "modern":
                self.body = torch_modern_body(torch, cfg, time)
            elif name == "transformer":
                layer = nn.TransformerEncoderLayer(
                    d, cfg.num_heads, cfg.d_ff, dropout=0.0, batch_first=True, norm_first=True
                )
                self.body = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
                self.mask = nn.Transformer.generate_square_subsequent_mask(time)
            else:
                rnn = {"lstm": nn.LSTM, "gru": nn.GRU, "elman": nn.RNN}[name]
                self.body = rnn(d, d, cfg.layers, batch_first=True)
            self.out = nn.Linear(d, vocab)

        def forward(self, x: Any) -> Any:  # ids [B, T] -> logits [B, T, V] torch tensors
            h = self.embed(x)
            if name == "modern":
                h = self.body(h * d**0.5)
            elif name == "transformer":
                h = self.body(h, mask=self.mask, is_causal=True)
            else:
                h = self.body(h)[0]
            return self.out(h)

    model = LM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(4, vocab, (batch, time))
    y = torch.randint(4, vocab, (batch, time))

    def run(steps: int) -> None:
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
            loss.backward()
            opt.step()

    return run


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_timing_arguments(p, default_steps=5)
    p.add_argument("--models", default="lstm,transformer,modern")
    args = p.parse_args(argv)
    repeats, steps = timing(args, default_steps=5)
    names = parse_names(args.models, list(SHAPES), "--models")
    vocab = QUICK_V if args.quick else V
    print("machine:", machine())
    peak = matmul_peak(512 if args.quick else 2048)  # GFLOP/s
    print(f"measured fp32 matmul peak: {peak:.0f} GFLOP/s")
    megabytes, idle_seconds = 768, 3.0
    just_freed_ms, after_idle_ms = fresh_memory_ms(megabytes, idle_seconds)
    fresh_memory = (
        f"Writing {megabytes} MiB of newly allocated memory: {just_freed_ms:.0f} ms just after freeing "
        f"as much, {after_idle_ms:.0f} ms after {idle_seconds:g} s idle."
    )
    print(fresh_memory)
    torch = torch_or_none()
    rows = []
    for name in names:
        shape = quick_shape(name) if args.quick else SHAPES[name]
        b, t, cfg = shape["batch"], shape["time"], shape["cfg"]
        candidates = {"seqjax": lm_train_step(LMShapes(b, t, vocab, cfg))[0]}
        if torch is not None:
            candidates["torch"] = torch_step(torch, name, b, t, cfg, vocab)
        for run in candidates.values():
            run(2)  # compile / warm up
        timed = {k: functools.partial(r, steps) for k, r in candidates.items()}
        seconds = interleaved(timed, repeats, before={k: functools.partial(r, 1) for k, r in candidates.items()})
        tokens = b * t * steps
        flops = train_flops_per_token(name, cfg, t, vocab)
        tps = {k: tokens / s for k, s in seconds.items()}
        ratio = tps["seqjax"] / tps["torch"] if "torch" in tps else float("nan")
        heads = f" H={cfg.num_heads} K={cfg.kv_heads or cfg.num_heads}" if cfg.kind == "transformer" else ""
        row = [
            name,
            f"B={b} T={t} D={cfg.d_model} L={cfg.layers}{heads} V={vocab}",
            f"{tps['seqjax']:,.0f}",
            f"{tps['seqjax'] * flops / 1e9 / peak:.0%}",
            f"{tps['torch']:,.0f}" if "torch" in tps else "n/a",
            f"{tps['torch'] * flops / 1e9 / peak:.0%}" if "torch" in tps else "n/a",
            f"{ratio:.2f}x",
        ]
        print(" | ".join(row))
        rows.append(row)
    table = markdown_table(
        ["model", "shape", "seqjax tok/s", "seqjax % peak", "torch tok/s", "torch % peak", "seqjax / torch"], rows
    )
    size = 512 if args.quick else 2048
    body = (
        f"Measured fp32 matmul peak (JAX, {size}^3): {peak:.0f} GFLOP/s. {fresh_memory} "
        f"Medians of {repeats} interleaved repeats of {steps} train steps (forward, backward, AdamW), each "
        f"turn after one untimed step, full softmax, dropout 0. The modern row: "
        f"rotary positions, RMSNorm, SwiGLU (d_ff each for gate and up), grouped-query attention, no biases, "
        f"in both frameworks.\n\n{table}\n"
    )
    print(table)
    publish("lm_train", args.quick, "LM training throughput: seqjax vs PyTorch", body)


if __name__ == "__main__":
    main()
