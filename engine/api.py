"""Opening a session from paths: the one entry point the CLI, the app and the bench share."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from .checkpoint import load_drafter
from .errors import InputError
from .paths import check_target_path, resolve_drafter_dir
from .session import Session, SessionOptions
from .target import DTYPES, Target, encode_prompt, load_target

Progress = Callable[[str], None]


def load_pair(model: str | Path, draft: Optional[str | Path] = None, *, dtype: str = "float32",
              keep_quantized: bool = False, progress: Progress = lambda _: None):
    model = Path(model).expanduser()
    if dtype not in DTYPES:
        raise InputError(f"--dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    check_target_path(model)
    draft_dir = resolve_drafter_dir(model, draft)
    progress(f"loading target {model}")
    target = load_target(model, dtype, keep_quantized=keep_quantized)
    progress(f"loading drafter {draft_dir}")
    drafter = load_drafter(draft_dir, DTYPES[dtype])
    return target, drafter, draft_dir


def open_session(target: Target, drafter, draft_dir: str | Path, prompt: str, *,
                 chat: Optional[bool] = None, dtype: str = "float32",
                 options: SessionOptions = SessionOptions(),
                 progress: Progress = lambda _: None, prefill: bool = True) -> Session:
    ids = encode_prompt(target.tokenizer, prompt, chat)
    target.check_prompt(len(ids))
    session = Session(target, drafter, ids, options=options, prompt_text=prompt,
                      drafter_path=str(draft_dir), dtype=dtype)
    target.check_block(session.gamma)
    if prefill:
        progress(f"prefill: {len(ids)} prompt tokens")
        session.prefill()
    return session
