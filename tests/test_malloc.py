"""dflash_tui/malloc.py: the console script fixes glibc's mmap threshold, unless the user
set it (tests/test_blas_threads.py does the same for OpenBLAS's threads)."""

from __future__ import annotations

import subprocess
import sys

import pytest

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")

# Whether the threshold is fixed shows in how glibc serves a block the size of one just freed:
# with it fixed, a 4 MiB block is mapped afresh (its address far from the heap's top);
# without, glibc raised its threshold when the first 4 MiB block was freed and serves the
# second from the heap (brk): below the program break.
PROBE = """
import ctypes, sys
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.sbrk.restype = ctypes.c_void_p
if sys.argv[1] == "set":
    from dflash_tui.malloc import return_large_blocks
    print(return_large_blocks())
libc.free(ctypes.c_void_p(libc.malloc(4 << 20)))
block = libc.malloc(4 << 20)
print("heap" if block < libc.sbrk(0) else "mapped")
"""


def run(*args, env=None):
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          env=env, check=True)
    return done.stdout.split()


@linux
def test_a_freed_large_block_goes_back_to_the_system():
    assert run("leave") == ["heap"]  # glibc's own behaviour: the threshold rose
    assert run("set") == ["True", "mapped"]


@linux
def test_the_users_own_threshold_stands():
    import os

    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="8388608")
    assert run("set", env=env) == ["False", "heap"]  # 8 MiB: a 4 MiB block comes from the heap
