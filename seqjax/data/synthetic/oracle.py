"""The oracle task (SeqGAN, Yu et al. 2017): a random LSTM language model generates the data.

The oracle is an LSTM whose parameters are drawn N(0, 1) from a fixed seed, so its
next-token distributions are peaked and far from uniform. It emits exactly `length` tokens
from its own vocabulary [0, V); a model trained on its samples is judged by the oracle's
exact negative log-likelihood of the *model's* samples (generation quality, which exposure
bias hurts), next to the model's likelihood of held-out oracle data (fit).

Everything is numpy on the host: sampling draws one uniform per token from
`numpy.random.default_rng(seed)` and inverts the oracle's CDF, so the corpus depends only on
the seeds (up to float32 rounding of the BLAS in use). Oracle token `i` is the word `o<i>`
in the text lines that the LM pipeline reads.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from seqjax.data.synthetic.seeds import Seed, seeded_rng
from seqjax.data.tokenizers.trained import WordTokenizer
from seqjax.data.tokenizers.vocab import Vocabulary

ORACLE_SEED = 2017
VOCAB_SIZE = 1000  # SeqGAN's 5000 takes ~5x longer to sample; 1000 keeps a 20k-line corpus at seconds
WIDTH = 32
LENGTH = 20
TOKEN_PREFIX = "o"
_TOKEN = re.compile(rf"{TOKEN_PREFIX}(\d+)")
_CHUNK = 4096  # rows sampled at once: [chunk, V] float32 probabilities


@dataclasses.dataclass(frozen=True, eq=False)
class Oracle:
    """A random LSTM LM: `embedding [V + 1, E]` (row V embeds the start symbol), `kernel
    [E + H, 4H]` (gates i, f, g, o), `bias [4H]`, `output [H, V]`, `output_bias [V]`, all
    float32; it emits exactly `length` tokens."""

    embedding: np.ndarray
    kernel: np.ndarray
    bias: np.ndarray
    output: np.ndarray
    output_bias: np.ndarray
    length: int

    @property
    def vocab_size(self) -> int:
        return int(self.output.shape[1])


def _check_size(name: str, value: object, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def make_oracle(
    *, seed: Seed = ORACLE_SEED, vocab_size: int = VOCAB_SIZE, width: int = WIDTH, length: int = LENGTH
) -> Oracle:
    """The oracle with N(0, 1) parameters drawn from `seed`; embedding and hidden width `width`."""
    _check_size("vocab_size", vocab_size, 2)
    _check_size("width", width)
    _check_size("length", length)
    rng = seeded_rng(0, seed)

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    return Oracle(
        embedding=normal(vocab_size + 1, width),
        kernel=normal(2 * width, 4 * width),
        bias=normal(4 * width),
        output=normal(width, vocab_size),
        output_bias=normal(vocab_size),
        length=int(length),
    )


Carry = tuple[np.ndarray, np.ndarray]  # the LSTM's (c, h), [N, W] float32 each


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


def _step(oracle: Oracle, carry: Carry, tokens: np.ndarray) -> tuple[np.ndarray, Carry]:
    """One LSTM step on tokens [N] (V = start): returns (logits [N, V] float32, new carry)."""
    c, h = carry
    gates = np.concatenate([oracle.embedding[tokens], h], axis=1) @ oracle.kernel + oracle.bias
    i, f, g, o = np.split(gates, 4, axis=1)
    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    h = _sigmoid(o) * np.tanh(c)
    return h @ oracle.output + oracle.output_bias, (c, h)


def _start(oracle: Oracle, rows: int) -> tuple[Carry, np.ndarray]:
    width = oracle.embedding.shape[1]
    zeros = np.zeros((rows, width), np.float32)
    return (zeros, zeros), np.full(rows, oracle.vocab_size)


def _inverse_cdf(probs: np.ndarray, mass: np.ndarray) -> np.ndarray:
    """The first index whose cumulative probability exceeds `mass` [N], per row of probs [N, V].

    Two levels (blocks of ~√V, then within the chosen block) instead of a [N, V] cumsum,
    which costs more than the rest of a sampling step.
    """
    rows, vocab = probs.shape
    size = int(np.ceil(np.sqrt(vocab)))
    starts = np.arange(0, vocab, size)
    block_mass = np.add.reduceat(probs, starts, axis=1)
    block_cdf = np.cumsum(block_mass, axis=1)
    block = np.minimum((block_cdf <= mass[:, None]).sum(axis=1), len(starts) - 1)
    before = block_cdf[np.arange(rows), block] - block_mass[np.arange(rows), block]
    columns = starts[block][:, None] + np.arange(size)
    inside = np.where(columns < vocab, np.take_along_axis(probs, np.minimum(columns, vocab - 1), axis=1), 0.0)
    offset = (np.cumsum(inside, axis=1) <= (mass - before)[:, None]).sum(axis=1)
    # Rounding can put the mass past the block's own sum: stay on its last token.
    result: np.ndarray = np.minimum(starts[block] + np.minimum(offset, size - 1), vocab - 1)
    return result


def _sample_rows(oracle: Oracle, uniforms: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling, token t of row n from uniforms [N, length]."""
    carry, tokens = _start(oracle, len(uniforms))
    out = np.empty(uniforms.shape, np.int32)
    for t in range(oracle.length):
        logits, carry = _step(oracle, carry, tokens)
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        tokens = _inverse_cdf(probs, uniforms[:, t] * probs.sum(axis=1))
        out[:, t] = tokens
    return out


def oracle_sample(oracle: Oracle, n: int, seed: Seed) -> np.ndarray:
    """n sequences [n, length] int32 of oracle ids in [0, V), drawn from `seed`."""
    uniforms = seeded_rng(n, seed).random((n, oracle.length), dtype=np.float32)
    chunks = [_sample_rows(oracle, uniforms[i : i + _CHUNK]) for i in range(0, n, _CHUNK)]
    return np.concatenate(chunks) if chunks else np.zeros((0, oracle.length), np.int32)


def oracle_nll(oracle: Oracle, tokens: ArrayLike, lengths: ArrayLike | None = None) -> np.ndarray:
    """The oracle's exact negative log-likelihood per token of each row, in nats.

    Args:
      tokens: [N, L] integer oracle ids in [0, V), L <= oracle.length; row n is scored on
        its first lengths[n] tokens, each given the ones before it.
      lengths: [N] ints in [1, L], or None for L.

    Returns:
      [N] float64, −(1/lengths[n]) Σ_t log p_oracle(tokens[n, t] | tokens[n, :t]).
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be a [N, L] integer array, got {tokens.dtype} {tokens.shape}")
    rows, width = tokens.shape
    if not 1 <= width <= oracle.length:
        raise ValueError(f"tokens length must be in [1, oracle.length={oracle.length}], got {width}")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= oracle.vocab_size):
        raise ValueError(f"tokens must be oracle ids in [0, {oracle.vocab_size}), got {tokens.min()}..{tokens.max()}")
    lengths = np.full(rows, width) if lengths is None else np.asarray(lengths)
    if lengths.shape != (rows,) or (rows and (lengths.min() < 1 or lengths.max() > width)):
        raise ValueError(f"lengths must be [N={rows}] ints in [1, {width}], got {lengths}")
    carry, previous = _start(oracle, rows)
    total = np.zeros(rows, np.float64)
    for t in range(width):
        logits, carry = _step(oracle, carry, previous)
        logits = logits.astype(np.float64)
        top = logits.max(axis=1)
        log_norm = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
        token_nll = log_norm - logits[np.arange(rows), tokens[:, t]]
        total += np.where(t < lengths, token_nll, 0.0)
        previous = tokens[:, t]
    result: np.ndarray = total / lengths
    return result


def oracle_lines(tokens: np.ndarray) -> list[str]:
    """Oracle ids [N, L] as text lines of words `o<id>`, what the LM pipeline tokenizes."""
    return [" ".join(f"{TOKEN_PREFIX}{i}" for i in row) for row in np.asarray(tokens).tolist()]


def oracle_tokenizer(oracle: Oracle, train_lines: Sequence[str]) -> WordTokenizer:
    """A word tokenizer whose vocabulary holds every oracle token (counts from `train_lines`),
    so that any sequence the oracle can emit encodes without `<unk>`."""
    counts = dict.fromkeys((f"{TOKEN_PREFIX}{i}" for i in range(oracle.vocab_size)), 0)
    for line in train_lines:
        for word in line.split():
            counts[word] += 1
    return WordTokenizer(Vocabulary.from_counts(counts, num_lines=len(train_lines), min_count=0))


def oracle_ids(vocab: Vocabulary) -> np.ndarray:
    """[vocab.size] int64: the oracle id of each vocabulary id, −1 for tokens that are not one."""
    ids = np.full(vocab.size, -1, np.int64)
    for index, token in enumerate(vocab.tokens):
        match = _TOKEN.fullmatch(token)
        if match:
            ids[index] = int(match.group(1))
    return ids
