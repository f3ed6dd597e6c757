"""Where the experiments' corpora lie under the data root (data.root, else $SEQJAX_DATA)."""

from typing import TypedDict


class SplitPaths(TypedDict):
    """DataConfig's train, valid and test paths."""

    train: str
    valid: str
    test: str


def split_paths(directory: str, suffix: str = "", valid: str = "valid") -> SplitPaths:
    """DataConfig's train, valid and test: DIRECTORY/train, DIRECTORY/VALID and DIRECTORY/test,
    each followed by `suffix` (a file's extension, or '' for a parallel corpus's prefixes)."""
    return SplitPaths(
        train=f"{directory}/train{suffix}", valid=f"{directory}/{valid}{suffix}", test=f"{directory}/test{suffix}"
    )
