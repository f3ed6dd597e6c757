"""A pretrained model's own tokenizer (a Hugging Face `tokenizer.json`, kept as it is), its ids
laid out among seqjax's.

seqjax's ids 0..3 are always `<pad>`, `<s>`, `</s>`, `<unk>` (`vocab.SPECIAL_TOKENS`). A
pretrained vocabulary of R rows (HF ids 0..R-1) names some of its tokens for these roles; each
such token moves to its role's id, and every other row follows in HF order, from id 4 on
(`VocabMap`). One token may play several roles (GPT-2's `<|endoftext|>` is BOS and EOS): it is
predicted at one id only, its home, chosen EOS first, then BOS, UNK, PAD; the other roles' ids
read its row as input and are never predicted. A role the vocabulary has no token for (GPT-2's
PAD) gets an id of its own, a zero row, never predicted either. So every HF row is predicted at
exactly one id, and the distribution over seqjax's ids is the pretrained one.

A text is framed as the tokenizer's post-processor frames it (`post_processor_framing`): the
special tokens it adds before and after a text (Llama's `<s>`, none for GPT-2) are the run's
`Framing`, so that a prompt reads as `transformers`' `tokenizer(prompt)` and a line of a corpus
as that, then `</s>`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike
from tokenizers import Tokenizer as HfTokenizer

from seqjax.data.tokenizers.framing import Framing
from seqjax.data.tokenizers.vocab import SPECIAL_TOKENS, TOKENIZER_FILE, VOCAB_FILE, Vocabulary, kept_ids

ROLES = ("pad", "bos", "eos", "unk")  # seqjax's ids 0..3, in that order (vocab.SPECIAL_TOKENS)
HOME_ORDER = ("eos", "bos", "unk", "pad")  # which role a token playing several is predicted as
HF_PREFIX = "hf_"  # the pretrained tokenizer's own files, saved under this prefix, as they are
SETTINGS_KIND = "pretrained"
FRAMING_PROBE = "the framing probe"  # any text: what the post-processor adds around it is the framing


@dataclasses.dataclass(frozen=True)
class VocabMap:
    """The layout of R pretrained rows among V seqjax ids.

    Attributes:
      rows: R, the pretrained vocabulary's rows (its embedding table's).
      roles: role ("pad" | "bos" | "eos" | "unk") -> the HF id playing it, or None.
      seqjax_of: [R] int64, each HF row's id (where it is predicted).
      hf_of: [V] int64, the HF row each id reads as input (-1: none, a zero row).
      predicted: [V] bool, the ids whose scores are the pretrained model's (the homes).
    """

    rows: int
    roles: Mapping[str, int | None]
    seqjax_of: np.ndarray
    hf_of: np.ndarray
    predicted: np.ndarray

    @classmethod
    def build(cls, rows: int, roles: Mapping[str, int | None]) -> VocabMap:
        """The layout of `rows` HF rows whose special roles are `roles` (a key per `ROLES`)."""
        if set(roles) != set(ROLES):
            raise ValueError(f"roles must name each of {ROLES}, got {sorted(roles)}")
        for role, hf_id in roles.items():
            if hf_id is not None and not 0 <= hf_id < rows:
                raise ValueError(f"the {role} token's id must be in [0, {rows}), got {hf_id}")
        homes: dict[int, str] = {}
        for role in HOME_ORDER:
            hf_id = roles[role]
            if hf_id is not None and hf_id not in homes:
                homes[hf_id] = role
        hf_of = [-1 if (hf_id := roles[role]) is None else hf_id for role in ROLES]
        predicted = [homes.get(hf_id) == role for hf_id, role in zip(hf_of, ROLES)]
        seqjax_of = np.empty(rows, np.int64)
        for hf_id, role in homes.items():
            seqjax_of[hf_id] = ROLES.index(role)
        others = np.array([h for h in range(rows) if h not in homes], np.int64)
        seqjax_of[others] = len(ROLES) + np.arange(len(others))
        return cls(
            rows,
            dict(roles),
            seqjax_of,
            np.concatenate([np.array(hf_of, np.int64), others]),
            np.concatenate([np.array(predicted), np.ones(len(others), bool)]),
        )

    @property
    def size(self) -> int:
        """V, the seqjax ids."""
        return len(self.hf_of)

    def to_seqjax_rows(self, table: np.ndarray) -> np.ndarray:
        """[R, ...] rows in HF order -> [V, ...] in seqjax's (zeros for the ids reading none)."""
        out = np.zeros((self.size, *table.shape[1:]), table.dtype)
        reads = self.hf_of >= 0
        out[reads] = table[self.hf_of[reads]]
        return out

    def to_hf_rows(self, table: np.ndarray) -> np.ndarray:
        """[V, ...] rows in seqjax order -> [R, ...] in HF's: each HF row from its home id."""
        result: np.ndarray = table[self.seqjax_of]
        return result


class PretrainedTokenizer:
    """Encodes with the pretrained `tokenizer.json` and maps its ids to seqjax's through a
    `VocabMap`: `encode` gives a text's own ids (no special tokens), `framing` the ids the
    tokenizer's post-processor puts around them.

    `files`: the pretrained tokenizer's files by their own names (`tokenizer.json` and, when the
    checkpoint had them, `tokenizer_config.json`, `special_tokens_map.json`), kept byte for byte
    so that a run writes them back unchanged.
    """

    kind = "pretrained"

    def __init__(self, files: Mapping[str, bytes], layout: VocabMap):
        self.files = dict(files)
        self.layout = layout
        self.model = HfTokenizer.from_str(self.files["tokenizer.json"].decode("utf-8"))
        self.vocab = Vocabulary(vocab_tokens(self.model, layout), np.zeros(layout.size, np.int64))
        self.framing = post_processor_framing(self.model, layout)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        encoded = self.model.encode_batch(list(texts), add_special_tokens=False)
        return [self.layout.seqjax_of[np.asarray(e.ids, np.int64)].tolist() for e in encoded]

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    def decode(self, ids: ArrayLike) -> str:
        """Text of `ids` ([T] int), stopping at the first `</s>` and skipping `<pad>`/`<s>`."""
        hf_ids = self.layout.hf_of[np.asarray(kept_ids(self.vocab, ids), np.int64)]
        return self.model.decode(hf_ids[hf_ids >= 0].tolist(), skip_special_tokens=False)

    def continue_text(self, prompt: str, ids: ArrayLike) -> str:
        """`prompt` followed by the text of `ids` ([T] int, as `decode`), decoded together."""
        return self.decode([*self.encode(prompt), *kept_ids(self.vocab, ids)])

    def words(self, text: str) -> int:
        return len(text.split())

    def settings(self) -> dict:
        """What `save` writes beside the files: the kind and the layout's inputs."""
        return {"kind": SETTINGS_KIND, "rows": self.layout.rows, "roles": dict(self.layout.roles)}

    def save(self, directory: str | os.PathLike) -> None:
        os.makedirs(directory, exist_ok=True)
        for name, content in self.files.items():
            with open(os.path.join(directory, HF_PREFIX + name), "wb") as file:
                file.write(content)
        with open(os.path.join(directory, TOKENIZER_FILE), "w", encoding="utf-8") as file:
            json.dump(self.settings(), file)
        self.vocab.save(os.path.join(directory, VOCAB_FILE))

    @classmethod
    def load(cls, directory: str | os.PathLike, settings: dict) -> PretrainedTokenizer:
        """The tokenizer `save(directory)` wrote, whose settings file held `settings`."""
        names = sorted(n for n in os.listdir(directory) if n.startswith(HF_PREFIX))
        files = {}
        for name in names:
            with open(os.path.join(directory, name), "rb") as file:
                files[name[len(HF_PREFIX) :]] = file.read()
        if "tokenizer.json" not in files:
            raise ValueError(f"a pretrained tokenizer directory must hold {HF_PREFIX}tokenizer.json, got {names}")
        return cls(files, VocabMap.build(settings["rows"], settings["roles"]))


def post_processor_framing(model: HfTokenizer, layout: VocabMap) -> Framing:
    """The special tokens the tokenizer's post-processor puts before and after a text (its
    `add_special_tokens=True` encoding against the plain one), in seqjax's ids.

    Raises:
      ValueError: the post-processor does more than put special tokens around the text.
    """
    plain = model.encode(FRAMING_PROBE, add_special_tokens=False).ids
    framed = model.encode(FRAMING_PROBE, add_special_tokens=True)
    special = framed.special_tokens_mask
    first = next((i for i, s in enumerate(special) if not s), len(special))
    last = next((len(special) - i for i, s in enumerate(reversed(special)) if not s), first)
    if framed.ids[first:last] != plain:
        raise ValueError(
            f"the post-processor of tokenizer.json must only put special tokens before and after a text, but it "
            f"encodes {FRAMING_PROBE!r} as {framed.ids} against {plain} without it"
        )
    return Framing(
        tuple(int(i) for i in layout.seqjax_of[framed.ids[:first]]),
        tuple(int(i) for i in layout.seqjax_of[framed.ids[last:]]),
    )


def vocab_tokens(model: HfTokenizer, layout: VocabMap) -> tuple[str, ...]:
    """The token string of each seqjax id: the specials' own names at 0..3, then each HF row's
    token (`<unused_N>` for row N the tokenizer has no token for, e.g. an embedding padded to a
    round size).

    Raises:
      ValueError: an HF token outside the specials' ids spells a seqjax special's name.
    """
    named = {i: t for t, i in model.get_vocab(with_added_tokens=True).items()}
    tokens = [named.get(int(h), f"<unused_{h}>") for h in layout.hf_of[len(ROLES) :]]
    clashes = sorted(set(tokens) & set(SPECIAL_TOKENS))
    if clashes:
        raise ValueError(
            f"the tokenizer's token(s) {clashes} spell seqjax's special tokens {SPECIAL_TOKENS} but are not declared "
            "as those roles (bos_token, eos_token, pad_token, unk_token in tokenizer_config.json)"
        )
    return SPECIAL_TOKENS + tuple(tokens)
