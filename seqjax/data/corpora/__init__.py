"""Corpus files: where a config's splits are and whether they are usable (`sources`), how a file
is read into records by its `data.format` (`formats`, and one module per format: `lines`,
`jsonl`, `parquet`; `compressed`: gzip and zstd files), and whole files read at once
(`readers`). Importing the package registers the built-in formats."""

from seqjax.data.corpora import jsonl, lines, parquet  # noqa: F401  (register the built-in formats)
