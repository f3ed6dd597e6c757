"""Compressed corpus files: a gzip or zstd file is read decompressed, whatever its name.

The compression is known by the file's first bytes (gzip's `1f 8b`, zstd's `28 b5 2f fd`), not
by its extension, so that standard input and a misnamed file read alike; no UTF-8 text starts
with either (`8b` and `b5` are continuation bytes), so a text file is never taken for one. A
file of several gzip members or zstd frames (what parallel compressors write) is read whole.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, TypeVar, cast

MAGIC = {"gzip": b"\x1f\x8b", "zstd": b"\x28\xb5\x2f\xfd"}
ZSTD_READ = 1 << 16  # compressed bytes decompressed at a time: text's ratio keeps the output under a few MiB
T = TypeVar("T")


def compression(file: BinaryIO) -> str | None:
    """The codec ('gzip' | 'zstd') whose magic bytes `file` starts with, or None; nothing is
    consumed (`file` must have `peek`, as a buffered reader has)."""
    head = cast(Any, file).peek(4)[:4]
    return next((name for name, magic in MAGIC.items() if head.startswith(magic)), None)


class _ZstdFrames(io.RawIOBase):
    """The decompressed bytes of a file of zstd frames, one after another. A file that ends inside
    a frame raises EOFError (zstandard's own stream reader ends there as if the file were whole)."""

    def __init__(self, file: BinaryIO):
        import zstandard  # only a zstd file pays its import

        self.file, self.decompressor = file, zstandard.ZstdDecompressor()
        self.frame: Any = None  # the decompressor of the frame being read; None between frames
        self.pending, self.offset = b"", 0  # decompressed bytes, and how many of them were read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:  # buffer: a writable bytes-like object
        while self.offset == len(self.pending):
            compressed = self.file.read(ZSTD_READ)
            if not compressed:
                if self.frame is not None:
                    raise EOFError("the file ends inside a zstd frame")
                return 0
            self.pending, self.offset = self._decompress(compressed), 0
        count = min(len(buffer), len(self.pending) - self.offset)
        buffer[:count] = self.pending[self.offset : self.offset + count]
        self.offset += count
        return count

    def _decompress(self, compressed: bytes) -> bytes:
        out = []
        while compressed:
            if self.frame is None:
                self.frame = self.decompressor.decompressobj()
            out.append(self.frame.decompress(compressed))
            if not self.frame.eof:  # the frame goes on in the next read
                break
            compressed, self.frame = self.frame.unused_data, None
        return b"".join(out)


def _open(codec: str, file: BinaryIO) -> tuple[BinaryIO, tuple[type[BaseException], ...]]:
    """The decompressed stream of `file` and the errors its reads raise on corrupt data."""
    if codec == "gzip":
        return cast(BinaryIO, gzip.GzipFile(fileobj=file, mode="rb")), (gzip.BadGzipFile, EOFError, zlib.error)
    import zstandard

    return cast(BinaryIO, io.BufferedReader(_ZstdFrames(file))), (zstandard.ZstdError, EOFError)


def decompressed_records(read: Callable[[BinaryIO], Iterator[T]], file: BinaryIO, label: str) -> Iterator[T]:
    """`read(stream)`'s items, where `stream` is `file` decompressed when it is a gzip or zstd
    file, else `file` itself (made buffered when it is not).

    Raises:
      ValueError: the compressed data is truncated or corrupt, naming the file (`label`).
    """
    if not hasattr(file, "peek"):
        file = cast(BinaryIO, io.BufferedReader(cast(Any, file)))
    codec = compression(file)
    if codec is None:
        yield from read(file)
        return
    stream, errors = _open(codec, file)
    try:
        yield from read(stream)
    except errors as error:
        raise ValueError(f"{codec} data must be whole and valid, got {label!r}, which is not ({error})") from None
