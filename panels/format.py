"""Formatting shared by the panels: numbers that fit a narrow cell, tokens made visible.

Token text comes from the model and may contain anything, including Rich markup: it is
always wrapped in a `Text`, never interpolated into markup.
"""

from __future__ import annotations

import math
from typing import Optional

from rich.text import Text

from dflash_tui.slot_text import NONFINITE  # n/f: one spelling, bench --slots' too

# In place of what a slot's NaN / Inf logits ranked first (tab 1's top-5, tab 2's
# candidates): noise that read like candidates
NONFINITE_LOGITS = f"{NONFINITE}: NaN / Inf logits"
DASH = "—"
# Whitespace and control characters a token may carry, shown as visible glyphs.
_VISIBLE = str.maketrans({"\n": "↵", "\t": "⇥", "\r": "␍", " ": "␣", "\x00": "␀"})


def num(x: Optional[float], digits: int = 4) -> str:
    """A float in at most ~9 characters: fixed point when readable, else scientific."""
    if x is None:
        return DASH
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    a = abs(x)
    if a == 0:
        return "0"
    if 1e-3 <= a < 1e5:
        text = f"{x:.{digits}g}"
        return text
    return f"{x:.{max(digits - 2, 1)}e}"


def score(x: Optional[float], digits: int = 4) -> str:
    """A value the engine always computes (a logit, a probability, a score): None there
    means it was NaN or Inf (JSON has neither), so live and replay both show n/f."""
    if x is None or not math.isfinite(x):
        return NONFINITE
    return num(x, digits)


def sci(x: Optional[float]) -> str:
    """Scientific with three significant digits, always the same width for a sign: a column
    of these lines up on the decimal point whatever the magnitudes (probe statistics)."""
    if x is None:
        return DASH
    if not math.isfinite(x):
        return num(x)
    return f"{x:.2e}"


def column(values, digits: int = 4, engine_value: bool = True) -> list[str]:
    """A column of numbers in one format, so right-justified they line up on the point:
    fixed point with as many decimals as the largest value leaves room for (`digits`
    significant), or scientific for all when the column spans magnitudes fixed point cannot
    show. engine_value: None / NaN / Inf show as n/f (see `score`), else as num() does."""
    finite = [abs(v) for v in values if v is not None and math.isfinite(v)]
    big = max(finite, default=0.0)
    small = min((v for v in finite if v > 0), default=big)
    if big >= 1e5 or (small and small < 10 ** -(digits - 1)):
        fmt = lambda v: f"{v:.{digits - 2}e}"  # noqa: E731
    else:
        decimals = max(0, digits - 1 - (int(math.floor(math.log10(big))) if big > 0 else 0))
        fmt = lambda v: f"{v:.{decimals}f}"  # noqa: E731
    missing = score if engine_value else num
    return [fmt(v) if v is not None and math.isfinite(v) else missing(v) for v in values]


def prob(x: Optional[float]) -> str:
    if x is None or not math.isfinite(x):
        return NONFINITE
    return f"{x:.3f}"


def count(n: int) -> str:
    return "0" if n == 0 else f"{n:,}"


def percent(part: int, whole: int) -> str:
    return DASH if whole == 0 else f"{100 * part / whole:.0f}%"


def token_cell(text: str, width: int = 12) -> str:
    """One token as it is, whitespace made visible, cut to `width` characters."""
    shown = text.translate(_VISIBLE)
    shown = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in shown)
    if not shown:
        return "∅"
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def token_text(text: str, style: str = "", width: int = 12) -> Text:
    return Text(token_cell(text, width), style=style, no_wrap=True, overflow="ellipsis")


def inline_token(text: str) -> str:
    """A token placed inside running text: newlines kept (with a visible mark), other
    control characters escaped."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append("↵\n")
        elif ch == "\t" or ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\x{ord(ch):02x}")
    return "".join(out) or "∅"


def short_path(path: str, strip_suffix: bool = False) -> str:
    """The last component of a path (a model's name), or the path when it has none."""
    path = str(path).rstrip("/")
    name = path.rsplit("/", 1)[-1] or path
    if strip_suffix and "." in name.strip("."):
        name = name.rsplit(".", 1)[0]
    return name


def cell(value, width: int, justify: str = "left") -> Text:
    """One cell of a text grid: cut with an ellipsis or padded to exactly `width`."""
    text = value.copy() if isinstance(value, Text) else Text(str(value))
    text.truncate(width, overflow="ellipsis")
    pad = " " * (width - text.cell_len)
    return Text.assemble(pad, text) if justify == "right" else Text.assemble(text, pad)


def grid(rows, widths: list[int], justify: str = "", gap: int = 1, header=None,
         header_style: str = "bold") -> Text:
    """Rows of cells laid out in fixed-width columns as one Text.

    Rich tables measure and render every cell through a console each time they are drawn,
    which on a small CPU costs milliseconds per panel per frame; this costs microseconds.
    justify: one letter per column, "l" or "r" (default: all left).
    """
    justify = justify.ljust(len(widths), "l")
    lines = []
    if header is not None:
        lines.append(_line(header, widths, justify, gap, header_style))
    lines.extend(_line(row, widths, justify, gap) for row in rows)
    return Text("\n", no_wrap=True, overflow="crop").join(lines)


def _line(row, widths, justify, gap, style: str = "") -> Text:
    line = Text(no_wrap=True, overflow="crop", style=style)
    for i, (value, width) in enumerate(zip(row, widths)):
        if i:
            line.append(" " * gap)
        line.append_text(cell(value, width, "right" if justify[i] == "r" else "left"))
    return line


def rounds_count(n: int) -> str:
    """`1 round`, `3 rounds`."""
    return f"{n} round" if n == 1 else f"{n} rounds"


def reading_text(reading: tuple[int, int]) -> str:
    """Replay still reading its trace for the history (what is counted is what it has read)."""
    done, total = reading
    return f"reading {done:,} of {total:,} round{'s' * (total != 1)}…"
