"""The README's Python example runs as written, on a fixture pair in place of MODEL_DIR."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_python_example_runs(make_pair, capsys):
    (example,) = python_blocks(README.read_text(encoding="utf-8"))
    assert '"MODEL_DIR"' in example
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")  # its drafter is at target/draft
    code = example.replace('"MODEL_DIR"', repr(str(target_dir)))
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    first, second = capsys.readouterr().out.splitlines()
    accepted, first_nonfinite, rank = first.split(" ")
    assert 0 <= int(accepted) <= 7 and first_nonfinite == "None" and int(rank) >= 0
    assert second.startswith("DFlash2 float32 [")
