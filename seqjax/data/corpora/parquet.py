"""The `parquet` format: Apache Parquet files (what Hugging Face `datasets` writes with
`to_parquet` and its hub serves), read with pyarrow.

A record is a row; its text is its column data.text_field, a pair's its columns data.src_field and
data.tgt_field (a dot reaches into a struct column: `translation.en`; `record_fields`), each of a
string type, whose line breaks become spaces. A field the file lacks is refused listing the
fields it has; a column of another type, naming its type; a null or undecodable value, naming the
file and the 1-based row. A file that is not Parquet is refused naming it. Parquet compresses
inside the file (its codecs, per column chunk), so a file is read as it is, never as gzip or zstd.

The file is read a row group at a time, in batches of rows of about `BLOCK_BYTES` of text
(estimated from the row group's size in the file's metadata), each cut into blocks of about
`BLOCK_BYTES` of text: memory holds the row group's columns read, compressed, and one batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

import numpy as np

from seqjax.config import DATA_FORMATS
from seqjax.data.corpora.formats import CorpusFormat, Record
from seqjax.data.corpora.lines import BLOCK_BYTES
from seqjax.data.corpora.record_fields import field_path, one_line


def _leaves(schema: Any, prefix: str = "") -> list[str]:
    """The dotted names of every field of `schema` (a pyarrow schema or struct type) that holds
    no fields of its own."""
    import pyarrow as pa

    names = []
    for field in schema:
        if pa.types.is_struct(field.type):
            names += _leaves(field.type, f"{prefix}{field.name}.")
        else:
            names.append(f"{prefix}{field.name}")
    return names


def _checked_field(schema: Any, name: str, label: str) -> None:
    """Raises ValueError unless the file of `schema` has a string field `name`."""
    import pyarrow as pa

    kind: Any = pa.struct(list(schema))
    for depth, part in enumerate(field_path(name)):
        if not pa.types.is_struct(kind):
            where = ".".join(field_path(name)[:depth])
            raise ValueError(f"records must have the field {name!r}, got {where!r} of the type {kind} in {label!r}")
        if kind.get_field_index(part) < 0:
            raise ValueError(
                f"records must have the field {name!r}, got none in {label!r}, whose fields are "
                f"{', '.join(_leaves(schema))}"
            )
        kind = kind.field(part).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise ValueError(f"field {name!r} must hold strings, got the type {kind} in {label!r}")


def _column(batch: Any, path: tuple[str, ...]) -> Any:
    import pyarrow.compute as pc

    array = batch.column(path[0])
    for part in path[1:]:
        array = pc.struct_field(array, part)  # null where the outer field is
    return array


def _texts(array: Any, name: str, label: str, first_row: int) -> list[str]:
    """The strings of `array`, whose first is the file's row `first_row`, else a ValueError naming
    the row of a null or undecodable one."""
    import pyarrow as pa

    if array.null_count:
        row = first_row + int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"field {name!r} must hold a string, got null in {label!r} at row {row}")
    try:
        texts: list[str] = array.to_pylist()
        return texts
    except UnicodeDecodeError:
        for row, value in enumerate(array.cast(pa.large_binary()).to_pylist(), start=first_row):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"file must be UTF-8, got undecodable bytes in {label!r} at row {row} of field {name!r} "
                    f"(byte {error.start}: {value[error.start : error.end]!r})"
                ) from None
        raise


def _cuts(arrays: list[Any], block_bytes: int) -> list[int]:
    """Row offsets [0, ..., rows] cutting the rows of `arrays` (aligned string arrays) into runs
    of about `block_bytes` of text each (a longer row alone)."""
    import pyarrow.compute as pc

    sizes = sum(np.asarray(pc.binary_length(a).fill_null(0).to_numpy(zero_copy_only=False), np.int64) for a in arrays)
    ends = np.cumsum(sizes)
    cuts = [0]
    while cuts[-1] < len(ends):
        done = ends[cuts[-1] - 1] if cuts[-1] else 0
        cuts.append(max(cuts[-1] + 1, int(np.searchsorted(ends, done + block_bytes, side="right"))))
    return cuts


def parquet_blocks(
    file: BinaryIO, label: str, fields: tuple[str, ...], *, block_bytes: int = BLOCK_BYTES
) -> Iterator[Sequence[Record]]:
    """The records of the Parquet file `file` (`label` names it): the texts of the field
    `fields[0]`, or the (source, target) pairs of the fields `fields`, as consecutive non-empty
    lists of about `block_bytes` of text each (`formats.Reader`).

    Raises:
      ValueError: the file is not Parquet or cannot be sought (standard input), lacks a field or
        holds other than strings in it, or a null or undecodable value (naming the 1-based row).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not file.seekable():
        raise ValueError(f"a Parquet file must be one that can be sought (its index is at its end), got {label!r}")
    try:
        parquet = pq.ParquetFile(file)
    except (pa.ArrowInvalid, OSError) as error:
        raise ValueError(f"files must be Parquet, got {label!r}, which is not ({error})") from None
    for name in fields:
        _checked_field(parquet.schema_arrow, name, label)
    paths = [field_path(name) for name in fields]
    top = list(dict.fromkeys(path[0] for path in paths))
    row = 1
    for group in range(parquet.num_row_groups):
        meta = parquet.metadata.row_group(group)
        chunks = [meta.column(i) for i in range(meta.num_columns)]
        read_bytes = sum(c.total_uncompressed_size for c in chunks if c.path_in_schema.split(".")[0] in top)
        per_row = max(1, read_bytes // max(1, meta.num_rows))
        batches = parquet.iter_batches(batch_size=max(1, block_bytes // per_row), row_groups=[group], columns=top)
        for batch in batches:
            arrays = [_column(batch, path) for path in paths]
            cuts = _cuts(arrays, block_bytes)
            for start, stop in zip(cuts, cuts[1:]):
                texts = [
                    one_line(_texts(a.slice(start, stop - start), name, label, row + start))
                    for a, name in zip(arrays, fields)
                ]
                yield texts[0] if len(texts) == 1 else list(zip(texts[0], texts[1]))
            row += batch.num_rows


DATA_FORMATS.register("parquet", CorpusFormat(parquet_blocks, pairs_in_records=True, fields=True, decompress=False))
