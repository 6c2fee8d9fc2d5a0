"""A prompt's text checked for what the tokenizer cannot take, without MLX: the CLI calls
this before anything loads, and encode_prompt again for callers of the Python API."""

from __future__ import annotations

from .errors import ParameterError


def check_utf8(prompt: str) -> None:
    """Refuse a prompt holding bytes that are not UTF-8 (Python hands them over from the
    command line as lone surrogates, which the tokenizer fails on with a TypeError)."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as error:
        code = ord(prompt[error.start])
        what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        before = prompt[max(0, error.start - 20):error.start].encode("utf-8", "replace")
        raise ParameterError(
            "prompt_ids", None,
            f"not valid UTF-8 ({what} after {before.decode()!r}); expected UTF-8 text",
        ) from None
