"""Corpus files: where a config's splits are and whether they are usable (`sources`), how a file
is read into records by its `data.format` (`formats`: one module per format, e.g. `lines`), and
whole files read at once (`readers`)."""
