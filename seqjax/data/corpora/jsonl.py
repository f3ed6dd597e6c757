"""The `jsonl` format: JSON Lines, one JSON object a line (what Hugging Face `datasets` writes
with `to_json`, and web crawls ship), read compressed or not.

A record is the object on one line; its text is its field data.text_field, a pair's its fields
data.src_field and data.tgt_field (a dot reaches into a nested object: `translation.en`;
`record_fields`), each a string, whose line breaks become spaces. Other fields are ignored, blank
lines skipped, a leading byte-order mark dropped. A line that is not a JSON object, a missing field
(the message lists the record's fields) and a value that is not a string are refused naming the
file and line, as are undecodable bytes.

The file is read a block of about `BLOCK_BYTES` of whole lines at a time (`lines.byte_blocks`).
pyarrow's JSON parser (C++) reads a block, keeping only the fields read, about three times as fast
as a `json.loads` a line; a block it refuses or does not read as one record a line (a line that
does not start with "{": blank lines, indented ones; two objects on one line), or that lacks a
text, is read line by line with Python's `json`, which is the reference: it names the line and
what is wrong with it, so a message is the same whichever parser met the problem first.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

from seqjax.config import DATA_FORMATS
from seqjax.data.corpora.formats import CorpusFormat, Record
from seqjax.data.corpora.lines import BLOCK_BYTES, byte_blocks, decode
from seqjax.data.corpora.record_fields import field_path, one_line

_JSON_BLANK = " \t\r"  # the whitespace JSON allows, besides the line's "\n"


def _kind(value: Any) -> str:
    """`value`'s JSON type, with the value when short, for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _text(record: dict, name: str, path: tuple[str, ...], label: str, line: int) -> str:
    """The string at `path` (the field `name`) of the record on `line`, else a ValueError."""
    value: Any = record
    for depth, part in enumerate(path):
        where = "".join(f"{p}." for p in path[:depth])
        if not isinstance(value, dict):
            raise ValueError(
                f"records must have the field {name!r}, got {where[:-1]!r} holding {_kind(value)} in {label!r} at "
                f"line {line}"
            )
        if part not in value:
            fields = f"whose fields are {', '.join(where + key for key in value)}" if value else "which has no fields"
            raise ValueError(f"records must have the field {name!r}, got none in {label!r} at line {line}, {fields}")
        value = value[part]
    if not isinstance(value, str):
        raise ValueError(f"field {name!r} must hold a string, got {_kind(value)} in {label!r} at line {line}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"field {name!r} must hold a valid Unicode string, got the lone surrogate {value[error.start]!r} in "
            f"{label!r} at line {line}"
        ) from None
    return value


def _read_lines(
    data: bytes, label: str, first_line: int, fields: tuple[str, ...], paths: list[tuple[str, ...]]
) -> list[list[str]]:
    """The texts of each of `fields` in the block `data` (lines `first_line` on), parsed a line at
    a time with Python's `json`; a bad line is a ValueError naming it."""
    columns: list[list[str]] = [[] for _ in fields]
    for line, raw in enumerate(decode(data, label, first_line).split("\n")[:-1], start=first_line):
        if not raw.strip(_JSON_BLANK):
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ValueError(
                f"records must be JSON objects, one a line, got invalid JSON in {label!r} at line {line}: "
                f"{error.msg} (column {error.colno})"
            ) from None
        if not isinstance(record, dict):
            raise ValueError(
                f"records must be JSON objects, one a line, got {_kind(record)} in {label!r} at line {line}"
            )
        for column, name, path in zip(columns, fields, paths):
            column.append(_text(record, name, path, label, line))
    return columns


def _schema(paths: list[tuple[str, ...]]) -> Any:
    """The pyarrow schema of the fields at `paths`, strings nested in structs."""
    import pyarrow as pa

    tree: dict = {}
    for path in paths:
        node = tree
        for part in path:
            node = node.setdefault(part, {})

    def typed(node: dict) -> Any:
        return pa.struct([(k, typed(v)) for k, v in node.items()]) if node else pa.string()

    return pa.schema([(k, typed(v)) for k, v in tree.items()])


def _parse(data: bytes, lines: int, paths: list[tuple[str, ...]], schema: Any) -> list[list[str]] | None:
    """The texts at each of `paths` in the block `data` of `lines` lines, parsed by pyarrow; None
    when it refuses the block, reads other than one record a line, or misses a text."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    try:
        table = pj.read_json(
            io.BytesIO(data),
            # One block of pyarrow's for the whole of `data`: a longer line than its block refuses.
            read_options=pj.ReadOptions(use_threads=False, block_size=len(data) + 1),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except pa.ArrowInvalid:
        return None
    if table.num_rows != lines:
        return None
    columns = []
    for path in paths:
        array = table.column(path[0])
        for part in path[1:]:
            array = pc.struct_field(array, part)  # null where the outer field is
        if array.null_count:
            return None
        try:
            columns.append(array.to_pylist())
        except UnicodeDecodeError:
            return None
    return columns


def jsonl_blocks(
    file: BinaryIO, label: str, fields: tuple[str, ...], *, block_bytes: int = BLOCK_BYTES
) -> Iterator[Sequence[Record]]:
    """The records of the JSON Lines file `file` (`label` names it): the texts of the field
    `fields[0]`, or the (source, target) pairs of the fields `fields`, as consecutive non-empty
    lists of about `block_bytes` of the file each (`formats.Reader`).

    Raises:
      ValueError: a line that is not a JSON object, lacks a field or holds a non-string in it, or
        undecodable bytes, naming the file and the 1-based line.
    """
    paths = [field_path(name) for name in fields]
    schema = _schema(paths)
    first_line = 1
    for data in byte_blocks(file, block_bytes):
        lines = data.count(b"\n")
        # pyarrow skips blank lines and reads two objects on one line as two rows: its rows are the
        # lines only when every line starts an object ("{" first), each then one or more rows.
        objects = data.count(b"\n{") + data.startswith(b"{") == lines
        fast = _parse(data, lines, paths, schema) if objects else None
        columns = fast or _read_lines(data, label, first_line, fields, paths)
        first_line += lines
        if columns[0]:
            texts = [one_line(column) for column in columns]
            yield texts[0] if len(texts) == 1 else list(zip(texts[0], texts[1]))


DATA_FORMATS.register("jsonl", CorpusFormat(jsonl_blocks, pairs_in_records=True, fields=True))
