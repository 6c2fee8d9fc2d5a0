"""The TUI leaves the UI thread a core: OpenBLAS runs on all cores but one
(dflash_tui/blas.py, `leave_a_core_for_the_ui`), unless the user chose its threads. Each
case runs in a fresh process with OpenBLAS preloaded, as the console script runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dflash_tui.blas import openblas_path

LIBRARY = openblas_path()
CHILD = """
import ctypes, os, sys
from dflash_tui.blas import leave_a_core_for_the_ui
openblas = ctypes.CDLL(sys.argv[1])
openblas.openblas_set_num_threads(4)
print(leave_a_core_for_the_ui(cpus=int(sys.argv[2])), openblas.openblas_get_num_threads())
"""


def _child(cpus: int, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "DFLASH_TUI_BLAS")}
    environ.update(LD_PRELOAD=LIBRARY, **env)
    done = subprocess.run([sys.executable, "-c", CHILD, LIBRARY, str(cpus)], env=environ,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.skipif(LIBRARY is None, reason="needs the system's OpenBLAS")
def test_openblas_gets_all_cores_but_one():
    assert _child(cpus=2) == ["1", "1"]
    assert _child(cpus=8) == ["7", "7"]


@pytest.mark.skipif(LIBRARY is None, reason="needs the system's OpenBLAS")
def test_the_users_choice_and_a_single_core_are_left_alone():
    assert _child(cpus=2, OPENBLAS_NUM_THREADS="2") == ["None", "4"]
    assert _child(cpus=2, DFLASH_TUI_BLAS="reference") == ["None", "4"]
    assert _child(cpus=1) == ["None", "4"]
