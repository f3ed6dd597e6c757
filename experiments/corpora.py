"""Where the experiments' corpora lie under the data root (data.root, else $SEQJAX_DATA)."""


def split_paths(directory: str, suffix: str = "", valid: str = "valid") -> dict[str, str]:
    """DataConfig's train, valid and test: DIRECTORY/train, DIRECTORY/VALID and DIRECTORY/test,
    each followed by `suffix` (a file's extension, or '' for a parallel corpus's prefixes)."""
    names = {"train": "train", "valid": valid, "test": "test"}
    return {split: f"{directory}/{name}{suffix}" for split, name in names.items()}
