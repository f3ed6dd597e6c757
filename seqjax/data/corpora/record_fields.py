"""What the formats of records with named fields (`jsonl`, `parquet`) share: a field's name as a
path into nested records, and a text made one line.

A field name is one or more names joined by dots: `text` is a record's field `text`,
`translation.en` the field `en` of its field `translation` (how Hugging Face translation
datasets nest a pair). A text's line breaks ("\\n", "\\r\\n") become spaces, since the token store
keeps one text a line: a web document keeps its words and loses its paragraph breaks.
"""

from __future__ import annotations

from collections.abc import Iterable


def field_path(name: str) -> tuple[str, ...]:
    """The names from the outer record in, of the field `name` ('translation.en' ->
    ('translation', 'en')).

    Raises:
      ValueError: an empty name, or one with an empty part ('a..b', '.a').
    """
    parts = tuple(name.split("."))
    if not all(parts):
        raise ValueError(f"a field must be names joined by dots, got {name!r}")
    return parts


def one_line(texts: Iterable[str]) -> list[str]:
    """`texts` with each line break ("\\r\\n" or "\\n") made a space."""
    return [text if "\n" not in text else text.replace("\r\n", " ").replace("\n", " ") for text in texts]
