"""Corpus readers: UTF-8 text files, one example per line, checked before use."""

from __future__ import annotations

import os


def read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a UTF-8 text file, without their line endings ("\\n" or "\\r\\n") and
    without a leading byte-order mark (which would otherwise become a token).

    Blank lines are kept: in a parallel corpus they hold the line alignment.

    Raises:
      ValueError: the path is a directory, does not exist or is empty, or a line is not
        valid UTF-8 (the message names the file and the 1-based line number).
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        raise ValueError(f"path must be a file, got {name!r}, which is a directory")
    if not os.path.isfile(name):
        raise ValueError(f"path must be an existing file, got {name!r}")
    with open(name, "rb") as file:
        raw = file.read().removeprefix(b"\xef\xbb\xbf")
    if not raw:
        raise ValueError(f"file must not be empty, got {name!r}")
    chunks = raw.split(b"\n")
    if chunks[-1] == b"":
        chunks.pop()
    lines = []
    for number, chunk in enumerate(chunks, start=1):
        try:
            lines.append(chunk.removesuffix(b"\r").decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ValueError(
                f"file must be UTF-8, got undecodable bytes in {name!r} at line {number} "
                f"(byte {error.start}: {chunk[error.start : error.end]!r})"
            ) from None
    return lines


def read_parallel(prefix: str, src: str, tgt: str) -> tuple[list[str], list[str]]:
    """Line-aligned sentence pairs from `PREFIX.SRC` and `PREFIX.TGT`.

    Raises:
      ValueError: either file fails `read_lines`, or their line counts differ (the message
        gives both counts and both paths).
    """
    src_path, tgt_path = f"{prefix}.{src}", f"{prefix}.{tgt}"
    sources, targets = read_lines(src_path), read_lines(tgt_path)
    if len(sources) != len(targets):
        raise ValueError(
            f"parallel files must have equal line counts, got {len(sources)} lines in "
            f"{src_path!r} and {len(targets)} lines in {tgt_path!r}"
        )
    return sources, targets
