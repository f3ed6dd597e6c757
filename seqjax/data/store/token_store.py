"""The token store: a corpus tokenized once, read through memory maps.

A store is a directory:

    manifest.json                format version, the data config it was made under, the
                                 sources (path, size, mtime, ctime, sha256), per-split counts,
                                 the fingerprint
    tokenizer/, tokenizer_src/   the (target or LM) tokenizer and, for a parallel corpus,
                                 the source side's; their vocab.json holds the unigram counts
    SPLIT.tokens.npy             LM: [n] uint16 | uint32, each line's ids then `</s>`
    SPLIT.offsets.npy            LM: [lines + 1] int64, where each line starts
    SPLIT.SIDE.tokens.npy        parallel (SIDE src | tgt): [n] ids, no `<s>`/`</s>`
    SPLIT.SIDE.offsets.npy       [pairs + 1] int64
    SPLIT.lengths.npy            parallel: [pairs, 2] int32, source and target lengths
    SPLIT.SIDE.txt, .lines.npy   parallel: the raw lines (references for BLEU, display) and
                                 [pairs + 1] int64 byte offsets

Ids are uint16 when the vocabulary has at most 65,536 ids, else uint32. Arrays are opened
with `np.load(mmap_mode="r")`: opening a store costs the same whatever the corpus size, and
a process touches only the pages it reads. `prepare.ensure_store` writes stores.

The fingerprint hashes the format, the data config keys that decide the ids
(`TOKENIZATION_KEYS`) and each source's size and content (every shard of a split given as a
glob pattern): it names what the ids mean, so a run records it and refuses to resume on a store
with another, or on sources that changed, naming the file (a shard changed, gone or added).
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any, Self

import numpy as np

from seqjax.config import DataConfig
from seqjax.data.corpora.formats import DEFAULT_FORMAT, corpus_format
from seqjax.data.corpora.sources import record_fields
from seqjax.data.tokenizers.trained import Tokenizer, load_tokenizer, tokenizer_fingerprint

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CACHE_VARIABLE = "SEQJAX_CACHE"
# The data config keys a store's ids depend on; the others (seq_len, buckets, ...) are read
# at batching time, so changing them reuses the store.
TOKENIZATION_KEYS = ("kind", "train", "valid", "test", "src", "tgt", "tokenizer", "vocab_size", "min_count")
SIDES = ("src", "tgt")


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id of a `vocab_size` vocabulary fits in 16 bits, else uint32."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def tokenization_config(cfg: DataConfig, paths: dict[str, str]) -> dict[str, Any]:
    """The keys of `cfg` that decide the ids, with each split's resolved absolute path or pattern
    (and a format other than `lines`, the fields of records read; a pretrained tokenizer's
    fingerprint and framing: a store its lines were framed otherwise in is not this one's)."""
    record: dict[str, Any] = {key: getattr(cfg, key) for key in TOKENIZATION_KEYS}
    record.update({split: os.path.abspath(path) for split, path in paths.items()})
    if cfg.format != DEFAULT_FORMAT:  # a store of the one format there was records none: it keeps its place
        record["format"] = cfg.format
        if corpus_format(cfg.format).fields:
            record["fields"] = list(record_fields(cfg))
    if cfg.tokenizer == "pretrained":  # the tokenizer itself, wherever its run lies, and how it frames a line
        directory = os.path.join(os.path.expanduser(cfg.tokenizer_from), "tokenizer")
        record["tokenizer_fingerprint"] = tokenizer_fingerprint(directory)
        record["framing"] = load_tokenizer(directory).framing.to_json()
    return record


def cache_root() -> str:
    """Where stores without a data.store go: `$SEQJAX_CACHE`, else `~/.cache/seqjax`."""
    return os.environ.get(CACHE_VARIABLE) or os.path.join(os.path.expanduser("~"), ".cache", "seqjax")


def default_location(config: dict[str, Any]) -> str:
    """`cache_root()` / `store-<hash of the tokenization config>`."""
    key = hashlib.sha256(json.dumps([FORMAT_VERSION, config], sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(cache_root(), f"store-{key}")


def fingerprint(config: dict[str, Any], sources: list[dict[str, Any]]) -> str:
    """sha256 of the format, the tokenization config and each source's path, size and content hash."""
    described = [[s["path"], s["size"], s["sha256"]] for s in sources]
    return hashlib.sha256(json.dumps([FORMAT_VERSION, config, described], sort_keys=True).encode()).hexdigest()


def content_hash(path: str) -> str:
    """sha256 of the file's bytes, hex."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def changed_sources(manifest: dict[str, Any], paths: Sequence[str] = ()) -> list[str]:
    """`path (why)` for each source file of the manifest that does not hold what it recorded,
    then for each of `paths` (the files the config's splits name now: a pattern's shards) that is
    not a source (`source_change`)."""
    recorded = {source["path"]: source for source in manifest["sources"]}
    new = [path for path in dict.fromkeys(map(os.path.abspath, paths)) if path not in recorded]
    checked = [*recorded.items(), *((path, None) for path in new)]
    return [f"{path} ({why})" for path, source in checked if (why := source_change(source, path))]


def source_change(source: dict[str, Any] | None, path: str) -> str | None:
    """Why the file `path` does not hold the content a manifest's `source` record says, or None
    when it does: "missing", not a source (`source` None: a shard its split's pattern matches only
    since), another size, or at the source's own path a changed mtime or content (a stat; the file
    is read only when its inode changed since, which rewriting it does even when its mtime is set
    back); at another path (the corpus found elsewhere) its content hash."""
    if not os.path.isfile(path):
        return "missing"
    if source is None:
        return "a new shard, matched by its split's pattern since the store was prepared"
    stat = os.stat(path)
    if stat.st_size != source["size"]:
        return f"size {stat.st_size} bytes, was {source['size']}"
    if os.path.abspath(path) != source["path"]:
        return None if content_hash(path) == source["sha256"] else "its content differs from the store's source"
    if stat.st_mtime_ns != source["mtime_ns"]:
        return "modified since the store was prepared"
    if stat.st_ctime_ns != source.get("ctime_ns", stat.st_ctime_ns) and content_hash(path) != source["sha256"]:
        return "its content changed since the store was prepared, its mtime kept"
    return None


def read_manifest(directory: str) -> dict[str, Any]:
    """The manifest of the store in `directory`.

    Raises:
      ValueError: the directory holds no manifest (not a store, or not a finished one), or
        one that is not valid JSON.
    """
    path = os.path.join(directory, MANIFEST)
    if not os.path.isfile(path):
        raise ValueError(f"{directory!r} is not a token store (no {MANIFEST}); delete it or point data.store elsewhere")
    try:
        with open(path, encoding="utf-8") as file:
            manifest = json.load(file)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path!r} is not valid JSON ({error}); delete the store to prepare it again") from None
    if not isinstance(manifest, dict) or "format" not in manifest:
        raise ValueError(f"{path!r} holds no format version; delete the store to prepare it again")
    return manifest


class _Rows(Sequence):
    """Items of variable size over a flat array with [n + 1] offsets: item i spans
    [offsets[r], offsets[r + 1]) of the array, r = rows[i] (rows: all, or a subset)."""

    def __init__(self, flat: np.ndarray, offsets: np.ndarray, rows: np.ndarray | None = None):
        self.flat, self.offsets, self.rows = flat, offsets, rows

    @abc.abstractmethod
    def _item(self, start: int, stop: int) -> Any:
        """The item over flat[start:stop]."""

    def __len__(self) -> int:
        return len(self.offsets) - 1 if self.rows is None else len(self.rows)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(f"index must be in [-{len(self)}, {len(self)}), got {index}")
        row = int(index % len(self) if self.rows is None else self.rows[index])
        return self._item(int(self.offsets[row]), int(self.offsets[row + 1]))

    def subset(self, rows: np.ndarray) -> Self:
        """The items `rows` ([k] int64 positions in this sequence), in that order."""
        return type(self)(self.flat, self.offsets, rows if self.rows is None else self.rows[rows])


class Ragged(_Rows):
    """Variable-length id sequences over a flat token array: item i is
    tokens[offsets[rows[i]] : offsets[rows[i] + 1]] as [len] int32 (rows: all, or a subset).

    `lengths` gives every length without touching the tokens.
    """

    def _item(self, start: int, stop: int) -> np.ndarray:
        return np.asarray(self.flat[start:stop], np.int32)

    @property
    def lengths(self) -> np.ndarray:
        """[len] int64."""
        lengths = np.diff(self.offsets)
        return lengths if self.rows is None else lengths[self.rows]


class TextLines(_Rows):
    """The lines of a UTF-8 text read through a memory map with [lines + 1] byte offsets
    (each line's bytes end with its newline)."""

    def _item(self, start: int, stop: int) -> str:
        return bytes(self.flat[start : stop - 1]).decode("utf-8")


@dataclasses.dataclass(frozen=True)
class TokenStore:
    """An opened store: its directory and manifest; arrays are mapped on request."""

    path: str
    manifest: dict[str, Any]

    @property
    def fingerprint(self) -> str:
        return str(self.manifest["fingerprint"])

    @property
    def splits(self) -> list[str]:
        return list(self.manifest["splits"])

    def array(self, name: str) -> np.ndarray:
        result: np.ndarray = np.load(os.path.join(self.path, f"{name}.npy"), mmap_mode="r")
        return result

    def tokenizer(self, side: str = "tgt") -> Tokenizer:
        """The LM's tokenizer, or the `side` ('src' | 'tgt') one of a parallel corpus."""
        return load_tokenizer(os.path.join(self.path, "tokenizer_src" if side == "src" else "tokenizer"))

    def stream(self, split: str) -> np.ndarray:
        """LM: [n] uint16 | uint32, each line's ids followed by `</s>` (mapped, not read)."""
        return self.array(f"{split}.tokens")

    def pairs(self, split: str) -> tuple[Ragged, Ragged]:
        """Parallel: the source and target id sequences of `split`."""
        return (
            Ragged(self.array(f"{split}.src.tokens"), self.array(f"{split}.src.offsets")),
            Ragged(self.array(f"{split}.tgt.tokens"), self.array(f"{split}.tgt.offsets")),
        )

    def lines(self, split: str, side: str) -> TextLines:
        """Parallel: the raw `side` lines of `split`."""
        data = np.memmap(os.path.join(self.path, f"{split}.{side}.txt"), np.uint8, mode="r")
        return TextLines(data, self.array(f"{split}.{side}.lines"))


def open_store(directory: str) -> TokenStore:
    """The store in `directory`, after checking its manifest's format version."""
    manifest = read_manifest(directory)
    if manifest["format"] != FORMAT_VERSION:
        raise ValueError(
            f"the token store {directory!r} has format {manifest['format']}, this seqjax reads format "
            f"{FORMAT_VERSION}; delete it (or run seqjax prepare) to prepare it again"
        )
    return TokenStore(directory, manifest)
