"""Whole corpus files read at once, each through its format (`formats.py`): the texts of a file
(a split that evaluation reads without the token store, an input to generate from, standard
input included) and the pairs of a parallel split. A path may be a glob pattern of shards."""

from __future__ import annotations

import os
import sys
from typing import BinaryIO, cast

from seqjax.config import DataConfig
from seqjax.data.corpora.formats import (
    DEFAULT_FORMAT,
    DEFAULT_TEXT_FIELD,
    SideFile,
    corpus_format,
    file_records,
    parallel_files,
    shard_blocks,
)
from seqjax.data.corpora.sources import side_names, split_path


def read_texts(
    path: str | os.PathLike,
    *,
    format: str = DEFAULT_FORMAT,
    field: str = DEFAULT_TEXT_FIELD,
    name: str = "path",
) -> list[str]:
    """The text records of the corpus file (or shards) `path` in `format` (for `lines`: its
    lines, without their line endings and a leading byte-order mark, blank ones kept; for a format
    of records with named fields: their field `field`).

    Args:
      name: what the file is (the option that gave it), in the message that refuses it.

    Raises:
      ValueError: the path is a directory, does not exist or is empty, or a record is
        unreadable (the message names the file and the 1-based line or row).
    """
    side = SideFile(os.fspath(path), (field,))
    return [text for block in shard_blocks(side, format, name=name) for text in side.texts(block)]


def read_input(path: str, flag: str, cfg: DataConfig) -> list[str]:
    """The text records of `path` (`-`: standard input) read as a run's corpus is (`cfg`: its
    data.format and data.text_field): for `lines`, its lines without line ends or a byte-order
    mark; a bad path or record refused naming `flag` (the option that gave it), the file and the
    line or row."""
    if path == "-":
        return read_file_texts(sys.stdin.buffer, "<stdin>", format=cfg.format, field=cfg.text_field)
    return read_texts(path, format=cfg.format, field=cfg.text_field, name=flag)


def read_file_texts(
    file: BinaryIO, label: str, *, format: str = DEFAULT_FORMAT, field: str = DEFAULT_TEXT_FIELD
) -> list[str]:
    """`read_texts` of an open binary file, e.g. standard input (`label` names it); an empty
    one has no records."""
    return [cast(str, text) for block in file_records(file, label, (field,), format=format) for text in block]


def read_parallel(
    prefix: str, src: str, tgt: str, *, format: str = DEFAULT_FORMAT, name: str = "path"
) -> tuple[list[str], list[str]]:
    """The (sources, targets) of the parallel split `prefix` in `format`: the aligned records of
    `PREFIX.SRC` and `PREFIX.TGT`, or for pairs in records, the fields `src` and `tgt` of the
    records of the file (or shards) `prefix` (`name`: as `read_texts`).

    Raises:
      ValueError: a file fails `read_texts`, or the two files' record counts differ (the message
        gives both counts and both paths).
    """
    if corpus_format(format).pairs_in_records:
        pairs = [
            cast(tuple[str, str], r)
            for block in shard_blocks(SideFile(prefix, (src, tgt)), format, name=name)
            for r in block
        ]
        return [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    files = parallel_files(prefix, src, tgt, format)
    sources, targets = (
        [t for block in shard_blocks(file, format, name=name) for t in file.texts(block)] for file in files.values()
    )
    if len(sources) != len(targets):
        raise ValueError(
            f"parallel files must have equal line counts, got {len(sources)} lines in "
            f"{files['src'].path!r} and {len(targets)} lines in {files['tgt'].path!r}"
        )
    return sources, targets


def split_texts(cfg: DataConfig, split: str) -> list[str]:
    """The texts of `split` of a text corpus (data.kind=text), in data.format."""
    return read_texts(split_path(cfg, split), format=cfg.format, field=cfg.text_field, name=f"data.{split}")


def split_pairs(cfg: DataConfig, split: str) -> tuple[list[str], list[str]]:
    """The (sources, targets) of `split` of a parallel corpus, in data.format."""
    return read_parallel(split_path(cfg, split), *side_names(cfg), format=cfg.format, name=f"data.{split}")
