"""Latent interpolation with a latent-variable language model (`seqjax.contracts.LatentModel`,
the VAE LM; Bowman et al. 2016, §5): the posterior means of two sentences, points evenly spaced
between them, and a sentence decoded from each."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from seqjax.contracts import SPECIAL_IDS, Params
from seqjax.data.batching.line_rows import LineBatches
from seqjax.models import is_latent
from seqjax.training.features.generation import DecodeOptions, decode_new_lines, one_line

if TYPE_CHECKING:
    from seqjax.training.core.experiment import Experiment


def interpolate_latents(first: jax.typing.ArrayLike, second: jax.typing.ArrayLike, num: int) -> jax.Array:
    """Evenly spaced points from `first` to `second` (both ends included).

    first, second: [Z] float32; num >= 2. Returns [num, Z] float32, row i at
    (1 − i/(num−1)) · first + i/(num−1) · second.
    """
    if isinstance(num, bool) or not isinstance(num, int) or num < 2:
        raise ValueError(f"num must be an int >= 2 (both ends are included), got {num!r}")
    fractions = jnp.linspace(0.0, 1.0, num, dtype=jnp.float32)[:, None]
    return (1.0 - fractions) * jnp.asarray(first, jnp.float32) + fractions * jnp.asarray(second, jnp.float32)


def posterior_means(exp: Experiment, params: Params, texts: list[str]) -> jax.Array:
    """The posterior mean of q(z | x) [N, Z] float32 for each text, read in the row a line of
    the corpus trains in (`LineBatches`: its tokens then `</s>`, padded to data.seq_len); a
    text longer than that row is refused, as a line of the corpus is."""
    stream = np.array([i for text in texts for i in (*exp.tokenizer.encode(text), SPECIAL_IDS.eos)], np.int32)
    lines = LineBatches(stream, 1, exp.cfg.data.seq_len, seed=0, name="the sentences to interpolate")
    batch = lines.rows(np.arange(lines.num_rows))
    model_params = {"params": params["model"]}
    targets, mask = jnp.asarray(batch["targets"]), jnp.asarray(batch["mask"]) > 0
    mean: jax.Array
    mean, _ = exp.model.apply(model_params, targets, mask, method="encode")  # LatentModel.encode
    return mean


def interpolate_texts(
    exp: Experiment,
    params: Params,
    first: str,
    second: str,
    *,
    num: int,
    max_len: int,
    options: DecodeOptions,
    seed: int = 0,
) -> list[tuple[float, str]]:
    """`num` (>= 2) sentences decoded from the points evenly spaced between the posterior
    means of `first` and `second`, each with its fraction of the way (0 at `first`, 1 at
    `second`); the decoder starts from `</s>`, as a line of the stream does."""
    if not is_latent(exp.cfg.model):
        raise ValueError(
            f"interpolation needs a latent-variable model (model.kind=rnn_vae), got model.kind={exp.cfg.model.kind!r}"
        )
    if not first.strip() or not second.strip():
        raise ValueError(f"the two sentences to interpolate must not be blank, got {first!r} and {second!r}")
    means = posterior_means(exp, params, [first, second])
    latents = {"latent": interpolate_latents(means[0], means[1], num)}
    tokens, lengths = decode_new_lines(exp, params, latents, num=num, max_len=max_len, options=options, seed=seed)
    fractions = np.linspace(0.0, 1.0, num)
    return [
        (float(f), one_line(exp.tokenizer.decode(row[:n].tolist()))) for f, row, n in zip(fractions, tokens, lengths)
    ]
