"""Root conftest: run the suite with OpenBLAS behind MLX's CPU matmuls when the system has it
(see dflash_tui/blas.py; set DFLASH_TUI_BLAS=reference to keep MLX's own BLAS)."""

from dflash_tui.blas import maybe_reexec_with_openblas

maybe_reexec_with_openblas()
