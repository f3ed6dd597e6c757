"""Corpus readers: UTF-8 text files, one example per line, checked before use."""

from __future__ import annotations

import os
from typing import BinaryIO

from seqjax.config import DATA_FORMATS
from seqjax.data.corpora.lines import file_blocks, read_blocks

# A corpus format's reader: read_blocks(path, name=..., block_bytes=..., digest=..., progress=...) ->
# the file's records (lines of text) as consecutive non-empty lists; "lines": one record a line.
DATA_FORMATS.register("lines", read_blocks)


def read_lines(path: str | os.PathLike, name: str = "path") -> list[str]:
    """The lines of a UTF-8 text file, without their line endings ("\\n" or "\\r\\n") and
    without a leading byte-order mark (which would otherwise become a token).

    Blank lines are kept: in a parallel corpus they hold the line alignment.

    Args:
      name: what the file is (the option that gave it), in the message that refuses it.

    Raises:
      ValueError: the path is a directory, does not exist or is empty, or a line is not
        valid UTF-8 (the message names the file and the 1-based line number).
    """
    return [line for block in read_blocks(os.fspath(path), name=name) for line in block]


def read_file_lines(file: BinaryIO, label: str) -> list[str]:
    """`read_lines` of an open binary file, e.g. standard input (`label` names it); an empty
    one has no lines."""
    return [line for block in file_blocks(file, label) for line in block]


def read_parallel(prefix: str, src: str, tgt: str, name: str = "path") -> tuple[list[str], list[str]]:
    """Line-aligned sentence pairs from `PREFIX.SRC` and `PREFIX.TGT` (`name`: as `read_lines`).

    Raises:
      ValueError: either file fails `read_lines`, or their line counts differ (the message
        gives both counts and both paths).
    """
    src_path, tgt_path = f"{prefix}.{src}", f"{prefix}.{tgt}"
    sources, targets = read_lines(src_path, name), read_lines(tgt_path, name)
    if len(sources) != len(targets):
        raise ValueError(
            f"parallel files must have equal line counts, got {len(sources)} lines in "
            f"{src_path!r} and {len(targets)} lines in {tgt_path!r}"
        )
    return sources, targets
