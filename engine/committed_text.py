"""The committed text, kept up to date as a decode appends tokens.

Decoding every generated token again each round costs time that grows with the decode
(SmolLM2's tokenizer: 1.4 ms at 2,000 tokens, 6 ms at 8,000, a round's whole host budget on
a GPU). So past the first tokens the text is the settled text plus a decode of the window
after it. The window starts one token early, at the last settled token, and that token's
own text is cut off again: a tokenizer's rules that look at neighbours (a first token's
leading space dropped, spaces cleaned up before punctuation) then apply across the seam as
in a whole decode.

The window's text is checked against a whole decode every round for the first
`CHECKED_TOKENS` tokens, and every `CHECK_EVERY` tokens after that. If a check ever differs,
the tokenizer is one the window cannot follow, and from then on every round decodes the
whole text.
"""

from __future__ import annotations

from typing import Callable, Sequence

CHECKED_TOKENS = 1024  # decoded whole (and checked) every round up to here
CHECK_EVERY = 256  # after that, a whole decode (and a check) once the window is this long
REPLACEMENT = "\ufffd"  # a UTF-8 character split between tokens decodes to this


class CommittedText:
    def __init__(self, decode: Callable[[Sequence[int]], str]):
        self._decode = decode
        self._settled = 0  # tokens whose text is _settled_text
        self._settled_text = ""
        self.follows = True  # False once a check found the window's text differ

    def text(self, ids: Sequence[int]) -> str:
        """decode(ids), where ids extends the ids of the call before."""
        n = len(ids)
        if n < self._settled:  # not an extension: start again
            self._settled, self._settled_text = 0, ""
        if not self.follows or n <= CHECKED_TOKENS or n - self._settled >= CHECK_EVERY:
            whole = self._decode(ids)
            if self.follows:
                window = self._window(ids)
                self.follows = window is None or window == whole
            self._settle(ids, whole)
            return whole
        window = self._window(ids)
        return self._decode(ids) if window is None else window

    def _window(self, ids: Sequence[int]):
        """The settled text + the window's, or None when the seam token's text is not where
        it should be (then decode whole this round)."""
        if not self._settled:
            return None
        seam = self._decode(ids[self._settled - 1: self._settled])
        tail = self._decode(ids[self._settled - 1:])
        if not tail.startswith(seam):
            return None
        return self._settled_text + tail[len(seam):]

    def _settle(self, ids: Sequence[int], whole: str) -> None:
        # Never settle inside a character: its bytes would be cut in two at the seam.
        if whole.endswith(REPLACEMENT) or REPLACEMENT in self._decode(ids[-1:]):
            return
        self._settled, self._settled_text = len(ids), whole
