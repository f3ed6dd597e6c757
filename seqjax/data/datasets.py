"""From a `DataConfig` to encoded splits: validated config, read or generated text, tokenizers.

Tokenizers are built from the train split only, unless given: a run restored from a
checkpoint passes its saved tokenizers, so that ids mean what they meant when it was saved.
Text and parallel corpora are read from their token store (`seqjax.data.store.token_store`), prepared on
first use: their splits are memory maps, never the corpus in memory. Synthetic tasks are
generated in memory (they are small and made from a seed).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

import numpy as np

from seqjax.config import DataConfig
from seqjax.data.corpora.readers import split_pairs, split_texts
from seqjax.data.corpora.sources import (
    SPLITS,
    has_corpus,
    pretrained_tokenizer_dir,
    source_of,
    split_files,
    split_path,
    splits_of,
    to_stderr,
    validate_data_config,
)
from seqjax.data.store.prepare import ensure_store, existing_store
from seqjax.data.store.token_store import TokenStore, source_change
from seqjax.data.synthetic.grammar import grammar_sentences
from seqjax.data.synthetic.oracle import make_oracle, oracle_lines, oracle_sample, oracle_tokenizer
from seqjax.data.synthetic.tasks import SEQ2SEQ_TASKS
from seqjax.data.tokenizers.trained import Tokenizer, build_tokenizer, load_tokenizer
from seqjax.data.tokenizers.vocab import EOS_ID, UNK_ID

# The share of a split's tokens written as the unknown token from which a pretrained tokenizer's
# data is warned about: byte-level and byte-fallback tokenizers never write it, others rarely.
UNKNOWN_WARNING = 0.01
# A run's tokenizers, as `load_data` takes them: the target's, (source's, target's) for pairs, or
# None (built from the data).
Tokenizers = Tokenizer | tuple[Tokenizer, Tokenizer] | None


@dataclasses.dataclass(frozen=True)
class LMData:
    """A language-modelling corpus.

    Attributes:
      splits: split name -> [n] stream of integer ids (int32; uint16 | uint32 memory-mapped
        from a token store), each line as its tokenizer frames it (`Framing.in_stream`: its
        ids, after Llama's `<s>`) followed by `</s>`.
      words: split name -> whitespace words + one per line (the `</s>`, as in the PTB
        convention), the denominator of per-word perplexity.
    """

    tokenizer: Tokenizer
    splits: dict[str, np.ndarray]
    words: dict[str, int]
    fingerprint: str | None = None  # the token store's (`token_store.TokenStore.fingerprint`), None: generated

    @property
    def tokenizers(self) -> Tokenizer:
        """What `load_data` takes to encode another run's data with the same ids."""
        return self.tokenizer


@dataclasses.dataclass(frozen=True)
class ParallelData:
    """A sentence-pair corpus.

    Attributes:
      splits: split name -> (sources, targets), each a sequence of [len] int32 id arrays (no
        `<s>`/`</s>`; the batchers add them): lists, or `token_store.Ragged` over a token store.
      references, sources: split name -> the raw target / source lines, for BLEU and display.
      dropped: split name -> pairs left out for exceeding `max_pair_len` (train only; evaluation
        splits keep every pair).
      words: evaluation split name (valid, test) -> the reference targets' whitespace words
        + one per pair (its `</s>`, as `LMData.words`): the denominator of per-word
        perplexity, the same whatever the target tokenizer.
    """

    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    splits: dict[str, tuple[Sequence[np.ndarray], Sequence[np.ndarray]]]
    references: dict[str, Sequence[str]]
    sources: dict[str, Sequence[str]]
    dropped: dict[str, int]
    fingerprint: str | None = None  # as LMData's
    words: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        """What `load_data` takes to encode another run's data with the same ids."""
        return self.src_tokenizer, self.tgt_tokenizer

    @property
    def tokenizer(self) -> Tokenizer:
        """The target side's, as `LMData.tokenizer`: what a model predicts and decoding emits."""
        return self.tgt_tokenizer


def encode_stream(tokenizer: Tokenizer, lines: list[str]) -> np.ndarray:
    """[n] int32: each line's ids as the tokenizer frames a line in a stream, followed by `</s>`,
    the lines in order (an LM stream, as the token store holds it)."""
    encoded = [tokenizer.framing.in_stream(ids) for ids in tokenizer.encode_batch(lines)]
    return np.fromiter(
        (id_ for ids in encoded for id_ in (*ids, EOS_ID)),
        dtype=np.int32,
        count=sum(len(ids) + 1 for ids in encoded),
    )


def _build(cfg: DataConfig, texts: list[str]) -> Tokenizer:
    return build_tokenizer(cfg.tokenizer, texts, vocab_size=cfg.vocab_size, min_count=cfg.min_count)


def _lm_data(cfg: DataConfig, texts: dict[str, list[str]], tokenizer: Tokenizers) -> LMData:
    if tokenizer is None:
        tokenizer = _build(cfg, texts["train"])
    elif isinstance(tokenizer, tuple):
        raise ValueError(f"tokenizers must be one tokenizer for a language-model corpus, got {len(tokenizer)}")
    streams = {split: encode_stream(tokenizer, lines) for split, lines in texts.items()}
    for split, stream in streams.items():
        where = split if source_of(cfg).generated else split_path(cfg, split)
        warn_unknown(tokenizer, split, where, int(np.count_nonzero(stream == UNK_ID)), len(stream), to_stderr)
    return LMData(
        tokenizer,
        streams,
        {split: sum(tokenizer.words(line) for line in lines) + len(lines) for split, lines in texts.items()},
    )


def warn_unknown(
    tokenizer: Tokenizer, split: str, path: str, unknown: int, tokens: int, echo: Callable[[str], None]
) -> None:
    """Warns (one line to `echo`) when a pretrained tokenizer wrote its unknown token for at least
    `UNKNOWN_WARNING` of a split's tokens: it cannot spell that text (another script, or a
    vocabulary of another language), so what a run measures or generates on it says little.
    Not refused: the run's numbers are still exact for the ids it was given."""
    if tokenizer.kind == "pretrained" and tokens and unknown / tokens >= UNKNOWN_WARNING:
        echo(
            f"warning: {unknown / tokens:.1%} of the {tokens:,} tokens of data.{split} ({path}) are the pretrained "
            f"tokenizer's unknown token: it cannot spell most of this text, so perplexity and samples on it say little"
        )


def _parallel_data(
    cfg: DataConfig, pairs: dict[str, tuple[list[str], list[str]]], tokenizers: Tokenizers
) -> ParallelData:
    """A generated pair corpus; source and target share one tokenizer."""
    if tokenizers is None:
        sources, targets = pairs["train"]
        tokenizers = (_build(cfg, sources + targets),) * 2
    elif not isinstance(tokenizers, tuple) or len(tokenizers) != 2:
        raise ValueError(f"tokenizers must be a (source, target) pair for a parallel corpus, got {tokenizers!r}")
    src_tokenizer, tgt_tokenizer = tokenizers
    data = ParallelData(src_tokenizer, tgt_tokenizer, splits={}, references={}, sources={}, dropped={})
    for split, (sources, targets) in pairs.items():
        src_ids = [np.array(ids, np.int32) for ids in src_tokenizer.encode_batch(sources)]
        tgt_ids = [np.array(ids, np.int32) for ids in tgt_tokenizer.encode_batch(targets)]
        keep = list(range(len(sources)))
        if split == "train":
            keep = [i for i in keep if len(src_ids[i]) <= cfg.max_pair_len and len(tgt_ids[i]) <= cfg.max_pair_len]
        data.splits[split] = ([src_ids[i] for i in keep], [tgt_ids[i] for i in keep])
        data.sources[split] = [sources[i] for i in keep]
        data.references[split] = [targets[i] for i in keep]
        data.dropped[split] = len(sources) - len(keep)
        if split != "train":
            data.words[split] = sum(tgt_tokenizer.words(line) for line in targets) + len(targets)
    return data


def _check_given(given: Tokenizer | tuple[Tokenizer, ...], stored: tuple[Tokenizer, ...], store: TokenStore) -> None:
    """A resumed run's tokenizers must be the store's: same tokens and counts."""
    pairs = given if isinstance(given, tuple) else (given,)
    if len(pairs) != len(stored) or any(a.vocab != b.vocab for a, b in zip(pairs, stored)):
        raise ValueError(
            f"the token store at {store.path} holds another vocabulary than the run's saved tokenizer: its sources "
            "or data config changed since the run started. Restore them, or start a new run in another workdir"
        )


def _stored_data(
    cfg: DataConfig, tokenizers: Tokenizers, fingerprint: str | None, echo: Callable[[str], None]
) -> LMData | ParallelData:

    store = ensure_store(cfg, expected=fingerprint, echo=echo)
    tokenizers_ = _store_tokenizers(cfg, store)
    if tokenizers is not None:
        _check_given(tokenizers, tokenizers_, store)
    return _from_store(cfg, store, tokenizers_, list(store.manifest["splits"]))


def _store_tokenizers(cfg: DataConfig, store: TokenStore) -> tuple[Tokenizer, ...]:
    return tuple(store.tokenizer(side) for side in source_of(cfg).sides)


def _from_store(
    cfg: DataConfig, store: TokenStore, tokenizers: tuple[Tokenizer, ...], splits: list[str]
) -> LMData | ParallelData:
    """The `splits` of the token `store`, its `tokenizers` (one, or source and target)."""
    counts = store.manifest["splits"]
    if not source_of(cfg).pairs:
        for split in splits:
            text = counts[split]["text"]
            warn_unknown(tokenizers[0], split, text["path"], text.get("unknown", 0), text["tokens"], to_stderr)
        words = {split: counts[split]["text"]["words"] + counts[split]["text"]["lines"] for split in splits}
        return LMData(tokenizers[0], {split: store.stream(split) for split in splits}, words, store.fingerprint)
    src_tokenizer, tgt_tokenizer = tokenizers
    data = ParallelData(src_tokenizer, tgt_tokenizer, {}, {}, {}, {}, fingerprint=store.fingerprint)
    for split in splits:
        src, tgt = store.pairs(split)
        sources, references = store.lines(split, "src"), store.lines(split, "tgt")
        if split == "train":
            lengths = store.array(f"{split}.lengths")
            keep = np.flatnonzero((lengths <= cfg.max_pair_len).all(axis=1))
            src, tgt = src.subset(keep), tgt.subset(keep)
            sources, references = sources.subset(keep), references.subset(keep)
        data.splits[split] = (src, tgt)
        data.sources[split], data.references[split] = sources, references
        data.dropped[split] = counts[split]["src"]["lines"] - len(src)
        if split != "train":
            data.words[split] = counts[split]["tgt"]["words"] + counts[split]["tgt"]["lines"]
    return data


def _evaluated_data(
    cfg: DataConfig,
    tokenizers: Tokenizer | tuple[Tokenizer, Tokenizer],
    splits: Sequence[str],
    fingerprint: str | None,
    echo: Callable[[str], None],
) -> LMData | ParallelData:
    """`splits` of a text or parallel corpus under a trained run's `tokenizers`, without its
    other splits' files: from the corpus's token store (`existing_store`, the run's own by its
    `fingerprint` where the paths now resolve elsewhere) when it holds that vocabulary and each
    file of the splits is absent or holds what the store was made from; else read from their
    files and encoded (a file changed since is scored as it is now, said through `echo`)."""
    given = tokenizers if isinstance(tokenizers, tuple) else (tokenizers,)
    store = existing_store(cfg, fingerprint)
    if store is not None and all(split in store.manifest["splits"] for split in splits):
        stored = _store_tokenizers(cfg, store)
        if len(stored) == len(given) and all(a.vocab == b.vocab for a, b in zip(stored, given)):
            changed = _changed_text(cfg, store, splits)
            if not changed:
                return _from_store(cfg, store, stored, list(splits))
            echo(f"notice: {changed[0]}: scoring the file as it is now, not the token store's copy of it")
    validate_data_config(cfg, splits)
    if not source_of(cfg).pairs:
        return _lm_data(cfg, {split: split_texts(cfg, split) for split in splits}, tokenizers)
    return _parallel_data(cfg, {split: split_pairs(cfg, split) for split in splits}, tokenizers)


def _changed_text(cfg: DataConfig, store: TokenStore, splits: Sequence[str]) -> list[str]:
    """`path (why)` of each file of `splits` where the config names it now (a pattern's shards)
    that exists but does not hold what the store's source of it held (`source_change`): the file
    the store read under the directory the split's path resolved to then (its manifest's `data`),
    which differs when a relative path's root moved since."""
    sources = {source["path"]: source for source in store.manifest["sources"]}
    changed = []
    for split in splits:
        now = os.path.dirname(os.path.abspath(split_path(cfg, split)))
        then = os.path.dirname(store.manifest["data"][split])
        for path in dict.fromkeys(shard for side in split_files(cfg, split).values() for shard in side.shards):
            read = os.path.normpath(os.path.join(then, os.path.relpath(os.path.abspath(path), now)))
            why = source_change(sources.get(read), path)
            if why not in (None, "missing"):
                changed.append(f"{path} ({why})")
    return changed


def load_data(
    cfg: DataConfig,
    tokenizers: Tokenizers = None,
    *,
    fingerprint: str | None = None,
    echo: Callable[[str], None] = to_stderr,
    splits: Sequence[str] | None = None,
) -> LMData | ParallelData:
    """Reads or generates the splits of `cfg` and encodes them.

    Args:
      cfg: `kind` synthetic (task grammar or oracle -> LMData; copy/reverse/sort/addition ->
        ParallelData, splits generated from (seed, split number), num_train / num_eval
        examples), text (a file per split) or parallel (a prefix per split with
        `PREFIX.SRC` / `PREFIX.TGT`). Splits whose path is '' are left out (train is required
        but with a pretrained tokenizer, which may also encode no split at all: no splits).
      tokenizers: None to build from the train split, else what `data.tokenizers` returned:
        a tokenizer (LM) or a (source, target) pair (parallel); for a stored corpus, they must
        be the store's.
      fingerprint: a resumed run's token store fingerprint (`data.fingerprint`): its store
        must still hold those ids (a changed source file is refused, named). With `splits`:
        the trained run's, whose store is read where its corpus's paths now resolve elsewhere.
      echo: where a message that the store is being prepared goes.
      splits: only these splits, under a trained run's `tokenizers` (evaluation, decoding):
        a text or parallel corpus reads neither the files nor the store of the others, and
        its token store, when it holds the run's vocabulary, if each file of these splits is
        gone or unchanged (a file present but changed since is read as it is now); else these
        splits' files, encoded. None: every split (training).

    Returns:
      LMData or ParallelData with splits among "train", "valid", "test". Synthetic seq2seq
      tasks share one tokenizer between source and target. The oracle task (oracle.py) has
      its own word vocabulary of every oracle token: data.tokenizer, vocab_size and
      min_count do not apply to it.
    """
    if splits is not None and not source_of(cfg).generated:
        missing = [split for split in splits if split not in splits_of(cfg)]
        if tokenizers is None or missing:
            raise ValueError(
                f"splits must be among the corpus's ({', '.join(splits_of(cfg))}) and come with the run's tokenizers, "
                f"got {', '.join(splits)} and tokenizers {'given' if tokenizers is not None else 'None'}"
            )
        validate_data_config(cfg, ())
        return _evaluated_data(cfg, tokenizers, splits, fingerprint, echo)
    validate_data_config(cfg)
    if source_of(cfg).generated:
        sizes = {"train": cfg.num_train, "valid": cfg.num_eval, "test": cfg.num_eval}
        seeds = {split: (cfg.seed, number) for number, split in enumerate(SPLITS)}
        if cfg.task == "grammar":
            texts = {split: grammar_sentences(sizes[split], seeds[split]) for split in SPLITS}
            return _lm_data(cfg, texts, tokenizers)
        if cfg.task == "oracle":
            oracle = make_oracle()
            texts = {split: oracle_lines(oracle_sample(oracle, sizes[split], seeds[split])) for split in SPLITS}
            return _lm_data(cfg, texts, tokenizers or oracle_tokenizer(oracle, texts["train"]))
        task = SEQ2SEQ_TASKS[cfg.task]
        pairs = {split: task(sizes[split], seeds[split]) for split in SPLITS}
        return _parallel_data(cfg, pairs, tokenizers)
    if not has_corpus(cfg):
        return _lm_data(cfg, {}, tokenizers or load_tokenizer(pretrained_tokenizer_dir(cfg)))
    return _stored_data(cfg, tokenizers, fingerprint, echo)
