"""Decoding throughput of the Transformer LM with its KV cache, against recomputing the prefix and a Python loop.

    python benchmarks/decode.py [--quick] [--repeats 5]

A Transformer LM (D=512, 4 layers, 8 heads, d_ff=2048, V=10k, random weights, full softmax
head) decodes B=32 rows for max_len=128 steps, greedily and with beam search (K=4), three ways:

- KV cache, compiled: `seqjax.decoding.greedy` / `beam_search` over `make_step_fn` (the model's
  decode step and the head), one `lax.while_loop` inside one jit;
- recompute, compiled: the same decoders over a step function that writes the new token into a
  [B, max_len + 1] prefix buffer and re-runs the whole causal model on it (no cache);
- KV cache, Python loop: a Python `for` over a jitted single step (decode step, head, then the
  argmax, or the beam's top-k and cache reorder), the state donated so it is updated in place.

The head's bias at EOS is -1e9, so no row ends early and every variant runs all max_len steps
(checked on the outputs). Times are medians of interleaved repeats, each a whole decode from an
empty state; tokens/s counts the B * max_len output tokens (beam search scores K times as many).

Step time against position p: the model's step alone (no head), in one compiled loop whose steps
all write position p — the KV-cache step on the same cache, many steps per call so that dispatch
and the cache's one copy per call fade, and recomputing on a prefix of exactly p + 1 tokens.

Writes benchmarks/results/decode.md and decode_step_time.png (`--quick`: tiny shapes, *_quick.*).
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
    RESULTS,
    interleaved,
    machine,
    markdown_table,
    save_figure,
    transformer_config,
    write_result,
)
from decode_loops import empty_cache, python_loop_beam, python_loop_greedy  # noqa: E402
from decode_steps import empty_prefix, model_steps_at_position, recomputing_step_fn  # noqa: E402

from seqjax import decoding  # noqa: E402
from seqjax.config import HeadConfig, ModelConfig  # noqa: E402
from seqjax.contracts import Head, Model, Params, StepFn  # noqa: E402
from seqjax.data import BOS_ID, EOS_ID, PAD_ID  # noqa: E402
from seqjax.heads import build_head  # noqa: E402
from seqjax.model_head import init_decode_state, init_params, make_step_fn  # noqa: E402
from seqjax.models import build_model  # noqa: E402

# Far below any real log-prob, yet finite: sums of K x V extensions stay ordered.
UNREACHABLE_EOS_BIAS = -1e9
STEP_TARGET = 1.3  # the bound on step time at the last position over position 8
REFERENCE = "KV cache, compiled loop"  # the variant every other is compared with
RECOMPUTE = "recompute prefix, compiled loop"  # minutes per call at full size: timed once, after its first call


@dataclasses.dataclass(frozen=True)
class Shapes:
    batch: int  # B
    max_len: int  # decoding steps; the cache has max_len + 1 slots (BOS, then every output)
    beam_size: int  # K
    vocab: int  # V
    d_model: int  # D
    layers: int  # L
    num_heads: int
    d_ff: int
    cached_steps_per_call: int  # KV-cache steps per timed call of the step-time measurement

    @property
    def cache_len(self) -> int:
        return self.max_len + 1

    def model_config(self) -> ModelConfig:
        return transformer_config(self.d_model, self.layers, self.num_heads, self.d_ff, self.cache_len)

    def positions(self) -> tuple[int, ...]:
        """Positions whose step time is measured: 0, 8, the quarters of max_len, max_len."""
        quarters = (self.max_len // 4, self.max_len // 2, 3 * self.max_len // 4, self.max_len)
        return tuple(sorted({0, min(8, self.max_len), *quarters}))


FULL = Shapes(
    batch=32,
    max_len=128,
    beam_size=4,
    vocab=10_000,
    d_model=512,
    layers=4,
    num_heads=8,
    d_ff=2048,
    cached_steps_per_call=32,
)
QUICK = Shapes(
    batch=4, max_len=16, beam_size=4, vocab=300, d_model=32, layers=2, num_heads=2, d_ff=64, cached_steps_per_call=8
)


def build_lm(shapes: Shapes, seed: int = 0) -> tuple[Model, Head, Params]:
    """The model, the full-softmax head and random parameters, EOS made unreachable.

    Returns (model, head, params) with params = {"model": ..., "head": ...} float32.
    """
    model = build_model(shapes.model_config(), shapes.vocab)
    head = build_head(HeadConfig(kind="full"), shapes.vocab, np.ones(shapes.vocab, np.int64))
    example = {
        "inputs": jnp.zeros((1, shapes.cache_len), jnp.int32),
        "targets": jnp.zeros((1, shapes.cache_len), jnp.int32),
    }
    params = jax.jit(functools.partial(init_params, model, head))(jax.random.key(seed), example)
    biases = params["head"]["biases"].at[EOS_ID].set(UNREACHABLE_EOS_BIAS)
    return model, head, {"model": params["model"], "head": dict(params["head"], biases=biases)}


def decoding_setup(
    model: Model, head: Head, params: Params, batch_size: int, cache_len: int, recompute: bool
) -> tuple[StepFn, Any]:
    """The step function and the empty state of one variant, for batch_size rows."""
    if recompute:
        return recomputing_step_fn(model, head, params), empty_prefix(batch_size, cache_len)
    return make_step_fn(model, head, params), init_decode_state(model, params, batch_size, cache_len)


def blocking(call: Callable[[], object]) -> None:
    """Calls `call` and waits for its arrays: a timed call."""
    jax.block_until_ready(call())


@functools.partial(jax.jit, static_argnames=("model", "head", "shapes", "recompute"))
def compiled_greedy(model: Model, head: Head, params: Params, *, shapes: Shapes, recompute: bool) -> jax.Array:
    """`decoding.greedy` from BOS: tokens [B, max_len] int32."""
    step_fn, state = decoding_setup(model, head, params, shapes.batch, shapes.cache_len, recompute)
    tokens, _ = decoding.greedy(step_fn, state, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID, max_len=shapes.max_len)
    return tokens


@functools.partial(jax.jit, static_argnames=("model", "head", "shapes", "recompute"))
def compiled_beam(
    model: Model, head: Head, params: Params, *, shapes: Shapes, recompute: bool
) -> tuple[jax.Array, jax.Array]:
    """`decoding.beam_search` from BOS: sequences [B, K, max_len] int32, scores [B, K] float32."""
    step_fn, state = decoding_setup(model, head, params, shapes.batch, shapes.cache_len, recompute)
    return decoding.beam_search(
        step_fn, state, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID, beam_size=shapes.beam_size, max_len=shapes.max_len
    )


def step_times(model: Model, params: Params, shapes: Shapes, repeats: int) -> dict[str, dict[int, float]]:
    """Seconds per model step at each of `shapes.positions()`: {"KV cache" | "recompute": {p: s}}."""
    tokens = jnp.full((shapes.batch,), BOS_ID, jnp.int32)
    cache = empty_cache(model, params, batch_size=shapes.batch, max_len=shapes.cache_len)
    candidates: dict[tuple[str, int], Callable[[], object]] = {}
    steps = {"KV cache": shapes.cached_steps_per_call, "recompute": 1}
    for p in shapes.positions():
        at_p = jnp.full((shapes.batch,), p, jnp.int32)
        states = {
            "KV cache": dict(cache, positions=at_p),
            "recompute": dict(empty_prefix(shapes.batch, p + 1), positions=at_p),
        }
        for name, state in states.items():
            run = functools.partial(
                model_steps_at_position,
                model,
                params["model"],
                state,
                tokens,
                recompute=name == "recompute",
                steps=steps[name],
            )
            jax.block_until_ready(run())  # compile
            candidates[(name, p)] = functools.partial(blocking, run)
    seconds = interleaved(candidates, repeats)
    return {name: {p: seconds[(name, p)] / steps[name] for p in shapes.positions()} for name in steps}


def decode_variants(
    model: Model, head: Head, params: Params, shapes: Shapes, quick: bool
) -> dict[str, dict[str, Callable[[], jax.Array]]]:
    """{"greedy" | "beam K": {variant: a call returning that variant's output tokens}}.

    Beam search recomputing the prefix runs only with `quick`: at full size its cost per step
    is what the step-time table measures, times B * K rows.
    """
    batch, max_len = shapes.batch, shapes.max_len
    greedy = {
        REFERENCE: lambda: compiled_greedy(model, head, params, shapes=shapes, recompute=False),
        "KV cache, Python loop of jitted steps": lambda: python_loop_greedy(
            model, head, params, batch=batch, max_len=max_len
        ),
        RECOMPUTE: lambda: compiled_greedy(model, head, params, shapes=shapes, recompute=True),
    }
    beam = {
        REFERENCE: lambda: compiled_beam(model, head, params, shapes=shapes, recompute=False)[0],
        "KV cache, Python loop of jitted steps": lambda: python_loop_beam(
            model, head, params, batch=batch, beam_size=shapes.beam_size, max_len=max_len
        )[0],
    }
    if quick:  # at full size one call would run B * K rows x max_len full-prefix passes: ~10 CPU-minutes
        beam[RECOMPUTE] = lambda: compiled_beam(model, head, params, shapes=shapes, recompute=True)[0]
    return {"greedy": greedy, f"beam {shapes.beam_size}": beam}


def time_decoders(
    variants: dict[str, dict[str, Callable[[], jax.Array]]], repeats: int
) -> dict[str, dict[str, tuple[float, float]]]:
    """{decoder: {variant: (median seconds, fraction of output tokens equal to REFERENCE's)}}.

    Raises RuntimeError when an output holds EOS: then some row stopped early and the variants
    did unequal work.
    """
    results: dict[str, dict[str, tuple[float, float]]] = {}
    for decoder, calls in variants.items():
        # The first calls compile; their outputs are what the variants are compared on.
        outputs = {name: np.asarray(call()) for name, call in calls.items()}
        for name, tokens in outputs.items():
            if (tokens == EOS_ID).any():
                raise RuntimeError(f"{decoder}, {name}: an output reached EOS, so not every row ran every step")
        timed = {name: functools.partial(blocking, call) for name, call in calls.items()}
        slow = {name: timed.pop(name) for name in list(timed) if name == RECOMPUTE}
        seconds = interleaved(timed, repeats) | interleaved(slow, 1)
        results[decoder] = {
            name: (seconds[name], float(np.mean(tokens == outputs[REFERENCE]))) for name, tokens in outputs.items()
        }
        for name, (s, agreement) in results[decoder].items():
            print(f"{decoder:<7} {name:<38} {s * 1e3:>10,.1f} ms, {agreement:.1%} of tokens as {REFERENCE}", flush=True)
    return results


def decoder_table(timings: dict[str, tuple[float, float]], shapes: Shapes) -> str:
    output_tokens = shapes.batch * shapes.max_len
    reference = timings[REFERENCE][0]
    rows = [
        [
            name,
            f"{seconds * 1e3:,.1f}",
            f"{output_tokens / seconds:,.0f}",
            f"{seconds / shapes.max_len * 1e3:,.2f}",
            f"{seconds / reference:,.1f}x",
            f"{agreement:.1%}",
        ]
        for name, (seconds, agreement) in timings.items()
    ]
    header = ["variant", "decode ms", "tokens/s", "ms / step", f"time / {REFERENCE}'s", "tokens equal"]
    return markdown_table(header, rows)


def step_table(times: dict[str, dict[int, float]], shapes: Shapes) -> str:
    rows = [
        [
            p,
            f"{times['KV cache'][p] * 1e3:,.3f}",
            f"{times['recompute'][p] * 1e3:,.3f}",
            f"{times['recompute'][p] / times['KV cache'][p]:,.1f}x",
        ]
        for p in shapes.positions()
    ]
    header = ["position", "KV-cache step ms", "recompute step ms (prefix of position + 1)", "recompute / KV cache"]
    return markdown_table(header, rows)


def summary(
    decoders: dict[str, dict[str, tuple[float, float]]], times: dict[str, dict[int, float]], shapes: Shapes
) -> list[str]:
    """The claims about decoding speed, each with its measurement."""
    lines: list[str] = []
    for decoder, timings in decoders.items():
        for name, (seconds, _) in timings.items():
            if name != REFERENCE:
                lines.append(f"- {decoder}: {REFERENCE} {seconds / timings[REFERENCE][0]:,.1f}x faster than {name}")
    early, last = min(8, shapes.max_len), shapes.max_len
    ratio = times["KV cache"][last] / times["KV cache"][early]
    lines.append(
        f"- KV-cache step at position {last} / position {early}: {ratio:.2f}x "
        f"(target <= {STEP_TARGET}x: {'met' if ratio <= STEP_TARGET else 'NOT met'})"
    )
    return lines


def report(
    decoders: dict[str, dict[str, tuple[float, float]]],
    times: dict[str, dict[int, float]],
    shapes: Shapes,
    repeats: int,
    step_repeats: int,
    plot_name: str,
) -> str:
    """The markdown body of the result file."""
    setup = (
        f"Transformer LM: D = {shapes.d_model}, {shapes.layers} layers, {shapes.num_heads} heads, "
        f"d_ff = {shapes.d_ff}, V = {shapes.vocab:,}, random weights, full-softmax head with EOS's bias at "
        f"{UNREACHABLE_EOS_BIAS:,.0f} so that every row runs all {shapes.max_len} steps. "
        f"B = {shapes.batch} rows from BOS; beam search with K = "
        f"{shapes.beam_size}, no length penalty. Medians of {repeats} interleaved repeats, each a whole decode from "
        f"an empty state (cache or prefix of {shapes.cache_len} slots). tokens/s: B x max_len output tokens (one per "
        f"row; beam search scores K hypotheses per row) per second. Tokens equal: share of output tokens equal to "
        f"{REFERENCE}'s. {RECOMPUTE} is timed by one call after its first (compiling) one: at full size a greedy "
        f"call takes minutes, and beam search recomputing the prefix (B x K rows) is left out there; its cost per "
        f"step is the recompute column of the step table times K."
    )
    tables = [f"### {decoder}\n\n{decoder_table(timings, shapes)}" for decoder, timings in decoders.items()]
    steps = (
        "### Model step time against position\n\nThe model's step alone (no head), in a compiled loop whose steps "
        f"all write one position: the KV-cache step on the {shapes.cache_len}-slot cache "
        f"({shapes.cached_steps_per_call} steps per timed call), recomputing on a prefix of exactly position + 1 "
        f"tokens (one step per call); medians of {step_repeats} interleaved repeats.\n\n"
        f"{step_table(times, shapes)}\n\n![step time]({plot_name})"
    )
    return "\n\n".join([setup, *tables, steps, "\n".join(summary(decoders, times, shapes))]) + "\n"


def plot(times: dict[str, dict[int, float]], shapes: Shapes, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    positions = shapes.positions()
    figure, axes = plt.subplots(figsize=(7, 4.5))
    labels = {"KV cache": "KV-cache decode step", "recompute": "recompute (prefix of position + 1 tokens)"}
    for name, label in labels.items():
        axes.plot(positions, [times[name][p] * 1e3 for p in positions], marker="o", label=label)
    axes.set_yscale("log")
    axes.set_xlabel("position of the decoded token")
    axes.set_ylabel("model step, ms (median)")
    axes.set_title(f"Transformer LM step time, B={shapes.batch}, D={shapes.d_model}, {shapes.layers} layers")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes, for a smoke run")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repeats (default 5; 3 with --quick)")
    args = parser.parse_args(argv)
    repeats = args.repeats if args.repeats is not None else (3 if args.quick else 5)
    if repeats <= 0:
        raise ValueError(f"--repeats must be a positive int, got {repeats}")
    shapes, suffix = (QUICK, "_quick") if args.quick else (FULL, "")

    print("machine:", "; ".join(f"{k} {v}" for k, v in machine().items()))
    print(
        f"B={shapes.batch} max_len={shapes.max_len} K={shapes.beam_size} V={shapes.vocab} D={shapes.d_model} "
        f"L={shapes.layers} heads={shapes.num_heads} d_ff={shapes.d_ff}; medians of {repeats} interleaved repeats"
    )
    model, head, params = build_lm(shapes)
    decoders = time_decoders(decode_variants(model, head, params, shapes, args.quick), repeats)
    step_repeats = 3 * repeats  # a step is cheap, and its flatness is the claim most exposed to noise
    times = step_times(model, params, shapes, step_repeats)
    print(step_table(times, shapes))
    print("\n".join(summary(decoders, times, shapes)))

    body = report(decoders, times, shapes, repeats, step_repeats, plot_name=f"decode_step_time{suffix}.png")
    path = write_result(f"decode{suffix}", "Decoding: KV cache against recomputing the prefix and a Python loop", body)
    png = os.path.join(RESULTS, f"decode_step_time{suffix}.png")
    plot(times, shapes, png)
    print("wrote", path, "and", png)


if __name__ == "__main__":
    main()
