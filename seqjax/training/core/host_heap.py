"""Transparent huge pages for the host heap of a `seqjax` process.

XLA on CPU allocates the temporaries of each execution — every activation a train step keeps
for its backward pass, in one block (786 MiB for the modern LM benchmark's step: B=16, T=128,
D=512, 4 layers, V=10k) — with malloc. glibc maps a block that large afresh at every call
and unmaps it when freed, so each step touches all of its pages anew: about 206,000 page
faults of 4 KiB and 0.5 s of kernel time a step on a 2-core AMD EPYC, where the step took
2.1 s. With glibc's tunable `glibc.malloc.hugetlb=1`, malloc asks the kernel for transparent
huge pages on such blocks: the step's faults fell to a few thousand at most (most steps under
one thousand) and the step took 1.8-1.9 s, at the same resident size.

glibc reads its tunables when a process starts, so the `seqjax` executable starts itself
again with the tunable (`restart_with_huge_pages`: the same process id, arguments and
environment otherwise) where it applies: Linux with glibc 2.35 or later and the kernel's
transparent huge pages in "madvise" mode (in "always" mode large mappings get them anyway; in
"never" mode they cannot). A program of one's own gets the same by setting the variable
itself: `GLIBC_TUNABLES=glibc.malloc.hugetlb=1 python train.py`.

Kept in the heap instead (mallopt: one arena, no mmap, no trimming), the block is mapped once
too, but the heap fragmented: the same step's process held 3.2 times the memory after 24
steps and was still growing.
"""

from __future__ import annotations

import os
import platform
import sys

TUNABLE = "glibc.malloc.hugetlb=1"
THP_MODE_FILE = "/sys/kernel/mm/transparent_hugepage/enabled"


def thp_mode(path: str = THP_MODE_FILE) -> str | None:
    """The kernel's transparent huge page mode ("always" | "madvise" | "never"), None if unknown."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    selected = [word[1:-1] for word in text.split() if word.startswith("[")]
    return selected[0] if selected else None


def huge_page_environment(environ: dict[str, str], libc: tuple[str, str], mode: str | None) -> dict[str, str] | None:
    """The environment to restart with, or None where restarting would change nothing.

    Args:
      environ: the process's environment.
      libc: `platform.libc_ver()`, e.g. ("glibc", "2.36").
      mode: `thp_mode()`.
    Returns:
      environ with TUNABLE appended to GLIBC_TUNABLES (colon-separated), or None when the C
      library is not glibc 2.35+, the mode is not "madvise", or GLIBC_TUNABLES already sets
      glibc.malloc.hugetlb (the user's value stands).
    """
    name, version = libc
    if name != "glibc" or mode != "madvise":
        return None
    try:
        if tuple(int(part) for part in version.split(".")[:2]) < (2, 35):
            return None
    except ValueError:
        return None
    tunables = environ.get("GLIBC_TUNABLES", "")
    if any(item.split("=")[0] == "glibc.malloc.hugetlb" for item in tunables.split(":")):
        return None
    return {**environ, "GLIBC_TUNABLES": f"{tunables}:{TUNABLE}" if tunables else TUNABLE}


def restart_with_huge_pages() -> None:
    """Replaces the process by the same command under `huge_page_environment` where that
    applies (os.execve: the process id stays); returns, doing nothing, otherwise. Call it first
    thing, before any other work: whatever ran before is started again."""
    if not sys.platform.startswith("linux"):
        return
    environ = huge_page_environment(dict(os.environ), platform.libc_ver(), thp_mode())
    if environ is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, sys.orig_argv, environ)
