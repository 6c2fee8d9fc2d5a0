"""Code tasks stated in prose, from the CodeI/O problems that the reasoning-gym wheel ships.

reasoning-gym (Apache-2.0) carries, as data files, a few thousand problems gathered from real
code: each has a task in prose ("Given the volume and weight of a moist sand specimen ...,
what are its porosity and void ratio?"), an input/output specification naming every argument,
and the function that solves it (`main_solution`). That is the shape of what people ask a
small assistant about code and about worded computations, which the packages' own
docstrings (corpus_code.py) rarely are. Nothing here runs the files' code: only their text
is read.

Each problem becomes one prompt, in one of three forms drawn from a generator seeded with the
problem's name: the task and its specification with a request to write the function, the
task alone as the question it is, or the solving code to explain. The text is the data
file's; only the one-line asks are ours.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import random
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from dflash_tui.engine.errors import InputError

# the wheel's members that hold the problems; codeio-hq.jsonl.gz is one JSON array,
# codeio.jsonl.gz one object per line, and most problems are in both
MEMBERS = ("reasoning_gym/data/codeio-hq.jsonl.gz", "reasoning_gym/data/codeio.jsonl.gz")
MAX_SOURCE_LINES = 30
WRITE_ASKS = ["Write a Python function `{sig}` that solves this problem.",
              "Implement `{sig}` in Python for the following task.",
              "I need a Python function `{sig}` for this:",
              "Can you write `{sig}` in Python? Here is the problem."]
EXPLAIN_ASKS = ["Explain what this Python code does:", "What does this code compute? Walk through it step by step.",
                "Add comments to this code explaining each step:", "Write unit tests for this function:"]


@dataclass(frozen=True)
class Task:
    item: str  # "reasoning_gym/data/codeio#<hash of the task's text>"
    task: str  # the problem in prose
    spec: str  # its inputs and output, argument by argument
    code: str  # the function that solves it (main_solution and what it needs)
    generator: str = ""  # code that draws valid inputs for it (run only by corpus_numbers.py)


def wheel_tasks(wheel: Path) -> Iterator[Task]:
    """Every distinct problem in the wheel's CodeI/O files, in a fixed order; none if it has none."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        rows = []
        for member in MEMBERS:
            if member in names:
                rows.extend(_rows(archive.read(member), f"{wheel.name}:{member}"))
    tasks = {}
    for row in rows:
        text = " ".join(str(row.get("task_description", "")).split())
        if not text or text.lower() in tasks:
            continue
        item = "reasoning_gym/data/codeio#" + hashlib.sha256(text.encode()).hexdigest()[:16]
        tasks[text.lower()] = Task(item, str(row["task_description"]).strip(),
                                   str(row.get("input_output_spec", "")).strip(),
                                   str(row.get("code_sample", "")).strip(),
                                   str(row.get("input_generator", "")).strip())
    yield from sorted(tasks.values(), key=lambda t: t.item)


def _rows(raw: bytes, where: str) -> list[dict]:
    try:
        text = gzip.decompress(raw).decode("utf-8")
        try:
            whole = json.loads(text)  # one JSON array
        except json.JSONDecodeError:
            whole = [json.loads(line) for line in text.splitlines() if line.strip()]  # JSON lines
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{where}: not gzipped JSON ({error})") from None
    if not isinstance(whole, list) or not all(isinstance(r, dict) for r in whole):
        raise InputError(f"{where}: expected a list of JSON objects, each with a task_description")
    return whole


def _signature(code: str) -> str | None:
    """`main_solution(a, b)` from the solving code, or None where it has no such function."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "main_solution":
            return f"main_solution({ast.unparse(node.args)})"
    return None


def prompt_for(task: Task, seed: int) -> tuple[str, str]:
    """(form, prompt text) for one problem."""
    r = random.Random(f"{seed}:{task.item}")
    roll = r.random()
    signature = _signature(task.code)
    if roll < 0.2 and signature and len(task.code.splitlines()) <= MAX_SOURCE_LINES:
        return "source", f"{r.choice(EXPLAIN_ASKS)}\n\n```python\n{task.code}\n```"
    if roll < 0.45 or not signature or not task.spec:
        return "question", task.task
    return "write", f"{r.choice(WRITE_ASKS).format(sig=signature)}\n\n{task.task}\n\n{task.spec}"
