"""Interpolated Kneser–Ney n-gram language model (Chen & Goodman 1998), on the host.

A baseline, not a Linen module: `fit` counts a token stream once and the returned model
answers `log_prob(context, token)` and `perplexity(stream)`. With absolute discount δ,

  P_k(w | h) = (max(c_k(h w) − δ, 0) + δ · N₁₊(h •) · P_{k−1}(w | h⁻)) / Σ_v c_k(h v)

where h⁻ drops h's oldest token, c_n are raw counts at the top order and c_k (k < n) are
continuation counts N₁₊(• h w) (how many distinct tokens precede h w). An unseen context
backs off entirely to P_{k−1}; P_0 is uniform over the vocabulary, so every token keeps
some probability and each P_k sums to one. A query whose context is shorter than n − 1
(the start of a stream) is answered at order len(context) + 1. `save` and `load` keep the
counts in a `.npz` file of integer arrays (no pickle). The class is the kind's counted model
(`seqjax.contracts.CountedModel`): what `seqjax train`, `eval` and `generate` call.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from seqjax.checks import is_int
from seqjax.config import MODELS


@dataclasses.dataclass(frozen=True)
class KneserNeyLM:
    """Counts of an interpolated Kneser–Ney model; build it with `fit`.

    tables[k - 1] maps a context (tuple of k − 1 ids) to (counts {token: c_k}, Σ c_k,
    N₁₊(h •)) for order k = 1..order.
    """

    order: int
    vocab_size: int
    discount: float
    tables: tuple[dict, ...]
    has_encoder: ClassVar[bool] = False  # as `seqjax.contracts.Model` says it
    recurrent: ClassVar[bool] = False

    def log_prob(self, context: Sequence[int], token: int) -> float:
        """Natural log of P(token | the last order − 1 tokens of context)."""
        _check_ids("context", context, self.vocab_size)
        _check_ids("token", [token], self.vocab_size)
        return math.log(self._prob(tuple(int(t) for t in context), int(token)))

    def _prob(self, context: tuple[int, ...], token: int) -> float:
        history = context[len(context) - min(len(context), self.order - 1) :]
        prob = 1.0 / self.vocab_size
        for k in range(1, len(history) + 2):
            entry = self.tables[k - 1].get(history[len(history) - (k - 1) :])
            if entry is None:
                continue
            counts, total, distinct = entry
            discounted = max(counts.get(token, 0) - self.discount, 0.0)
            prob = (discounted + self.discount * distinct * prob) / total
        return prob

    def nll_sum(self, stream: Sequence[int], history: Sequence[int] = ()) -> float:
        """Σ_t −log P(stream[t] | the order − 1 ids before it), in nats, over every token of stream.

        history: ids that precede the stream, the context of its first tokens but not scored
        (the neural evaluation gives a split's first token the history `</s>`).
        """
        tokens = _check_ids("stream", stream, self.vocab_size)
        if not tokens:
            raise ValueError("stream must hold at least one token, got an empty stream")
        past = _check_ids("history", history, self.vocab_size)
        ids = past[len(past) - min(len(past), self.order - 1) :] + tokens
        # Repeated (context, token) pairs are common (characters, frequent words): score each once.
        cache: dict[tuple[int, ...], float] = {}
        total = 0.0
        for t in range(len(ids) - len(tokens), len(ids)):
            gram = tuple(ids[max(0, t - self.order + 1) : t + 1])
            nll = cache.get(gram)
            if nll is None:
                nll = cache[gram] = -math.log(self._prob(gram[:-1], gram[-1]))
            total += nll
        return total

    def perplexity(self, stream: Sequence[int], history: Sequence[int] = ()) -> float:
        """exp of the mean negative log-probability of every token given its history (see nll_sum)."""
        return math.exp(self.nll_sum(stream, history) / len(stream))

    # --- the counted-model contract (`seqjax.contracts.CountedModel`) -------------------------

    counts_file: ClassVar[str] = "ngram.npz"

    @staticmethod
    def check_config(cfg: Any) -> None:
        """Raises ValueError for a model.context that is no order − 1."""
        if not is_int(cfg.context) or cfg.context < 0:
            raise ValueError(f"model.context must be an int >= 0 (the n-gram order - 1), got {cfg.context!r}")

    @classmethod
    def count(cls, cfg: Any, stream: Sequence[int] | np.ndarray, vocab_size: int) -> KneserNeyLM:
        """The model of order model.context + 1 (`cfg`: the run's model config) counted from
        `stream` [N] int over `vocab_size` ids."""
        return fit(stream, cfg.context + 1, vocab_size=vocab_size)

    @property
    def context_size(self) -> int:
        return self.order - 1

    @property
    def size(self) -> int:
        """The stored n-gram counts."""
        return sum(len(counts) for table in self.tables for counts, _, _ in table.values())

    @property
    def title(self) -> str:
        return f"{self.order}-gram Kneser–Ney"

    def next_token_log_probs(self, histories: np.ndarray) -> np.ndarray:
        """log P(· | history) [B, V] float32 for each row of `histories` [B, order − 1] int (the
        most recent token last; −1 for none, before the start of a stream): the interpolation
        of `_prob` for every token at once."""
        out = np.empty((len(histories), self.vocab_size), np.float32)
        cache: dict[tuple[int, ...], np.ndarray] = {}
        for row, history in enumerate(np.asarray(histories).tolist()):
            context = tuple(t for t in history if t >= 0)
            if context not in cache:
                prob = np.full(self.vocab_size, 1.0 / self.vocab_size)
                for k in range(1, len(context) + 2):
                    entry = self.tables[k - 1].get(context[len(context) - (k - 1) :])
                    if entry is None:
                        continue
                    followers, total, distinct = entry
                    counts = np.zeros(self.vocab_size)
                    counts[list(followers)] = list(followers.values())
                    prob = (np.maximum(counts - self.discount, 0.0) + self.discount * distinct * prob) / total
                cache[context] = np.log(prob)
            out[row] = cache[context]
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Writes the model to `path` (.npz): order, vocab_size, discount, and for each order k
        `grams_k` [M_k, k] int32, the distinct k-grams (context then token), with `counts_k`
        [M_k] int64, their c_k. The totals and N₁₊ are recomputed by `load`."""
        arrays: dict[str, Any] = {
            "order": np.int64(self.order),
            "vocab_size": np.int64(self.vocab_size),
            "discount": self.discount,
        }
        for k, table in enumerate(self.tables, start=1):
            entries = [
                (*context, token, count) for context, (counts, _, _) in table.items() for token, count in counts.items()
            ]
            array = np.array(entries, np.int64).reshape(-1, k + 1)
            arrays[f"grams_{k}"], arrays[f"counts_{k}"] = array[:, :k].astype(np.int32), array[:, k]
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> KneserNeyLM:
        """The model `save` wrote to `path`."""
        with np.load(path, allow_pickle=False) as f:
            order, vocab_size, discount = int(f["order"]), int(f["vocab_size"]), float(f["discount"])
            tables = tuple(
                _table(collections.Counter(dict(zip(map(tuple, f[f"grams_{k}"].tolist()), f[f"counts_{k}"].tolist()))))
                for k in range(1, order + 1)
            )
        return cls(order, vocab_size, discount, tables)


def _check_ids(name: str, ids: Sequence[int] | np.ndarray, vocab_size: int | None) -> list[int]:
    array = np.asarray(ids)
    if array.size and (array.ndim != 1 or not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{name} must be a 1-D sequence of int token ids, got {array.dtype}")
    if array.size and (array.min() < 0 or (vocab_size is not None and array.max() >= vocab_size)):
        bound = "" if vocab_size is None else f" and < vocab_size={vocab_size}"
        raise ValueError(f"{name} ids must be >= 0{bound}, got range [{array.min()}, {array.max()}]")
    return [int(t) for t in array.reshape(-1)]


def _table(counts: collections.Counter) -> dict:
    grouped: dict[tuple[int, ...], dict[int, int]] = collections.defaultdict(dict)
    for gram, count in counts.items():
        grouped[gram[:-1]][gram[-1]] = count
    return {context: (followers, sum(followers.values()), len(followers)) for context, followers in grouped.items()}


def fit(
    stream: Sequence[int] | np.ndarray, order: int, vocab_size: int | None = None, discount: float = 0.75
) -> KneserNeyLM:
    """Counts an interpolated Kneser–Ney model of `order` from a stream of token ids.

    Args:
      stream: [N] int token ids (sentences joined with an end-of-sentence id).
      order: n, the longest n-gram counted (1: unigram).
      vocab_size: V; max(stream) + 1 if None.
      discount: δ in (0, 1].
    """
    if not isinstance(order, int) or isinstance(order, bool) or order < 1:
        raise ValueError(f"order must be an int >= 1, got {order!r}")
    if not 0.0 < discount <= 1.0:
        raise ValueError(f"discount must be in (0, 1], got {discount}")
    if vocab_size is not None and (not isinstance(vocab_size, int) or vocab_size <= 0):
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    tokens = _check_ids("stream", stream, vocab_size)
    if not tokens:
        raise ValueError("stream must hold at least one token, got an empty stream")
    vocab_size = max(tokens) + 1 if vocab_size is None else vocab_size
    grams = collections.Counter(tuple(tokens[i : i + order]) for i in range(len(tokens) - order + 1))
    tables = [_table(grams)]
    for _ in range(order - 1):
        # Continuation counts: each distinct longer gram adds one to its suffix.
        grams = collections.Counter(gram[1:] for gram in grams)
        tables.append(_table(grams))
    return KneserNeyLM(order, vocab_size, float(discount), tuple(reversed(tables)))


MODELS.register("ngram", KneserNeyLM, families=("context",))
