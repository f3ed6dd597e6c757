"""How the arrays of a token store are written: raw files appended a block at a time while the
corpus is encoded (`SplitFiles`), turned into `.npy` arrays of the store's id type at the end
(`to_npy`), through the table from provisional ids to the tokenizer's when it has one.
"""

from __future__ import annotations

import os

import numpy as np
from numpy.typing import DTypeLike

from seqjax.data.tokenizers.vocab import EOS_ID
from seqjax.data.tokenizers.word_index import count_words

CHUNK = 1 << 22  # elements copied at a time from a raw id file into its .npy
# The `</s>` after each line of an LM stream among provisional ids (mapped to EOS_ID at the end).
EOS_MARK = np.iinfo(np.uint32).max


class SplitFiles:
    """The raw files of one (split, side) of a store being written, a block of lines at a time:
    ids as uint32, offsets as int64, optionally the text and its line offsets; the counts of
    lines, tokens, words and bytes written."""

    def __init__(self, directory: str, name: str, *, eos: int | None, keep_text: bool):
        self.directory, self.name, self.eos = directory, name, eos
        self.ids = open(os.path.join(directory, f"{name}.tokens.bin"), "wb")
        self.offsets = open(os.path.join(directory, f"{name}.offsets.bin"), "wb")
        self.offsets.write(np.zeros(1, np.int64).tobytes())
        self.text = open(os.path.join(directory, f"{name}.txt"), "wb") if keep_text else None
        self.text_offsets = open(os.path.join(directory, f"{name}.lines.bin"), "wb") if keep_text else None
        self.lines = self.tokens = self.words = self.bytes = 0
        if self.text_offsets is not None:
            self.text_offsets.write(np.zeros(1, np.int64).tobytes())

    def add(self, lines: list[str], ids: np.ndarray, lengths: np.ndarray) -> None:
        """Appends `lines`, encoded as `ids` [n] (provisional or final) of `lengths` [lines] each."""
        if self.eos is not None:  # an LM stream: `</s>` after each line
            ids = np.insert(ids, np.cumsum(lengths), self.eos)
            lengths = lengths + 1
        self.ids.write(ids.astype(np.uint32).tobytes())
        self.offsets.write((self.tokens + np.cumsum(lengths)).astype(np.int64).tobytes())
        self.lines, self.tokens = self.lines + len(lines), self.tokens + int(lengths.sum())
        joined = "\n".join(lines) + "\n"
        self.words += count_words(joined)
        text = joined.encode("utf-8")
        if self.text is not None and self.text_offsets is not None:
            self.text.write(text)
            ends = np.flatnonzero(np.frombuffer(text, np.uint8) == ord("\n")) + 1
            self.text_offsets.write((self.bytes + ends).astype(np.int64).tobytes())
        self.bytes += len(text)

    def close(self) -> None:
        for file in (self.ids, self.offsets, self.text, self.text_offsets):
            if file is not None:
                file.close()


def to_npy(
    directory: str, raw: str, name: str, source: type, dtype: DTypeLike, table: np.ndarray | None = None
) -> None:
    """Turns the raw `source`-typed file `raw` into `name`.npy of `dtype`, through `table` if
    given, a chunk at a time with plain reads and writes (memory maps would count every page
    of both files in the process's resident memory)."""
    raw_path = os.path.join(directory, raw)
    n = os.path.getsize(raw_path) // np.dtype(source).itemsize
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (n,)}
    with open(raw_path, "rb") as values, open(os.path.join(directory, f"{name}.npy"), "wb") as out:
        np.lib.format.write_array_header_1_0(out, header)
        while True:
            chunk: np.ndarray = np.fromfile(values, dtype=source, count=CHUNK)
            if not len(chunk):
                break
            if table is not None:
                ends = chunk == EOS_MARK
                chunk = np.where(ends, EOS_ID, table[np.where(ends, 0, chunk)])
            out.write(chunk.astype(dtype).tobytes())
    os.remove(raw_path)
