"""The end of the benchmarks that report in JSON: the result printed, and the same text
written to --json's file when one is given. No MLX here: the TUI benchmarks that use it
import none of the engine's own (bench_replay.py and bench_replay_keys.py run as scripts,
so they import it from beside them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Union


def print_and_write(result: dict, path: Optional[Union[str, Path]]) -> None:
    text = json.dumps(result, indent=2)
    print(text)
    if path:
        Path(path).write_text(text + "\n")
