"""How a single token reads on screen.

A token that is only part of a UTF-8 character decodes to the replacement character on its
own. For byte-level BPE vocabularies (GPT-2's scheme, which llama-3, Qwen and SmolLM use)
the token's piece spells its raw bytes, so such a token shows those bytes instead, e.g.
'\\xe2', and a reader can still tell the tokens of one character apart.
"""

from __future__ import annotations


def _byte_decoder() -> dict[str, int]:
    """GPT-2 byte-level BPE's printable-character -> byte table."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) \
        + list(range(ord("\xae"), ord("\xff") + 1))
    chars, n = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


_BYTES = _byte_decoder()


def token_display(tokenizer, token: int) -> str:
    """The text of `token` alone; its bytes where that text would be a replacement character."""
    text = tokenizer.decode([token])
    if "\ufffd" not in text:
        return text
    piece = tokenizer.convert_ids_to_tokens(token)
    if isinstance(piece, str) and piece and all(ch in _BYTES for ch in piece):
        raw = bytes(_BYTES[ch] for ch in piece)
        return raw.decode("utf-8", errors="backslashreplace")
    return text
