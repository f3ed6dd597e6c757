"""Training throughput of seqjax's LMs against PyTorch on the same shapes, in one process.

    python benchmarks/lm_train.py [--repeats 5] [--steps 5] [--models lstm,transformer]

Each repeat times `--steps` train steps (forward, backward, AdamW update) of seqjax and
then of torch, round-robin; the table reports median tokens/s, the ratio, and each
model's fraction of the measured fp32 matmul peak. Writes benchmarks/results/lm_train.md.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    LMShapes,
    interleaved,
    lm_train_step,
    machine,
    markdown_table,
    matmul_peak,
    torch_or_none,
    write_result,
)

from seqjax.config import ModelConfig  # noqa: E402

V = 10_000
SHAPES = {
    "lstm": dict(batch=32, time=64, cfg=ModelConfig(kind="rnn", cell="lstm", d_model=512, layers=1, dropout=0.0)),
    "gru": dict(batch=32, time=64, cfg=ModelConfig(kind="rnn", cell="gru", d_model=512, layers=1, dropout=0.0)),
    "elman": dict(batch=32, time=64, cfg=ModelConfig(kind="rnn", cell="elman", d_model=512, layers=1, dropout=0.0)),
    "transformer": dict(
        batch=16, time=128,
        cfg=ModelConfig(kind="transformer", d_model=512, layers=4, num_heads=8, d_ff=2048, dropout=0.0, max_len=128),
    ),
}


def train_flops_per_token(name: str, d: int, layers: int, t: int, d_ff: int) -> float:
    """Matmul FLOPs per token of forward + backward (3x the forward's 2 per multiply-add)."""
    gates = {"lstm": 4, "gru": 3, "elman": 1, "transformer": 0}[name]
    if gates:
        per_token = layers * gates * (2 * d * d) + d * V
    else:
        per_token = layers * (4 * d * d + 2 * d * d_ff + 2 * t * d) + d * V  # qkv+out, mlp, scores+values
    return 6.0 * per_token


def torch_step(name: str, batch: int, time: int, cfg: ModelConfig):
    torch = torch_or_none()
    nn = torch.nn
    d = cfg.d_model

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, d)
            if name == "transformer":
                layer = nn.TransformerEncoderLayer(d, cfg.num_heads, cfg.d_ff, dropout=0.0, batch_first=True, norm_first=True)
                self.body = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
                self.mask = nn.Transformer.generate_square_subsequent_mask(time)
            else:
                rnn = {"lstm": nn.LSTM, "gru": nn.GRU, "elman": nn.RNN}[name]
                self.body = rnn(d, d, cfg.layers, batch_first=True)
            self.out = nn.Linear(d, V)

        def forward(self, x):
            h = self.embed(x)
            h = self.body(h, mask=self.mask, is_causal=True) if name == "transformer" else self.body(h)[0]
            return self.out(h)

    model = LM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(4, V, (batch, time))
    y = torch.randint(4, V, (batch, time))

    def run(steps: int):
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
            loss.backward()
            opt.step()

    return run


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--models", default="lstm,transformer")
    args = p.parse_args(argv)
    print("machine:", machine())
    peak = matmul_peak()
    print(f"measured fp32 matmul peak: {peak:.0f} GFLOP/s")
    torch = torch_or_none()
    rows = []
    for name in args.models.split(","):
        shape = SHAPES[name]
        b, t, cfg = shape["batch"], shape["time"], shape["cfg"]
        candidates = {"seqjax": lm_train_step(LMShapes(b, t, V, cfg))[0]}
        if torch is not None:
            candidates["torch"] = torch_step(name, b, t, cfg)
        for run in candidates.values():
            run(2)  # compile / warm up
        seconds = interleaved({k: (lambda r=r: r(args.steps)) for k, r in candidates.items()}, args.repeats)
        tokens = b * t * args.steps
        flops = train_flops_per_token(name, cfg.d_model, cfg.layers, t, cfg.d_ff)
        tps = {k: tokens / s for k, s in seconds.items()}
        ratio = tps["seqjax"] / tps["torch"] if "torch" in tps else float("nan")
        row = [name, f"B={b} T={t} D={cfg.d_model} L={cfg.layers} V={V}", f"{tps['seqjax']:,.0f}",
               f"{tps['seqjax'] * flops / 1e9 / peak:.0%}",
               f"{tps['torch']:,.0f}" if "torch" in tps else "n/a",
               f"{tps['torch'] * flops / 1e9 / peak:.0%}" if "torch" in tps else "n/a", f"{ratio:.2f}x"]
        print(" | ".join(row))
        rows.append(row)
    table = markdown_table(
        ["model", "shape", "seqjax tok/s", "seqjax % peak", "torch tok/s", "torch % peak", "seqjax / torch"], rows
    )
    body = (f"Measured fp32 matmul peak (JAX, 2048^3): {peak:.0f} GFLOP/s. Medians of {args.repeats} interleaved "
            f"repeats of {args.steps} train steps (forward, backward, AdamW), full softmax, dropout 0.\n\n{table}\n")
    print(table)
    print("wrote", write_result("lm_train", "LM training throughput: seqjax vs PyTorch", body))


if __name__ == "__main__":
    main()
