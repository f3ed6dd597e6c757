"""Where a command will write, checked before it starts working: a path that cannot be written is
refused in one line naming the option and the reason, not found out after the work (as an
`IsADirectoryError` or a bare `[Errno 2]`)."""

from __future__ import annotations

import argparse
import os

# What each command writes where it is given: (option, "file" | "directory"). A path that depends on
# what the command reads first (backtranslate's PREFIX.SRC) is checked by the command itself.
WRITES: dict[str, tuple[tuple[str, str], ...]] = {
    "train": (("--workdir", "directory"),),
    "generate": (("--output", "file"),),
    "backtranslate": (("--train-workdir", "directory"),),
    "import-hf": (("--workdir", "directory"),),
    "export-hf": (("--output", "directory"),),
    "plot": (("--output", "file"),),
    "compile": (("--json", "file"),),
}


def check_outputs(args: argparse.Namespace) -> None:
    """Checks every path the command `args.command` writes (`WRITES`) that the user gave.

    Raises:
      ValueError: the first path that cannot be written, naming its option.
    """
    for flag, kind in WRITES.get(args.command, ()):
        path = getattr(args, flag.removeprefix("--").replace("-", "_"))
        if path is not None:
            (check_output_file if kind == "file" else check_output_directory)(path, flag)


def check_output_file(path: str, flag: str) -> None:
    """Raises ValueError, naming `flag` (the option that gave `path`), when `path` cannot be
    written as a file: it is a directory, its directory does not exist (or is a file), or
    neither it nor its directory may be written."""
    if os.path.isdir(path):
        raise ValueError(f"{flag} must name a file, got {path!r}, which is a directory")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        why = "is a file" if os.path.exists(folder) else "does not exist"
        raise ValueError(f"{flag} {path!r} cannot be written: the directory {folder} {why}")
    if not os.access(path if os.path.exists(path) else folder, os.W_OK):
        raise ValueError(f"{flag} {path!r} cannot be written: permission denied")


def check_output_directory(path: str, flag: str) -> None:
    """Raises ValueError, naming `flag`, when `path` cannot be made a directory (with the
    folders above it that are missing): it is a file, a folder above it is a file, or the
    nearest one that exists may not be written."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{flag} must name a directory, got {path!r}, which is a file")
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError(f"{flag} {path!r} cannot be made a directory: {existing} is a file")
    if not os.access(existing, os.W_OK):
        raise ValueError(f"{flag} {path!r} cannot be written: permission denied in {existing}")
