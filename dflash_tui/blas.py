"""Use OpenBLAS for MLX's CPU matmuls on Linux when the system has it.

MLX's Linux CPU wheel links a reference BLAS (libblas.so.3 from netlib), which runs
float32 matmuls at about 1.5 GFLOP/s here; Debian's OpenBLAS exports the same cblas symbols
and is several times faster (a 135M model's 8-token verify: 1.37 s -> 0.16 s). Preloading
it makes the dynamic linker resolve those symbols to OpenBLAS first. This only works before
the process loads MLX, so the console script re-executes itself once with LD_PRELOAD set.
Set DFLASH_TUI_BLAS=reference to keep MLX's own BLAS. docs/CPU.md has the measurements.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/libopenblas.so.0",
    "/usr/lib64/libopenblas.so.0",
)


def openblas_path() -> str | None:
    for candidate in CANDIDATES:
        if Path(candidate).is_file():
            return candidate
    return None


def maybe_reexec_with_openblas() -> None:
    """Re-run this process with OpenBLAS preloaded (Linux, MLX not yet imported)."""
    if not sys.platform.startswith("linux") or os.environ.get("DFLASH_TUI_BLAS") == "reference":
        return
    if "mlx.core" in sys.modules or "openblas" in os.environ.get("LD_PRELOAD", ""):
        return
    library = openblas_path()
    if library is None:
        return
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join(p for p in (library, env.get("LD_PRELOAD", "")) if p)
    env["DFLASH_TUI_BLAS"] = "openblas"
    argv = list(sys.argv)
    if argv and argv[0].endswith("__main__.py"):  # started as `python -m package`
        argv = ["-m", Path(argv[0]).parent.name, *argv[1:]]
    try:
        os.execve(sys.executable, [sys.executable, *argv], env)
    except OSError:
        return  # keep going with MLX's own BLAS
