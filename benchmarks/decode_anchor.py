"""Greedy and beam decoding of the same weights in seqjax and in Hugging Face `generate`, and against the bounds.

    python benchmarks/decode_anchor.py [--quick] [--repeats 5]

Two Transformer LMs of one size (D = 512, 4 layers, 8 query heads, V = 10k, random weights):
GPT-2 in `transformers` (learned positions, LayerNorm, GELU MLP of 2048, biases, full
multi-head attention) and Llama (RoPE, RMSNorm, SwiGLU of 1365, no biases, 2 key/value heads).
Each is built in torch and its weights imported into seqjax through `seqjax.pretrained` (the
mapping `seqjax import-hf` uses): the same model in both. Each decodes B = 32 rows from BOS for
128 steps, greedily and with beam search (K = 4, no length penalty, no early stop: EOS is
masked in seqjax's output layer and not set in `generate`), timed side by side (medians of
interleaved repeats). seqjax decodes with its KV cache inside compiled `lax.while_loop`s, one
per phase of a growing cache; `generate` with its KV cache in torch's eager loop. Without
torch, seqjax alone decodes a model of the same shapes from its own random weights.

Bounds per step: the bytes a step must read (every weight once, float32, and the KV cache up
to the mean position) over the memory bandwidth measured here (a sum over a 1 GiB array), and
the step's FLOPs (2 per weight per row, attention's two products, the output layer) over the
measured fp32 matmul peak; the larger of the two is the bound a step cannot beat.

Needs torch and transformers (`pip install -e '.[bench]'`). Writes benchmarks/results/decode_anchor.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    LLAMA_BLOCKS,
    interleaved,
    machine,
    markdown_table,
    matmul_peak,
    transformer_config,
    write_result,
)

from seqjax import decoding  # noqa: E402
from seqjax.config import HeadConfig, ModelConfig  # noqa: E402
from seqjax.contracts import Params  # noqa: E402
from seqjax.data import BOS_ID, EOS_ID, PAD_ID  # noqa: E402
from seqjax.heads import build_head  # noqa: E402
from seqjax.model_head import init_decode_state, init_params, make_step_fn  # noqa: E402
from seqjax.models import build_model  # noqa: E402
from seqjax.pretrained.importing import checked_checkpoint  # noqa: E402

SPEED_TARGET = 1.2  # seqjax tokens/s over the torch anchor's
BOUND_TARGET = 3.0  # a step's time over the larger of its two bounds


@dataclasses.dataclass(frozen=True)
class Shapes:
    batch: int
    steps: int
    beam: int
    vocab: int
    d_model: int
    layers: int
    heads: int
    kv_heads: int
    d_ff: int
    modern: bool

    def model_config(self) -> ModelConfig:
        blocks = dict(LLAMA_BLOCKS, kv_heads=self.kv_heads) if self.modern else dict(positions="learned")
        return transformer_config(self.d_model, self.layers, self.heads, self.d_ff, self.steps + 1, **blocks)

    def step_flops(self, position: float) -> float:
        """FLOPs of one decoding step of one row at `position`."""
        d, kv = self.d_model, self.d_model * self.kv_heads // self.heads
        mlp = (3 if self.modern else 2) * d * self.d_ff
        per_layer = 2 * (d * d + 2 * d * kv + d * d + mlp) + 2 * 2 * position * d
        return self.layers * per_layer + 2 * d * self.vocab

    def step_bytes(self, rows: int, position: float) -> float:
        """Float32 bytes one step reads: every weight once, and the rows' KV cache up to `position`."""
        d, kv = self.d_model, self.d_model * self.kv_heads // self.heads
        mlp = (3 if self.modern else 2) * d * self.d_ff
        weights = self.layers * (2 * d * d + 2 * d * kv + mlp) + d * self.vocab
        cache = rows * self.layers * 2 * position * kv
        return 4.0 * (weights + cache)


def shapes_of(quick: bool, modern: bool) -> Shapes:
    if quick:
        return Shapes(4, 16, 2, 300, 32, 2, 4, 2 if modern else 4, 64, modern)
    return Shapes(32, 128, 4, 10_000, 512, 4, 8, 2 if modern else 8, 1365 if modern else 2048, modern)


def torch_model(shapes: Shapes) -> Any:
    """The Hugging Face model of `shapes` (random weights, eval mode), or None without torch
    (transformers has no types here: Any)."""
    try:
        import torch
        import transformers
    except ImportError:
        return None
    torch.set_num_threads(len(os.sched_getaffinity(0)))  # the cores this process may run on (taskset)
    torch.manual_seed(0)
    if shapes.modern:
        config = transformers.LlamaConfig(
            vocab_size=shapes.vocab,
            hidden_size=shapes.d_model,
            intermediate_size=shapes.d_ff,
            num_hidden_layers=shapes.layers,
            num_attention_heads=shapes.heads,
            num_key_value_heads=shapes.kv_heads,
            max_position_embeddings=shapes.steps + 1,
            tie_word_embeddings=False,
        )
        return transformers.LlamaForCausalLM(config).eval()
    config = transformers.GPT2Config(
        vocab_size=shapes.vocab,
        n_positions=shapes.steps + 1,
        n_embd=shapes.d_model,
        n_layer=shapes.layers,
        n_head=shapes.heads,
        n_inner=shapes.d_ff,
        tie_word_embeddings=False,
    )
    return transformers.GPT2LMHeadModel(config).eval()


def seqjax_model(shapes: Shapes, torch_twin: Any) -> tuple[ModelConfig, HeadConfig, Params]:
    """(config, parameters) of seqjax's model: `torch_twin`'s weights imported by `seqjax.pretrained`
    (seqjax's ids are the HF rows), or seqjax's own random ones when there is no twin."""
    if torch_twin is None:
        cfg, head_cfg = shapes.model_config(), HeadConfig(kind="full")
        model = build_model(cfg, shapes.vocab)
        head = build_head(head_cfg, shapes.vocab, np.ones(shapes.vocab, np.int64))
        example = {name: jnp.zeros((1, shapes.steps + 1), jnp.int32) for name in ("inputs", "targets")}
        return cfg, head_cfg, jax.jit(functools.partial(init_params, model, head))(jax.random.key(0), example)
    tensors = {name: value.detach().numpy() for name, value in torch_twin.state_dict().items()}
    checkpoint = checked_checkpoint(torch_twin.config.to_dict(), tensors)
    params = checkpoint.params()
    params["head"]["biases"] = np.zeros(checkpoint.rows, np.float32)
    return checkpoint.model, HeadConfig(kind="full", tied=checkpoint.tied, learn_bias=False), params


def seqjax_calls(shapes: Shapes, torch_twin: Any) -> dict[str, Callable[[], object]]:
    """{"greedy" | "beam K": blocking call} of seqjax's compiled KV-cache decoders."""
    cfg, head_cfg, params = seqjax_model(shapes, torch_twin)
    model = build_model(cfg, shapes.vocab)
    head = build_head(head_cfg, shapes.vocab, np.ones(shapes.vocab, np.int64))
    params = jax.device_put(
        {
            "model": params["model"],
            "head": dict(params["head"], biases=jnp.asarray(params["head"]["biases"]).at[EOS_ID].set(-1e9)),
        }
    )
    ids = dict(bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID, max_len=shapes.steps)

    @jax.jit
    def greedy(params: Params) -> jax.Array:
        state = init_decode_state(model, params, shapes.batch, shapes.steps + 1)
        return decoding.greedy(make_step_fn(model, head, params), state, **ids)[0]

    @jax.jit
    def beam(params: Params) -> jax.Array:
        state = init_decode_state(model, params, shapes.batch, shapes.steps + 1)
        return decoding.beam_search(make_step_fn(model, head, params), state, beam_size=shapes.beam, **ids)[0]

    return {
        "greedy": lambda: jax.block_until_ready(greedy(params)),
        f"beam {shapes.beam}": lambda: jax.block_until_ready(beam(params)),
    }


def torch_calls(shapes: Shapes, model: Any) -> dict[str, Callable[[], object]] | None:
    """{"greedy" | "beam K": call} of `generate` on `model`, or None without one."""
    if model is None:
        return None
    import torch

    start = torch.full((shapes.batch, 1), BOS_ID, dtype=torch.long)
    options: dict[str, Any] = dict(
        max_new_tokens=shapes.steps,
        min_new_tokens=shapes.steps,
        do_sample=False,
        use_cache=True,
        pad_token_id=PAD_ID,
        eos_token_id=None,
        attention_mask=torch.ones_like(start),
    )

    def run(beams: int) -> Any:  # the generated ids [B, 1 + steps], a torch tensor
        with torch.inference_mode():
            out = model.generate(start, num_beams=beams, early_stopping=False, length_penalty=0.0, **options)
        if out.shape[1] != shapes.steps + 1:
            raise RuntimeError(f"generate stopped early: {out.shape[1] - 1} of {shapes.steps} steps")
        return out

    return {"greedy": lambda: run(1), f"beam {shapes.beam}": lambda: run(shapes.beam)}


def memory_bandwidth(gib: float = 1.0, repeats: int = 7) -> float:
    """Measured read bandwidth, GB/s: the median of summing a float32 array of `gib` GiB."""
    data = jnp.ones((int(gib * 2**30 / 4),), jnp.float32)
    total = jax.jit(jnp.sum)
    total(data).block_until_ready()
    seconds = interleaved({"sum": lambda: total(data).block_until_ready()}, repeats)["sum"]
    return data.nbytes / seconds / 1e9


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes, for a smoke run")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    info = machine()
    print("machine:", "; ".join(f"{k} {v}" for k, v in info.items()))
    peak, bandwidth = matmul_peak(), memory_bandwidth(0.125 if args.quick else 1.0)
    print(f"fp32 matmul peak {peak:.0f} GFLOP/s, read bandwidth {bandwidth:.1f} GB/s")
    rows: list[list[str]] = []
    verdicts: list[str] = []
    for modern in (False, True):
        shapes = shapes_of(args.quick, modern)
        anchor = "Llama (transformers)" if modern else "GPT-2 (transformers)"
        name = "modern (RoPE, RMSNorm, SwiGLU, GQA 8/2)" if modern else "classic"
        twin = torch_model(shapes)
        ours, theirs = seqjax_calls(shapes, twin), torch_calls(shapes, twin)
        calls = {("seqjax", d): c for d, c in ours.items()} | {(anchor, d): c for d, c in (theirs or {}).items()}
        for call in calls.values():
            call()
        seconds = interleaved(calls, args.repeats)
        for decoder in ours:
            live = shapes.batch * (shapes.beam if decoder.startswith("beam") else 1)
            mean_position = (shapes.steps + 1) / 2
            flops = live * shapes.step_flops(mean_position)
            bound = max(shapes.step_bytes(live, mean_position) / (bandwidth * 1e9), flops / (peak * 1e9))
            step = seconds[("seqjax", decoder)] / shapes.steps
            tokens_per_second = shapes.batch * shapes.steps / seconds[("seqjax", decoder)]
            theirs_s = seconds.get((anchor, decoder))
            ratio = theirs_s / seconds[("seqjax", decoder)] if theirs_s else float("nan")
            rows.append(
                [
                    name,
                    decoder,
                    f"{tokens_per_second:,.0f}",
                    f"{shapes.batch * shapes.steps / theirs_s:,.0f}" if theirs_s else "-",
                    f"{ratio:.2f}x",
                    f"{step * 1e3:.2f}",
                    f"{bound * 1e3:.2f}",
                    f"{step / bound:.1f}x",
                    f"{shapes.step_bytes(live, mean_position) / 2**20:,.0f}",
                ]
            )
            verdicts.append(
                f"- {name}, {decoder}: {ratio:.2f}x {anchor} (target >= {SPEED_TARGET}x: "
                f"{'met' if ratio >= SPEED_TARGET else '**missed**'}); {step / bound:.1f}x the bound "
                f"(target <= {BOUND_TARGET}x: {'met' if step / bound <= BOUND_TARGET else '**missed**'})"
            )
            print(rows[-1], flush=True)
    header = [
        "model",
        "decoder",
        "seqjax tokens/s",
        "torch anchor tokens/s",
        "seqjax speed / anchor's",
        "seqjax ms / step",
        "bound ms / step",
        "step / bound",
        "bytes read / step MiB",
    ]
    body = (
        f"Measured fp32 matmul peak {peak:.0f} GFLOP/s, read bandwidth {bandwidth:.1f} GB/s. B = 32 rows x 128 steps "
        f"from BOS; beam 4 keeps B x 4 rows live. Medians of {args.repeats} interleaved repeats. The bound of a step "
        f"is the larger of (bytes read / bandwidth) and (FLOPs / peak) at the mean position; GQA's 2 key/value "
        f"heads shrink the cache each step reads 4x.\n\n" + markdown_table(header, rows) + "\n\n" + "\n".join(verdicts)
    )
    print(body)
    print(
        "wrote",
        write_result(
            "decode_anchor" + ("_quick" if args.quick else ""), "Decoding against torch and the machine's bounds", body
        ),
    )


if __name__ == "__main__":
    main()
