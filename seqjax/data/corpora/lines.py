"""The `lines` format: a UTF-8 text file, one record a line.

A record is a line without its line ending ("\n" or "\r\n"); blank lines are kept (in a
parallel corpus, kept in two files PREFIX.SRC and PREFIX.TGT, they hold the line alignment); a
leading byte-order mark is dropped (it would otherwise become a token); undecodable bytes are
refused naming the file and line. The file is read a block of about `block_bytes` at a time, so
that a corpus of any size is read in the memory of one block.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from seqjax.config import DATA_FORMATS
from seqjax.data.corpora.formats import CorpusFormat

BLOCK_BYTES = 1 << 20  # a block and the arrays encoding it (some 60 bytes per character) stay small
_BOM = b"\xef\xbb\xbf"


def decode(chunk: bytes, path: str, first_line: int) -> str:
    """`chunk`, whole lines of the file `path` from line `first_line` on, decoded from UTF-8.

    Raises:
      ValueError: undecodable bytes, naming the file and the 1-based line.
    """
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


def byte_blocks(file: BinaryIO, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """The bytes of `file`, a leading byte-order mark dropped, as consecutive non-empty blocks of
    whole lines of about `block_bytes` each, every one ending with "\\n" (one is added after a
    last line without it). An empty file gives no blocks."""
    carry = file.read(len(_BOM)).removeprefix(_BOM)
    while True:
        raw = file.read(block_bytes)
        data = carry + raw
        if raw:
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # no line ends in this block: read on until one does
                carry = data
                continue
            data, carry = data[:cut], data[cut:]
        elif not data:
            return
        else:  # the rest of a file: a last line without its line ending, or (a file shorter than the
            # first read) whole lines
            data, carry = data if data.endswith(b"\n") else data + b"\n", b""
        yield data
        if not raw:
            return


def line_blocks(
    file: BinaryIO, label: str, fields: tuple[str, ...] = (), *, block_bytes: int = BLOCK_BYTES
) -> Iterator[list[str]]:
    """The lines of the UTF-8 file `file` (`label` names it), as consecutive non-empty lists of
    about `block_bytes` each: the reader of the `lines` format (`formats.Reader`; its records are
    lines, so `fields` is not read, and it is never given a pair: its parallel corpora are two
    files). An empty file gives no blocks.

    Raises:
      ValueError: undecodable bytes, naming the file and the 1-based line.
    """
    line_number = 1
    for data in byte_blocks(file, block_bytes):
        lines = decode(data, label, line_number).split("\n")
        lines.pop()  # `data` ends with "\n": the piece after it is empty
        if any(line.endswith("\r") for line in lines):
            lines = [line.removesuffix("\r") for line in lines]
        line_number += len(lines)
        yield lines


DATA_FORMATS.register("lines", CorpusFormat(line_blocks))
