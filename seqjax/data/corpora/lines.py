"""Streaming reads of corpus files: blocks of lines in bounded memory, hashed as they pass.

`read_blocks` gives the lines of a UTF-8 file (no line endings, no leading byte-order mark,
blank lines kept, undecodable bytes refused with the file and line; `readers.read_lines` is
all of them at once), a block of about `block_bytes` at a time, so that a corpus of any size
is read in the memory of one block.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

BLOCK_BYTES = 1 << 20  # a block and the arrays encoding it (some 60 bytes per character) stay small
_BOM = b"\xef\xbb\xbf"


def check_file(path: str, name: str = "path") -> None:
    """Raises ValueError, naming the file and what it is (`name`: the option that gave it),
    when `path` is a directory, missing or empty."""
    if os.path.isdir(path):
        raise ValueError(f"{name} must be a file, got {path!r}, which is a directory")
    if not os.path.isfile(path):
        raise ValueError(f"{name} must be an existing file, got {path!r}")
    if os.path.getsize(path) == 0:
        raise ValueError(f"{name} must not be empty, got {path!r}")


def _decode(chunk: bytes, path: str, first_line: int) -> str:
    try:
        return chunk.decode("utf-8")
    except UnicodeDecodeError:
        for number, line in enumerate(chunk.split(b"\n"), start=first_line):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"file must be UTF-8, got undecodable bytes in {path!r} at line {number} "
                    f"(byte {error.start}: {line[error.start : error.end]!r})"
                ) from None
        raise


def read_blocks(
    path: str,
    *,
    name: str = "path",
    block_bytes: int = BLOCK_BYTES,
    digest: Any = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[list[str]]:
    """The lines of the UTF-8 file `path`, as consecutive non-empty lists.

    Args:
      name: what the file is (the option that gave it), in the message that refuses it.
      digest: a hashlib object, updated with every byte of the file, in order (the content hash of the store).
      progress: called with the number of bytes of each block read.

    Raises:
      ValueError: as `readers.read_lines` (directory, missing, empty, undecodable bytes with
        the file and 1-based line number).
    """
    check_file(path, name)
    with open(path, "rb") as file:
        yield from file_blocks(file, path, block_bytes=block_bytes, digest=digest, progress=progress)


def file_blocks(
    file: BinaryIO,
    label: str,
    *,
    block_bytes: int = BLOCK_BYTES,
    digest: Any = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[list[str]]:
    """`read_blocks` of an open binary file (standard input, say), `label` naming it in the
    message that refuses undecodable bytes; an empty file gives no blocks."""
    line_number = 1

    def read(size: int) -> bytes:
        raw = file.read(size)
        if digest is not None:
            digest.update(raw)
        if progress is not None and raw:
            progress(len(raw))
        return raw

    carry = read(len(_BOM)).removeprefix(_BOM)
    while True:
        raw = read(block_bytes)
        data = carry + raw
        if raw:
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # no line ends in this block: read on until one does
                carry = data
                continue
            data, carry = data[:cut], data[cut:]
        elif not data:
            return
        else:  # the last line, without a line ending
            data, carry = data + b"\n", b""
        lines = _decode(data, label, line_number).split("\n")
        lines.pop()  # `data` ends with "\n": the piece after it is empty
        if any(line.endswith("\r") for line in lines):
            lines = [line.removesuffix("\r") for line in lines]
        line_number += len(lines)
        yield lines
        if not raw:
            return
