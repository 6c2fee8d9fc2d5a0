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


def leave_a_core_for_the_ui(cpus: int | None = None) -> int | None:
    """In the TUI, run OpenBLAS on all cores but one, so the UI thread has a core to draw
    on while the engine multiplies. On 2 cores the sample's rounds were no slower on one
    thread (OpenBLAS's second one spins more than it helps at these sizes) and tab
    switches no slower either (docs/TUI.md, "A core for the UI"). Returns the threads set,
    or None where nothing was changed: not OpenBLAS, a single core, or the user set
    OPENBLAS_NUM_THREADS (their choice stands)."""
    if os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("DFLASH_TUI_BLAS") == "reference":
        return None
    library = next((p for p in os.environ.get("LD_PRELOAD", "").split(":") if "openblas" in p), None)
    cpus = os.cpu_count() if cpus is None else cpus
    if library is None or not cpus or cpus < 2:
        return None
    import ctypes

    try:
        openblas = ctypes.CDLL(library)  # the preloaded library: the handle MLX's calls reach
        openblas.openblas_set_num_threads(ctypes.c_int(cpus - 1))
    except (OSError, AttributeError):
        return None
    return cpus - 1
