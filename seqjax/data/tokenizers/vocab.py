"""Vocabulary: tokens with fixed special ids, the rest sorted by training frequency.

Ids are frequency-sorted so that heads which group the vocabulary by frequency
(adaptive softmax clusters, class-based and Huffman trees) can work on id ranges, and the
counts are kept so that samplers can draw from the unigram distribution.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike

from seqjax.contracts import SPECIAL_IDS

# Host-side names of `seqjax.contracts.SPECIAL_IDS`, the one definition of the special ids.
PAD_ID, BOS_ID, EOS_ID, UNK_ID = SPECIAL_IDS.pad, SPECIAL_IDS.bos, SPECIAL_IDS.eos, SPECIAL_IDS.unk
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")  # the strings of ids 0..3, in that order


TOKENIZER_FILE = "tokenizer.json"  # a saved tokenizer's settings, in its directory
VOCAB_FILE = "vocab.json"  # its vocabulary


@dataclasses.dataclass(frozen=True, eq=False)
class Vocabulary:
    """Token strings and their training counts; the id of a token is its position.

    Attributes:
      tokens: the V token strings; the first four are `SPECIAL_TOKENS` at `PAD_ID`,
        `BOS_ID`, `EOS_ID`, `UNK_ID`, the rest are in decreasing count order, ties by string.
      counts: [V] int64 occurrences of each id in the encoded training text (`</s>` counts
        one per line; `<unk>` counts the occurrences of the tokens it replaced).
    """

    tokens: tuple[str, ...]
    counts: np.ndarray
    _index: dict[str, int] = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        tokens = tuple(self.tokens)
        if tokens[: len(SPECIAL_TOKENS)] != SPECIAL_TOKENS:
            raise ValueError(f"tokens must start with the special tokens {SPECIAL_TOKENS}, got {tokens[:4]}")
        index = {token: i for i, token in enumerate(tokens)}
        if len(index) != len(tokens):
            duplicate = next(t for i, t in enumerate(tokens) if index[t] != i)
            raise ValueError(f"tokens must be distinct, got {duplicate!r} twice")
        counts = np.asarray(self.counts)
        if counts.shape != (len(tokens),) or not np.issubdtype(counts.dtype, np.integer):
            raise ValueError(
                f"counts must be an integer array of shape ({len(tokens)},), got {counts.dtype} {counts.shape}"
            )
        if np.any(counts < 0):
            raise ValueError(f"counts must be >= 0, got {int(counts.min())}")
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "counts", counts.astype(np.int64))
        object.__setattr__(self, "_index", index)

    @classmethod
    def from_counts(
        cls,
        counts: Mapping[str, int],
        *,
        num_lines: int,
        max_size: int = 0,
        min_count: int = 1,
    ) -> Vocabulary:
        """Builds the vocabulary of a training text from its token counts.

        Args:
          counts: occurrences of each (non-special) token in the training text.
          num_lines: lines (sentences) of the training text; the count of `</s>`.
          max_size: the most ids, specials included; 0 for no bound.
          min_count: tokens seen fewer times map to `<unk>`; 0 keeps every token of `counts`.
        """
        if max_size != 0 and max_size <= len(SPECIAL_TOKENS):
            raise ValueError(
                f"max_size must be 0 (no bound) or > {len(SPECIAL_TOKENS)} (the special tokens), got {max_size}"
            )
        if min_count < 0:
            raise ValueError(f"min_count must be >= 0, got {min_count}")
        clashes = sorted(set(SPECIAL_TOKENS) & set(counts))
        if clashes:
            raise ValueError(f"counts must not contain the special tokens, got {clashes}")
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        kept = [(token, count) for token, count in ranked if count >= min_count]
        if max_size:
            kept = kept[: max_size - len(SPECIAL_TOKENS)]
        unknown = sum(counts.values()) - sum(count for _, count in kept)
        tokens = SPECIAL_TOKENS + tuple(token for token, _ in kept)
        special_counts = [0, 0, num_lines, unknown]
        return cls(tokens, np.array(special_counts + [c for _, c in kept], dtype=np.int64))

    @property
    def size(self) -> int:
        return len(self.tokens)

    def id(self, token: str) -> int:
        """The id of `token`, or `UNK_ID` for a token outside the vocabulary."""
        return self._index.get(token, UNK_ID)

    def __contains__(self, token: str) -> bool:
        return token in self._index

    def token(self, id_: int) -> str:
        if not 0 <= id_ < self.size:
            raise ValueError(f"id must be in [0, {self.size}), got {id_}")
        return self.tokens[id_]

    def check_ids(self, ids: ArrayLike, name: str) -> np.ndarray:
        """Returns `ids` as an integer array after checking every id is in [0, V).

        Raises:
          ValueError: naming `name`, the first out-of-range value and its position, or the
            dtype when `ids` are not integers.
        """
        array = np.asarray(ids)
        if array.size == 0:
            return array.astype(np.int32)
        if not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"{name} must be integer token ids, got dtype {array.dtype}")
        bad = (array < 0) | (array >= self.size)
        if bad.any():
            position = tuple(int(i) for i in np.argwhere(bad)[0])
            where = position[0] if len(position) == 1 else position
            raise ValueError(f"{name} must be ids in [0, {self.size}), got {int(array[position])} at position {where}")
        return array

    def to_json(self) -> str:
        return json.dumps({"tokens": list(self.tokens), "counts": self.counts.tolist()}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Vocabulary:
        try:
            fields = json.loads(text)
            tokens, counts = fields["tokens"], fields["counts"]
        except (json.JSONDecodeError, TypeError, KeyError) as error:
            raise ValueError(f"vocabulary JSON must hold 'tokens' and 'counts', got error {error}") from None
        if not all(isinstance(t, str) for t in tokens) or not all(
            isinstance(c, int) and not isinstance(c, bool) for c in counts
        ):
            raise ValueError("vocabulary JSON must hold string tokens and integer counts")
        return cls(tuple(tokens), np.array(counts, dtype=np.int64).reshape(len(counts)))

    def save(self, path: str | os.PathLike) -> None:
        with open(path, "w", encoding="utf-8") as file:
            file.write(self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocabulary:
        if not os.path.isfile(path):
            raise ValueError(f"vocabulary file must exist, got {os.fspath(path)!r}")
        with open(path, encoding="utf-8") as file:
            return cls.from_json(file.read())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self.tokens == other.tokens and np.array_equal(self.counts, other.counts)

    def __hash__(self) -> int:
        return hash(self.tokens)


def kept_ids(vocab: Vocabulary, ids: ArrayLike) -> list[int]:
    """`ids` ([T] int, each checked to be in the vocabulary) up to the first `</s>`, without
    `<pad>` and `<s>`: the ids whose text a tokenizer's `decode` writes."""
    kept = []
    for id_ in vocab.check_ids(ids, "ids").reshape(-1).tolist():
        if id_ == EOS_ID:
            break
        if id_ not in (PAD_ID, BOS_ID):
            kept.append(id_)
    return kept
