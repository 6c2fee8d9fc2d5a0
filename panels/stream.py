"""Token stream: the committed text, then the round on screen's proposals coloured by fate.

    pending   proposed by select, not verified yet
    accepted  matched the target's own next token
    rejected  the first mismatch and every proposal after it
    bonus     the target's token at the first mismatch (or after the last proposal)

A finished session's last round is followed, on a line of its own, by `⏹` and why it
finished (eos, length, context).
"""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from .format import inline_token
from .frame import Frame

STYLES = {
    "prompt": "dim italic",
    "pending": "black on yellow",
    "accepted": "black on green",
    "rejected": "red strike",
    "bonus": "bold black on cyan",
}
# Every other token of a run gets the second shade, so token boundaries stay visible.
SHADES = {
    "pending": "black on dark_goldenrod",
    "accepted": "black on dark_sea_green4",
    "rejected": "bright_red strike",
    "bonus": STYLES["bonus"],
}
PROMPT_TAIL = 400  # characters of the prompt kept on screen


class TokenStream(VerticalScroll):
    DEFAULT_CSS = """
    TokenStream {
        border: round $primary 50%;
        border-title-color: $text-primary;
        padding: 0 1;
    }
    TokenStream > Static { width: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "tokens"
        self._shown: Optional[tuple] = None
        self._lines = -1
        self._scrolled_at = -1

    def compose(self):
        yield Static(id="stream-text")

    def on_resize(self) -> None:
        # The text wraps anew: its line count no longer says whether its height changed, and
        # the end (the round on screen) goes out of view where a taller panel had it all.
        self._lines = self._scrolled_at = -1
        self.call_after_refresh(self.scroll_end, animate=False)
        if self._shown is not None:
            self.border_subtitle = _subtitle(self._shown[1], self._subtitle_room())

    def _subtitle_room(self) -> int:
        # the bottom edge less its corners, a line each side and a space each side
        width = self.outer_size.width
        return width - 6 if width else 1 << 30

    def show(self, frame: Frame) -> None:
        record = frame.record
        key = (frame.info, record, frame.text_before, frame.prefill, frame.failed)
        if self._shown is not None and all(a is b for a, b in zip(key, self._shown)):
            return
        self._shown = key
        text = render_stream(frame)
        static = self.query_one("#stream-text", Static)
        width = static.content_size.width
        lines = len(text.wrap(self.app.console, width)) if width > 0 else -1
        # a layout pass (which repaints every panel) only when the text's height changes
        static.update(text, layout=lines != self._lines or lines < 0)
        self._lines = lines
        self.border_subtitle = _subtitle(record, self._subtitle_room())
        if lines != self._scrolled_at:
            self._scrolled_at = lines
            self.call_after_refresh(self.scroll_end, animate=False)


def render_stream(frame: Frame) -> Text:
    text = Text()
    if frame.info is not None and frame.info.prompt:
        prompt = frame.info.prompt
        if len(prompt) > PROMPT_TAIL:
            prompt = "…" + prompt[-PROMPT_TAIL:]
        text.append(prompt.rstrip("\n") + "\n", style=STYLES["prompt"])
        text.append("─" * 8 + "\n", style="dim")
    record = frame.record
    if record is None:
        if frame.prefill is not None:
            text.append(frame.prefill.first_text)
        elif frame.info is None:
            text.append("no session: it failed to open" if frame.failed else "loading…",
                        style="dim italic")
        return text
    text.append(frame.text_before)
    for i, (token, fate) in enumerate(round_tokens(record)):
        style = SHADES[fate] if i % 2 else STYLES[fate]
        text.append(inline_token(record.text(token)), style=style)
    if record.finish_reason:
        # On a line of its own: after the text, the wrap split `⏹` from its reason (`⏹` at
        # the end of one line at 80 columns, `length` on the next). A no-break space would
        # not hold them: Rich and Textual both break at any whitespace, that one included.
        if not text.plain.endswith("\n"):
            text.append("\n")
        text.append(f"⏹ {record.finish_reason}", style="bold")
    return text


def round_tokens(record) -> list[tuple[int, str]]:
    """The round's tokens in order with their fate (see the module docstring)."""
    if record.proposals is None:
        return []
    if record.accepted is None:
        return [(t, "pending") for t in record.proposals]
    k = record.accepted
    kept = k
    bonus = record.bonus is not None
    if record.complete:  # EOS or the token budget may have cut the round short
        kept = min(k, len(record.committed_tokens))
        bonus = bonus and len(record.committed_tokens) > k
    out = [(t, "accepted") for t in record.proposals[:kept]]
    out += [(t, "rejected") for t in record.proposals[kept:]]
    if bonus:  # read as: the rejected proposals are struck out and the bonus replaces them
        out.append((record.bonus, "bonus"))
    return out

def _subtitle(record, room: int) -> str:
    """`round 3 · 2/15 accepted · +3 tokens`, each part whole or left out (the last first)
    where the border is too short: Textual's own cut made `+12 tokens` read `+1…`."""
    if record is None:
        return ""
    forms = [f"round {record.round}"]
    if record.accepted is not None:
        forms.append(f"{forms[-1]} · {record.accepted}/{record.gamma} accepted")
    if record.complete:
        tokens = len(record.committed_tokens)
        forms += [f"{forms[-1]} · +{tokens}", f"{forms[-1]} · +{tokens} tokens"]
    return next((text for text in reversed(forms) if len(text) <= room), forms[0])
