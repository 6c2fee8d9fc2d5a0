"""dflash-tui: see inside DFlash / DFlash2 block-drafter speculative decoding."""

__version__ = "0.1.0"
