"""The Llama-shaped language models the accelerator benchmarks size and run: `--set` overrides
of `seqjax.config.Config` (rotary positions, RMSNorm, SwiGLU, grouped-query attention, no
biases, a scanned and rematerialized stack, 2,048-token rows in bfloat16) and each model's
width, depth and vocabulary."""

from __future__ import annotations

LLAMA = (
    "model.positions=rope",
    "model.norm_type=rmsnorm",
    "model.mlp=swiglu",
    "model.bias=false",
    "model.scan_layers=true",
    "model.remat=full",
    "model.max_len=2048",
    "data.seq_len=2048",
    "train.precision=bfloat16",
)
MODELS = {  # (overrides, vocabulary)
    "125M": (
        ("model.d_model=768", "model.layers=12", "model.num_heads=12", "model.kv_heads=4", "model.d_ff=2048"),
        32000,
    ),
    "1B": (
        ("model.d_model=2048", "model.layers=24", "model.num_heads=16", "model.kv_heads=8", "model.d_ff=5632"),
        32000,
    ),
    "8B": (
        ("model.d_model=4096", "model.layers=32", "model.num_heads=32", "model.kv_heads=8", "model.d_ff=14336"),
        128256,
    ),
}
