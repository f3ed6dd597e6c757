"""Corpus formats (`data.format`): how one file of a corpus is read into records. Each format is
one module that registers itself with one call, `DATA_FORMATS.register(name, CorpusFormat(read))`
(`lines.py`: one text a line; `jsonl.py`, `parquet.py`: records of named fields); every reading of
a corpus file goes through the format its config names: the token store's preparation, the
splits evaluation reads directly, the input of `seqjax generate` and the corpora of `seqjax
backtranslate`.

A format's reader streams the records of an open binary file:

    read(file: BinaryIO, label: str, fields: tuple[str, ...]) -> Iterator[Sequence[Record]]

consecutive non-empty lists of records, so that a corpus of any size is read in the memory of
one block. `fields` names what a record gives: one name, one example's text (a `str`: a line of a
language-model corpus, a line of one side of a parallel corpus kept in two files, an input to
generate from); two, given only to a format whose parallel corpora hold a pair in each record
(`pairs_in_records`), one example's (source, target) texts. A format of records with named fields
(`CorpusFormat.fields`) reads the texts from the fields so named (data.text_field, or
data.src_field and data.tgt_field: `sources.record_fields`); a dot in a name reaches into a nested
record (`translation.en`). Another format ignores the names. No text holds a line break ("\\n"):
the store keeps one text a line. A record the reader cannot read is refused with one ValueError
naming `label` (the file) and the 1-based line or row. `file` is read from its start; a reader
may seek when `file.seekable()` (a path always is; standard input is not).

A gzip or zstd file is given to the reader decompressed (`compressed.py`: known by its first
bytes), unless its format reads files as they are (`decompress=False`: Parquet compresses inside
the file). A split's path may be a glob pattern of shards (`train-*.jsonl`), read in sorted order
as one corpus (`shard_paths`). Whatever the reader reads is hashed and counted on the way
(`record_blocks`: the token store's content hash of each file and the progress of `seqjax
prepare`), so a reader knows nothing of either.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import io
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, Protocol, cast

from seqjax.config import DATA_FORMATS
from seqjax.data.corpora.compressed import decompressed_records

Record = str | tuple[str, str]
DEFAULT_FORMAT = "lines"  # the one format before formats were registered: its stores record no format
DEFAULT_TEXT_FIELD = "text"  # data.text_field's default
SIDES = ("src", "tgt")


class Reader(Protocol):
    def __call__(self, file: BinaryIO, label: str, fields: tuple[str, ...]) -> Iterator[Sequence[Record]]: ...


@dataclasses.dataclass(frozen=True)
class CorpusFormat:
    """A registered `data.format`.

    Attributes:
      read: the reader (the module docstring gives its contract).
      pairs_in_records: False: a parallel split is two files, PREFIX.SRC and PREFIX.TGT, of text
        records aligned by position; True: one file (data.train names it) whose records are pairs.
      fields: records are objects of named fields, which data.text_field, data.src_field and
        data.tgt_field name; False: a record is its text (or pair) as it is, the names unread.
      decompress: a gzip or zstd file is given to `read` decompressed; False: as it is.
    """

    read: Reader
    pairs_in_records: bool = False
    fields: bool = False
    decompress: bool = True


def shard_paths(path: str) -> tuple[str, ...]:
    """The files `path` names: itself, or when no such file exists and it is a glob pattern
    (`*`, `?`, `[...]`), the files matching it in sorted order (none when nothing matches)."""
    if os.path.exists(path) or not glob.has_magic(path):
        return (path,)
    return tuple(sorted(glob.glob(path)))


@dataclasses.dataclass(frozen=True)
class SideFile:
    """Where the texts of one side of a split are: the file or glob pattern `path` and the files
    it names (`shards`, found when made), the `fields` each record is read from (one, a text; two,
    the pair of a format of pairs in records) and which of a pair's texts is this side's (`pick`:
    0 source, 1 target)."""

    path: str
    fields: tuple[str, ...] = (DEFAULT_TEXT_FIELD,)
    pick: int = 0
    shards: tuple[str, ...] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shards", shard_paths(self.path))

    def texts(self, block: Sequence[Record]) -> list[str]:
        """This side's texts of a block of its records (`shard_blocks`)."""
        return list(cast(Sequence[str], block)) if len(self.fields) == 1 else [record[self.pick] for record in block]


def corpus_format(name: str) -> CorpusFormat:
    """The format registered as `name`. Raises ValueError naming the registered ones."""
    result: CorpusFormat = DATA_FORMATS[name].build
    return result


def parallel_files(prefix: str, src: str, tgt: str, format: str) -> dict[str, SideFile]:
    """side ('src', 'tgt') -> where a parallel split named `prefix` keeps it in `format`: the
    files PREFIX.SRC and PREFIX.TGT (`src`, `tgt`: suffixes), or for pairs in records the file
    or shards PREFIX (`src`, `tgt`: the fields of the pair)."""
    if corpus_format(format).pairs_in_records:
        return {side: SideFile(prefix, (src, tgt), pick) for pick, side in enumerate(SIDES)}
    return {side: SideFile(f"{prefix}.{suffix}") for side, suffix in zip(SIDES, (src, tgt))}


def check_file(path: str, name: str = "path") -> None:
    """Raises ValueError, naming the file and what it is (`name`: the option that gave it),
    when `path` is a directory, missing or empty."""
    if os.path.isdir(path):
        raise ValueError(f"{name} must be a file, got {path!r}, which is a directory")
    if not os.path.isfile(path):
        raise ValueError(f"{name} must be an existing file, got {path!r}")
    if os.path.getsize(path) == 0:
        raise ValueError(f"{name} must not be empty, got {path!r}")


class _Watched(io.RawIOBase):
    """A file read through: every byte read, in order, goes to a sha256 and `progress`; a seek
    elsewhere than where the reads are stops the hash (the file is hashed whole afterwards)."""

    def __init__(self, raw: io.FileIO, progress: Callable[[int], object] | None):
        self.raw, self.progress = raw, progress
        self.digest, self.position, self.in_order = hashlib.sha256(), 0, True

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:  # buffer: a writable bytes-like object
        count = self.raw.readinto(buffer)
        if count:
            if self.in_order:
                self.digest.update(memoryview(buffer)[:count])
            if self.progress is not None:
                self.progress(count)
            self.position += count
        return count

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        position = self.raw.seek(offset, whence)
        self.in_order = self.in_order and position == self.position
        self.position = position
        return position

    def tell(self) -> int:
        return self.position

    def content_hash(self) -> str:
        """sha256 of the file's bytes, hex: the one the reads made when they read all of it in
        order, else read again."""
        if self.in_order and self.position == os.fstat(self.raw.fileno()).st_size:
            return self.digest.hexdigest()
        self.raw.seek(0)
        return hashlib.file_digest(self.raw, "sha256").hexdigest()


def record_blocks(
    path: str,
    *,
    format: str = DEFAULT_FORMAT,
    fields: tuple[str, ...] = (DEFAULT_TEXT_FIELD,),
    name: str = "path",
    hashed: Callable[[str], object] | None = None,
    progress: Callable[[int], object] | None = None,
) -> Iterator[Sequence[Record]]:
    """The records of the corpus file `path` in `format`, as its reader gives them (texts, or
    pairs, read from `fields`).

    Args:
      name: what the file is (the option that gave it), in the message that refuses it.
      hashed: called, after the last block, with the sha256 (hex) of the file's bytes.
      progress: called with the number of bytes of each read of the file.

    Raises:
      ValueError: the file is a directory, missing or empty (`check_file`), its compressed data
        is corrupt, or the reader refuses a record (naming the file and its line or row).
    """
    check_file(path, name)
    with open(path, "rb", buffering=0) as raw:
        watched = _Watched(raw, progress)
        yield from file_records(cast(BinaryIO, io.BufferedReader(watched)), path, fields, format=format)
        if hashed is not None:
            hashed(watched.content_hash())


def file_records(file: BinaryIO, label: str, fields: tuple[str, ...], *, format: str) -> Iterator[Sequence[Record]]:
    """The records of the open binary file `file` (`label` names it; standard input included) in
    `format`, decompressed first when the format reads decompressed files."""
    corpus = corpus_format(format)
    if not corpus.decompress:
        return corpus.read(file, label, fields)
    return decompressed_records(lambda stream: corpus.read(stream, label, fields), file, label)


def shard_blocks(
    side: SideFile,
    format: str,
    *,
    name: str = "path",
    hashed: Callable[[str, str], object] | None = None,
    progress: Callable[[int], object] | None = None,
) -> Iterator[Sequence[Record]]:
    """The records of every shard of `side` in `format`, a block at a time, its shards one after
    another (`name`, `progress`: as `record_blocks`; `hashed`: called with each shard's path and
    content hash); `side.texts` of a block are this side's texts.

    Raises:
      ValueError: as `record_blocks`, or `side.path` is a pattern that matches no file.
    """
    if not side.shards:
        raise ValueError(f"{name} must name existing files, got the pattern {side.path!r}, which matches none")
    for shard in side.shards:
        digest = None if hashed is None else functools.partial(hashed, shard)
        yield from record_blocks(shard, format=format, fields=side.fields, name=name, hashed=digest, progress=progress)
