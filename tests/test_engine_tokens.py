"""A token's display text: whole characters as they are, a piece of one as its bytes."""

from __future__ import annotations

from dflash_tui.engine.tokens import token_display


def test_a_split_character_shows_its_bytes(make_pair):
    from mlx_lm.utils import load_tokenizer

    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    tokenizer = load_tokenizer(target_dir)
    ids = tokenizer.encode("é!", add_special_tokens=False)  # é is never merged: two byte tokens
    assert [token_display(tokenizer, t) for t in ids] == ["\\xc3", "\\xa9", "!"]
    whole = tokenizer.encode("The", add_special_tokens=False)
    assert "".join(token_display(tokenizer, t) for t in whole) == "The"
