"""dflash-tui: see inside DFlash / DFlash2 block-drafter speculative decoding."""

__version__ = "0.1.0"


def load_trace(source, session=None):
    """The flat tables (rounds, slots, buffers) of a recorded session: see dflash_tui.tables."""
    from .tables import load_trace as load

    return load(source, session)
