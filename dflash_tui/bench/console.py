"""Where `bench` and `bench-diff` print their tables."""

from __future__ import annotations

import os
import sys

from rich.console import Console

# Piped into a file or a pager, a caption wraps at this width (a line or two), not at 80.
PIPED_WIDTH = 200


def stdout_console() -> Console:
    """On a terminal, its width (rich reads COLUMNS, then the terminal). Piped, COLUMNS
    where it is set, as a terminal would honour it (`COLUMNS=80 dflash-tui bench ... >
    out.txt`), else PIPED_WIDTH."""
    width = None
    if not sys.stdout.isatty():
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
    return Console(highlight=False, width=width)
