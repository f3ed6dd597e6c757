"""Corpus formats (`data.format`): how one file of a corpus is read into records. Each format is
one module that registers itself with one call, `DATA_FORMATS.register(name, CorpusFormat(read))`
(`lines.py`: one text a line); every reading of a corpus file goes through the format its
config names: the token store's preparation, the splits evaluation reads directly, the input of
`seqjax generate` and the corpora of `seqjax backtranslate`.

A format's reader streams the records of an open binary file:

    read(file: BinaryIO, label: str, pair: tuple[str, str] | None) -> Iterator[Sequence[Record]]

consecutive non-empty lists of records, so that a corpus of any size is read in the memory of
one block. With `pair` None a record is one example's text (a `str`: a line of a language-model
corpus, a line of one side of a parallel corpus kept in two files, an input to generate from);
with `pair` (src, tgt), given only to a format whose parallel corpora hold a pair in each record
(`pairs_in_records`), it is one example's (source, target) texts, read from the record's fields
named `src` and `tgt` (data.src, data.tgt). No text holds a line break ("\\n"): the store keeps
one text a line. A record the reader cannot read is refused with one ValueError naming `label`
(the file) and the 1-based line or row. `file` is read from its start; a reader may seek when
`file.seekable()` (a path always is; standard input is not).

Whatever the reader reads is hashed and counted on the way (`record_blocks`: the token store's
content hash of each source and the progress of `seqjax prepare`), so a reader knows nothing of
either.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, Protocol, cast

from seqjax.config import DATA_FORMATS

Record = str | tuple[str, str]
DEFAULT_FORMAT = "lines"  # the one format before formats were registered: its stores record no format
SIDES = ("src", "tgt")


class Reader(Protocol):
    def __call__(self, file: BinaryIO, label: str, pair: tuple[str, str] | None) -> Iterator[Sequence[Record]]: ...


@dataclasses.dataclass(frozen=True)
class CorpusFormat:
    """A registered `data.format`.

    Attributes:
      read: the reader (the module docstring gives its contract).
      pairs_in_records: False: a parallel split is two files, PREFIX.SRC and PREFIX.TGT, of text
        records aligned by position; True: one file (data.train names it) whose records are pairs.
    """

    read: Reader
    pairs_in_records: bool = False


@dataclasses.dataclass(frozen=True)
class SideFile:
    """Where the texts of one side of a split are: the file `path`, and for a format whose records
    are pairs, the fields of the pair (`pair`) and which of its texts is this side's (`pick`:
    0 source, 1 target); `pair` None: the file's text records."""

    path: str
    pair: tuple[str, str] | None = None
    pick: int = 0


def corpus_format(name: str) -> CorpusFormat:
    """The format registered as `name`. Raises ValueError naming the registered ones."""
    result: CorpusFormat = DATA_FORMATS[name].build
    return result


def parallel_files(prefix: str, src: str, tgt: str, format: str) -> dict[str, SideFile]:
    """side ('src', 'tgt') -> where a parallel split named `prefix` keeps it in `format`: the
    files PREFIX.SRC and PREFIX.TGT, or the file PREFIX for pairs in records."""
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
    pair: tuple[str, str] | None = None,
    name: str = "path",
    hashed: Callable[[str], object] | None = None,
    progress: Callable[[int], object] | None = None,
) -> Iterator[Sequence[Record]]:
    """The records of the corpus file `path` in `format`, as its reader gives them (texts, or
    pairs read from the fields `pair`).

    Args:
      name: what the file is (the option that gave it), in the message that refuses it.
      hashed: called, after the last block, with the sha256 (hex) of the file's bytes.
      progress: called with the number of bytes of each read of the file.

    Raises:
      ValueError: the file is a directory, missing or empty (`check_file`), or the reader
        refuses a record (naming the file and its line or row).
    """
    read = corpus_format(format).read
    check_file(path, name)
    with open(path, "rb", buffering=0) as raw:
        watched = _Watched(raw, progress)
        yield from read(io.BufferedReader(watched), path, pair)
        if hashed is not None:
            hashed(watched.content_hash())


def side_blocks(
    side: SideFile,
    format: str,
    *,
    name: str = "path",
    hashed: Callable[[str], object] | None = None,
    progress: Callable[[int], object] | None = None,
) -> Iterator[list[str]]:
    """The texts of one side of a split (`SideFile`) in `format`, a block at a time (`name`,
    `hashed`, `progress`: as `record_blocks`)."""
    blocks = record_blocks(side.path, format=format, pair=side.pair, name=name, hashed=hashed, progress=progress)
    for block in blocks:
        records = cast(Sequence[str], block) if side.pair is None else [record[side.pick] for record in block]
        yield list(records)
