"""Give freed large blocks back to the system (glibc on Linux).

glibc maps a large allocation on its own (mmap) and unmaps it when freed, but once such a
block has been freed it raises that threshold to the block's size (up to 32 MiB) and serves
later blocks up to that size from its heap, where a freed block in the middle stays with the
process. A decode frees a block of a new size every few rounds (the KV caches grow in steps
of 256 positions, each layer's a few megabytes on the sample), so a long session's RSS
grew past what it holds: on the sample, 41.5 MB beyond its KV caches over 450 headless
rounds, and the TUI 147 MB beyond them from round ~220 to ~1,200, against 17 MB with the
threshold fixed (docs/HARDENING.md, "Memory over long headless runs").
Fixing the threshold at 128 KiB keeps large blocks mapped, so they go back when freed. A
user's MALLOC_MMAP_THRESHOLD_ (glibc's own variable for the same setting) stands.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
THRESHOLD = 128 * 1024  # glibc's default before it adjusts itself


def return_large_blocks() -> bool:
    """Fix glibc's mmap threshold for this process; whether it was set."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):  # a C library without mallopt (musl)
        return False
    return mallopt(M_MMAP_THRESHOLD, THRESHOLD) == 1
