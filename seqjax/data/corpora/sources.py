"""Where a `DataConfig`'s data comes from and whether it is usable: what each `data.kind` is
(`SOURCES`, the one place the kinds are told apart), its splits, their files, the config's
checks, and where messages about the data go. Below both the readers of a corpus
(`datasets.py`) and the preparer of its token store (`store/prepare.py`), which share these.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import typing
from collections.abc import Sequence

from seqjax.checks import check_int, check_one_of
from seqjax.config import DATA_FORMATS, DataConfig
from seqjax.config.sections import SyntheticTask, TokenizerKind
from seqjax.data.corpora.formats import DEFAULT_TEXT_FIELD, SIDES, SideFile, corpus_format, parallel_files
from seqjax.data.corpora.record_fields import field_path
from seqjax.data.synthetic.tasks import SEQ2SEQ_TASKS
from seqjax.data.tokenizers.trained import BPE_MIN_VOCAB_SIZE

SPLITS = ("train", "valid", "test")
FIELD_KEYS = {"text_field": DEFAULT_TEXT_FIELD, "src_field": "", "tgt_field": ""}  # key -> default


DATA_ROOT_VARIABLE = "SEQJAX_DATA"


@dataclasses.dataclass(frozen=True)
class Source:
    """What one `data.kind` is.

    Attributes:
      generated: made in code from data.seed and data.task (every split, in memory: no file is
        read and there is no token store); else read from files named per split, through the
        corpus's token store.
      pairs: a file corpus of sentence pairs (its store's sides `src` and `tgt`), else of texts
        (one LM stream, side ''). A generated kind holds pairs when its task is a seq2seq one.
      pretrained_tokenizer: data.tokenizer=pretrained (a run's own tokenizer) may encode it.
    """

    generated: bool = False
    pairs: bool = False
    pretrained_tokenizer: bool = False

    def holds_pairs(self, cfg: DataConfig) -> bool:
        """Whether `cfg`'s data are sentence pairs, which need an encoder-decoder; else a
        language-model stream."""
        return cfg.task in SEQ2SEQ_TASKS if self.generated else self.pairs

    @property
    def sides(self) -> tuple[str, ...]:
        """The sides of a file corpus, as its token store keeps them: ('',) one stream, or
        ('src', 'tgt')."""
        return SIDES if self.pairs else ("",)

    def split_files(self, cfg: DataConfig, split: str) -> dict[str, SideFile]:
        """side -> where `split` keeps it (`formats.SideFile`), in data.format; {} for generated
        data or a split without a path."""
        path = split_path(cfg, split)
        if self.generated or not path:
            return {}
        if self.pairs:
            return parallel_files(path, *side_names(cfg), cfg.format)
        return {"": SideFile(path, (cfg.text_field,))}


SOURCES = {
    "synthetic": Source(generated=True),
    "text": Source(pretrained_tokenizer=True),
    "parallel": Source(pairs=True),
}


def source_of(cfg: DataConfig) -> Source:
    """What `cfg`'s data.kind is. Raises ValueError for a kind not in `SOURCES`."""
    check_one_of("data.kind", cfg.kind, tuple(SOURCES))
    return SOURCES[cfg.kind]


def data_path(cfg: DataConfig, path: str) -> str:
    """`path` (a corpus file or prefix) under data.root when relative (data.root '' falls back
    to $SEQJAX_DATA, then to the working directory)."""
    root = cfg.root or os.environ.get(DATA_ROOT_VARIABLE, "")
    return os.path.join(os.path.expanduser(root), path) if path and root else path


def split_path(cfg: DataConfig, split: str) -> str:
    """The file or prefix (a parallel corpus in two files) of `split`: data.<split>, as `data_path`."""
    return data_path(cfg, getattr(cfg, split))


def side_names(cfg: DataConfig) -> tuple[str, str]:
    """What names the source and target sides of a parallel corpus in data.format: the fields of
    its records for a format of pairs in records (data.src_field and data.tgt_field, each '' for
    the field named data.src, data.tgt), else the suffixes of its two files (data.src, data.tgt)."""
    if corpus_format(cfg.format).pairs_in_records:
        return cfg.src_field or cfg.src, cfg.tgt_field or cfg.tgt
    return cfg.src, cfg.tgt


def record_fields(cfg: DataConfig) -> tuple[str, ...]:
    """The fields a corpus's texts are read from, for a format of records with named fields:
    data.text_field of a text corpus, the two fields of a parallel one's pairs (`side_names`)."""
    return side_names(cfg) if source_of(cfg).pairs else (cfg.text_field,)


def holds_pairs(cfg: DataConfig) -> bool:
    """True for sentence-pair data (parallel corpora, the synthetic seq2seq tasks), which
    needs an encoder-decoder; False for a language-model stream."""
    return source_of(cfg).holds_pairs(cfg)


def splits_of(cfg: DataConfig) -> list[str]:
    """The splits `cfg` has: every one for generated data, else those with a path."""
    return [split for split in SPLITS if source_of(cfg).generated or getattr(cfg, split)]


def split_files(cfg: DataConfig, split: str) -> dict[str, SideFile]:
    """side -> where `split` of `cfg`'s corpus keeps it (`Source.split_files`)."""
    return source_of(cfg).split_files(cfg, split)


def validate_data_config(cfg: DataConfig, splits: Sequence[str] = SPLITS) -> None:
    """Checks every field `load_data` uses, and that the files of `splits` exist, with the value
    and the rule in each message."""
    source = source_of(cfg)
    check_one_of("data.tokenizer", cfg.tokenizer, typing.get_args(TokenizerKind))
    check_one_of("data.format", cfg.format, tuple(DATA_FORMATS))
    for name, minimum in (
        ("vocab_size", 0),
        ("min_count", 1),
        ("seq_len", 1),
        ("max_pair_len", 1),
        ("num_train", 1),
        ("num_eval", 1),
        ("seed", 0),
    ):
        check_int(f"data.{name}", getattr(cfg, name), minimum)
    if (cfg.tokenizer == "pretrained") != bool(cfg.tokenizer_from):
        raise ValueError(
            "data.tokenizer=pretrained and data.tokenizer_from (the run whose tokenizer encodes the corpus) go "
            f"together, got data.tokenizer={cfg.tokenizer!r}, data.tokenizer_from={cfg.tokenizer_from!r}"
        )
    if cfg.tokenizer == "pretrained" and not source.pretrained_tokenizer:
        takes = ", ".join(f"data.kind={kind}" for kind, s in SOURCES.items() if s.pretrained_tokenizer)
        raise ValueError(f"data.tokenizer=pretrained encodes a text corpus ({takes}), got {cfg.kind!r}")
    if cfg.tokenizer == "pretrained" and not os.path.isdir(pretrained_tokenizer_dir(cfg)):
        raise ValueError(
            f"data.tokenizer_from={cfg.tokenizer_from!r} must be a run directory holding tokenizer/ (e.g. written by "
            "seqjax import-hf)"
        )
    if cfg.tokenizer == "bpe" and cfg.vocab_size < BPE_MIN_VOCAB_SIZE:
        raise ValueError(f"data.vocab_size must be >= {BPE_MIN_VOCAB_SIZE} for the bpe tokenizer, got {cfg.vocab_size}")
    buckets = cfg.buckets
    if not buckets or any(isinstance(b, bool) or not isinstance(b, int) or b < 2 for b in buckets):
        raise ValueError(f"data.buckets must be a non-empty tuple of ints >= 2, got {buckets}")
    if any(a >= b for a, b in zip(buckets, buckets[1:])):
        raise ValueError(f"data.buckets must be strictly increasing, got {buckets}")
    if source.generated:
        check_one_of("data.task", cfg.task, typing.get_args(SyntheticTask))
        return
    two_files = source.pairs and not corpus_format(cfg.format).pairs_in_records
    if not cfg.train and cfg.tokenizer != "pretrained":
        raise ValueError(f"data.train must name the training {'prefix' if two_files else 'file'}, got ''")
    if source.pairs and (not cfg.src or not cfg.tgt or cfg.src == cfg.tgt):
        raise ValueError(f"data.src and data.tgt must be two different names, got {cfg.src!r}, {cfg.tgt!r}")
    _check_fields(cfg)
    for split in splits:
        prefix = split_path(cfg, split)
        sides = source.split_files(cfg, split).values()
        paths = list(dict.fromkeys(side.path for side in sides))
        if not paths:
            continue
        if two_files and any(side.shards != (side.path,) for side in sides):
            raise ValueError(
                f"data.{split} must be a prefix of two files (PREFIX.{cfg.src}, PREFIX.{cfg.tgt}) for a parallel "
                f"corpus in data.format={cfg.format}, got the pattern {getattr(cfg, split)!r}; shards of pairs are "
                "files of pairs in records (data.format=jsonl or parquet)"
            )
        unmatched = [side.path for side in sides if not side.shards]
        if unmatched:
            raise ValueError(
                f"data.{split} must match existing files, got the pattern {unmatched[0]!r}, which matches none"
            )
        paths = list(dict.fromkeys(shard for side in sides for shard in side.shards))
        folders = [p for side in sides if side.shards != (side.path,) for p in side.shards if os.path.isdir(p)]
        if folders:
            raise ValueError(
                f"data.{split} must match files only, got {getattr(cfg, split)!r}, which matches {folders}"
            )
        if not two_files and os.path.isdir(prefix):
            raise ValueError(f"data.{split} must name a file, got {prefix!r}, which is a directory")
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing and two_files and os.path.isdir(prefix):
            raise ValueError(
                f"data.{split} must be a prefix PREFIX of the files PREFIX.{cfg.src} and PREFIX.{cfg.tgt}, "
                f"got {prefix!r}, which is a directory (looked for {missing})"
            )
        if missing:
            where = f" (relative paths are read under data.root, else ${DATA_ROOT_VARIABLE}, else the working dir)"
            if os.path.isabs(getattr(cfg, split)):
                where = ""
            raise ValueError(f"data.{split} must name existing files, missing {missing}{where}")


def _check_fields(cfg: DataConfig) -> None:
    """data.text_field, data.src_field and data.tgt_field: field names, set only for a format of
    records with named fields, and a pair's two fields different."""
    if not corpus_format(cfg.format).fields:
        set_ = [
            f"data.{key}={getattr(cfg, key)!r}" for key, default in FIELD_KEYS.items() if getattr(cfg, key) != default
        ]
        if set_:
            named = ", ".join(name for name in DATA_FORMATS if DATA_FORMATS[name].build.fields)
            raise ValueError(
                f"{', '.join(set_)} names a field of records, which data.format={cfg.format} does not have ({named} do)"
            )
        return
    for key, name in zip(("text_field", "src_field", "tgt_field"), (cfg.text_field, *side_names(cfg))):
        try:
            field_path(name)
        except ValueError as error:
            raise ValueError(f"data.{key}: {error}") from None
    if source_of(cfg).pairs and len(set(side_names(cfg))) == 1:
        raise ValueError(f"data.src_field and data.tgt_field must be two different fields, got {side_names(cfg)}")


def pretrained_tokenizer_dir(cfg: DataConfig) -> str:
    """The tokenizer directory of data.tokenizer_from's run (a run's `tokenizer/`)."""
    return os.path.join(os.path.expanduser(cfg.tokenizer_from), "tokenizer")


def has_corpus(cfg: DataConfig) -> bool:
    """False for text encoded by a pretrained tokenizer with no split named: a run that holds a
    model and its tokenizer only (an imported one), which decodes but reads no data."""
    return source_of(cfg).generated or any(getattr(cfg, split) for split in SPLITS)


def to_stderr(message: str) -> None:
    """Where messages about the data (a store being prepared) go by default: not stdout, which
    `seqjax generate --input -` writes its output to."""
    print(message, file=sys.stderr)
