"""Reading a prompt from a file, the same way everywhere.

A text file ends in a newline that is not part of the prompt, and one trailing "\n" turns
into its own token inside the chat template. The bench, `probe --prompt-file` and the TUI's
prompt picker must send the target the same tokens for the same file, or a round seen in
the TUI is not the round the bench measured (on sample_prompts/code/05 the newline changed
round 19's acceptance and the prompt's mean from 1.41 to 1.38).
"""

from __future__ import annotations

import os
from pathlib import Path

from .engine.errors import InputError


def read_prompt_file(path: Path) -> str:
    """The file's text without surrounding whitespace; one-line errors naming the file."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        if path.is_symlink():
            raise InputError(f"{path}: broken symbolic link to {os.readlink(path)} "
                             "(expected a prompt file)") from None
        raise InputError(f"{path}: no such prompt file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: a folder, not a prompt file (expected UTF-8 text)") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text (a prompt file is plain UTF-8)") from None
    except OSError as error:
        raise InputError(f"{path}: unreadable prompt file ({error.strerror or error})") from None
    if not text:
        raise InputError(f"{path}: empty prompt file (expected the prompt's text)")
    return text
