"""Tokenizers built from training text: a segmentation paired with a `Vocabulary`.

Every tokenizer maps text to frequency-sorted ids of its vocabulary (no `<s>`/`</s>` added)
and back. `CharTokenizer` and `BpeTokenizer` reproduce the text exactly; `WordTokenizer`
joins its tokens as text writes them (`detokenize`: punctuation attached, words spaced),
rarer words as `<unk>`. `continue_text(prompt, ids)` is a prompt and the ids generated after
it as one text, detokenized together. `framing` says what a language model reads around a
line's ids (`seqjax.data.tokenizers.framing`): for these tokenizers, the `</s>` of the line before.
"""

from __future__ import annotations

import abc
import collections
import hashlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, Self

from numpy.typing import ArrayLike
from tokenizers import Tokenizer as HfTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from seqjax.data.tokenizers.framing import OWN, Framing
from seqjax.data.tokenizers.pretrained import SETTINGS_KIND, PretrainedTokenizer
from seqjax.data.tokenizers.vocab import SPECIAL_TOKENS, TOKENIZER_FILE, VOCAB_FILE, Vocabulary, kept_ids

TOKENIZER_KINDS = ("char", "word", "bpe", "pretrained")  # pretrained: loaded (`load_tokenizer`), never built
# Byte-level BPE starts from all 256 bytes, so it needs room for them plus our specials.
BPE_MIN_VOCAB_SIZE = 256 + len(SPECIAL_TOKENS)
# A word is letters/digits with inner apostrophes ("don't", "o'er"); any other
# non-space character is a token of its own.
WORD_PATTERN = re.compile(r"\w+(?:'\w+)*|[^\w\s]")
# How `detokenize` spaces a punctuation token: closing marks attach to the token before,
# opening ones to the token after, joining ones (hyphens, dashes, slashes) to both.
_CLOSING = frozenset(",.;:!?)]}%…»")
_OPENING = frozenset("([{¿¡«")
_JOINING = frozenset("-—/")
# Quotation marks by family: a mark opens a quotation unless one of its family is open, in
# which case it closes it ("...", „...“, “...”); ” and ’ only close. A ’ with no quotation
# open is an apostrophe inside a word (don’t) and attaches to both sides.
_QUOTES = {'"': '"', "„": '"', "“": '"', "”": '"', "'": "'", "‚": "'", "‘": "'", "’": "'"}
_ONLY_CLOSING = frozenset("”’")


class Tokenizer(Protocol):
    kind: str
    vocab: Vocabulary
    framing: Framing

    def encode(self, text: str) -> list[int]: ...
    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...
    def decode(self, ids: ArrayLike) -> str: ...
    def continue_text(self, prompt: str, ids: ArrayLike) -> str: ...
    def words(self, text: str) -> int: ...
    def save(self, directory: str | os.PathLike) -> None: ...


def count_words(text: str) -> int:
    """Whitespace-separated words of `text`: the denominator of per-word perplexity."""
    return len(text.split())


def detokenize(tokens: Sequence[str]) -> str:
    """Word tokens as text writes them: words spaced, punctuation attached.

    `["him", ",", "“", "I", "will"]` -> `"him, “I will"`; a `.`, `,` or `:` between two
    numbers joins them (`3.5`, `1,000`).
    """
    text, glue, open_quotes = "", True, set()
    for i, token in enumerate(tokens):
        left = right = False
        if token in _QUOTES:
            family = _QUOTES[token]
            closes = family in open_quotes or token in _ONLY_CLOSING
            if token == "’" and family not in open_quotes:
                left = right = True
            elif closes:
                open_quotes.discard(family)
                left = True
            else:
                open_quotes.add(family)
                right = True
        elif token in ".,:" and 0 < i < len(tokens) - 1 and tokens[i - 1].isdigit() and tokens[i + 1].isdigit():
            left = right = True
        else:
            left, right = token in _CLOSING | _JOINING, token in _OPENING | _JOINING
        text += token if glue or left else " " + token
        glue = right
    return text


def _check_training_text(texts: Sequence[str]) -> None:
    if isinstance(texts, str):
        raise ValueError("texts must be a sequence of lines, got a single string")
    if not any(text.strip() for text in texts):
        raise ValueError(f"texts must hold some non-blank training text, got {len(texts)} blank line(s)")


class _SegmentingTokenizer(abc.ABC):
    """Shared encode/decode/save for tokenizers whose pieces are strings looked up in `vocab`."""

    kind = ""
    framing = OWN

    def __init__(self, vocab: Vocabulary):
        self.vocab = vocab

    @staticmethod
    @abc.abstractmethod
    def segment(text: str) -> list[str]:
        """The pieces of `text`, each looked up in the vocabulary."""

    @staticmethod
    @abc.abstractmethod
    def join(pieces: list[str]) -> str:
        """The text of a sequence of pieces."""

    @classmethod
    def train(cls, texts: Sequence[str], *, vocab_size: int = 0, min_count: int = 1) -> Self:
        """Builds the vocabulary of `texts` (one line each), capped at `vocab_size` ids."""
        _check_training_text(texts)
        counts = collections.Counter(piece for text in texts for piece in cls.segment(text))
        return cls(Vocabulary.from_counts(counts, num_lines=len(texts), max_size=vocab_size, min_count=min_count))

    def encode(self, text: str) -> list[int]:
        return [self.vocab.id(piece) for piece in self.segment(text)]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode(self, ids: ArrayLike) -> str:
        """Text of `ids` ([T] int), stopping at the first `</s>` and skipping `<pad>`/`<s>`."""
        return self.join([self.vocab.tokens[id_] for id_ in kept_ids(self.vocab, ids)])

    def continue_text(self, prompt: str, ids: ArrayLike) -> str:
        """`prompt` followed by the text of `ids` ([T] int, as `decode`), joined as one text.

        The prompt keeps its own words (a word outside the vocabulary stays itself)."""
        return self.join(self.segment(prompt) + [self.vocab.tokens[id_] for id_ in kept_ids(self.vocab, ids)])

    def words(self, text: str) -> int:
        return count_words(text)

    def save(self, directory: str | os.PathLike) -> None:
        _save(directory, {"kind": self.kind}, self.vocab)


class CharTokenizer(_SegmentingTokenizer):
    """One token per Unicode character."""

    kind = "char"

    @staticmethod
    def segment(text: str) -> list[str]:
        return list(text)

    @staticmethod
    def join(pieces: list[str]) -> str:
        return "".join(pieces)


class WordTokenizer(_SegmentingTokenizer):
    """Whitespace-split words with punctuation as separate tokens; decode detokenizes."""

    kind = "word"

    @staticmethod
    def segment(text: str) -> list[str]:
        return WORD_PATTERN.findall(text)

    @staticmethod
    def join(pieces: list[str]) -> str:
        return detokenize(pieces)


class BpeTokenizer:
    """Byte-level BPE (HF `tokenizers`) whose pieces are ids of a frequency-sorted `Vocabulary`.

    Byte-level pieces cover every byte, so any text encodes without `<unk>` and decodes back
    exactly. The pieces split letters from punctuation, so no piece equals a special token.
    """

    kind = "bpe"
    framing = OWN

    def __init__(self, vocab: Vocabulary, model: HfTokenizer):
        self.vocab = vocab
        self.model = model

    @staticmethod
    def _untrained_model() -> HfTokenizer:
        model = HfTokenizer(models.BPE())
        model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        model.decoder = decoders.ByteLevel()
        return model

    @classmethod
    def trained_model(
        cls, texts: Iterable[str] | Iterable[list[str]], *, vocab_size: int, min_count: int
    ) -> HfTokenizer:
        """The byte-level BPE model learned from `texts` (lines, or blocks of lines, read once) with
        vocab_size - the specials' count of pieces; merges seen fewer than min_count times are
        not learned.

        Raises:
          ValueError: vocab_size below BPE_MIN_VOCAB_SIZE (256 bytes + the specials).
        """
        if vocab_size < BPE_MIN_VOCAB_SIZE:
            raise ValueError(
                f"vocab_size must be >= {BPE_MIN_VOCAB_SIZE} for byte-level BPE "
                f"(256 bytes + {len(SPECIAL_TOKENS)} specials), got {vocab_size}"
            )
        model = cls._untrained_model()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size - len(SPECIAL_TOKENS),
            min_frequency=min_count,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            special_tokens=[],
            show_progress=False,
        )
        model.train_from_iterator(texts, trainer)
        return model

    @classmethod
    def train(cls, texts: Sequence[str], *, vocab_size: int, min_count: int = 1) -> BpeTokenizer:
        """Trains BPE on `texts` (one line each) up to `vocab_size` ids, specials included.

        Merges of pairs seen fewer than `min_count` times are not learned.
        """
        _check_training_text(texts)
        model = cls.trained_model(texts, vocab_size=vocab_size, min_count=min_count)
        counts = collections.Counter({piece: 0 for piece in model.get_vocab()})
        for encoding in model.encode_batch(list(texts)):
            counts.update(encoding.tokens)
        # Unused bytes and merges that later merges absorbed have count 0, yet must keep an id,
        # or some text would encode to <unk>; min_count is already spent on the merges.
        return cls(Vocabulary.from_counts(counts, num_lines=len(texts), min_count=0), model)

    def encode(self, text: str) -> list[int]:
        return [self.vocab.id(piece) for piece in self.model.encode(text).tokens]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [[self.vocab.id(p) for p in e.tokens] for e in self.model.encode_batch(list(texts))]

    def decode(self, ids: ArrayLike) -> str:
        """Text of `ids` ([T] int), stopping at the first `</s>` and skipping `<pad>`/`<s>`."""
        pieces = [self.vocab.tokens[id_] for id_ in kept_ids(self.vocab, ids)]
        return self.model.decoder.decode(pieces) if pieces else ""

    def continue_text(self, prompt: str, ids: ArrayLike) -> str:
        """`prompt` followed by the text of `ids` ([T] int, as `decode`), decoded together (a
        character whose bytes straddle the two comes out whole)."""
        return self.decode([*self.encode(prompt), *kept_ids(self.vocab, ids)])

    def words(self, text: str) -> int:
        return count_words(text)

    def save(self, directory: str | os.PathLike) -> None:
        _save(directory, {"kind": self.kind, "bpe": json.loads(self.model.to_str())}, self.vocab)


_CLASSES: dict[str, Any] = {"char": CharTokenizer, "word": WordTokenizer, "bpe": BpeTokenizer}


def build_tokenizer(kind: str, texts: Sequence[str], *, vocab_size: int = 0, min_count: int = 1) -> Tokenizer:
    """Builds a `kind` tokenizer ('char' | 'word' | 'bpe') from training lines `texts`.

    Args:
      vocab_size: the most ids, specials included (0: no bound; BPE needs >= 260).
      min_count: char/word: rarer tokens become `<unk>`; bpe: rarer pairs are not merged.
    """
    if kind not in _CLASSES:
        raise ValueError(
            f"tokenizer kind must be one of {', '.join(_CLASSES)} (a pretrained one is loaded), got {kind!r}"
        )
    if vocab_size < 0:
        raise ValueError(f"vocab_size must be >= 0, got {vocab_size}")
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    result: Tokenizer = _CLASSES[kind].train(texts, vocab_size=vocab_size, min_count=min_count)
    return result


def _save(directory: str | os.PathLike, settings: dict, vocab: Vocabulary) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, TOKENIZER_FILE), "w", encoding="utf-8") as file:
        json.dump(settings, file, ensure_ascii=False)
    vocab.save(os.path.join(directory, VOCAB_FILE))


def tokenizer_fingerprint(directory: str | os.PathLike) -> str:
    """sha256 over the files of a saved tokenizer directory, in name order."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        digest.update(name.encode())
        with open(os.path.join(directory, name), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def load_tokenizer(directory: str | os.PathLike) -> Tokenizer:
    """Restores a tokenizer written by its `save(directory)`."""
    paths = [os.path.join(directory, name) for name in (TOKENIZER_FILE, VOCAB_FILE)]
    missing = [path for path in paths if not os.path.isfile(path)]
    if missing:
        raise ValueError(f"tokenizer directory must hold {TOKENIZER_FILE} and {VOCAB_FILE}, missing {missing}")
    with open(paths[0], encoding="utf-8") as file:
        settings = json.load(file)
    kind = settings.get("kind") if isinstance(settings, dict) else None
    if kind == SETTINGS_KIND:
        return PretrainedTokenizer.load(directory, settings)
    if kind not in _CLASSES:
        raise ValueError(f"tokenizer kind must be one of {', '.join(TOKENIZER_KINDS)}, got {kind!r} in {paths[0]}")
    vocab = Vocabulary.load(paths[1])
    if kind == "bpe":
        if "bpe" not in settings:
            raise ValueError(f"a bpe tokenizer file must hold the 'bpe' model, missing in {paths[0]}")
        return BpeTokenizer(vocab, HfTokenizer.from_str(json.dumps(settings["bpe"])))
    result: Tokenizer = _CLASSES[kind](vocab)
    return result
