"""Code prompts from the functions of real Python packages (read from their wheels).

Every public function with a docstring becomes one prompt, in one of the forms people send
an assistant about code: a stub to complete (the signature and the real docstring), the
task stated in prose (the signature and the docstring's first paragraph), or the real
source to explain, document or test. The text inside each prompt is the package's own; only
the one-line ask around it is ours. Which form a function gets is drawn from a generator
seeded with the function's name, so rebuilding gives the same prompts.
"""

from __future__ import annotations

import ast
import random
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

MIN_SUMMARY = 24  # characters: shorter summaries ("Return x.") say too little to ask for
MAX_DOC_LINES = 24
MAX_EXPLAIN_LINES = 30
STUB_ASKS = ["Complete this Python function:", "Implement the body of this function:",
             "Write the body of this Python function so that it does what its docstring says:",
             "Fill in this function:"]
TASK_LEADS = ["Write a Python function `{sig}`. {summary}", "Implement `{sig}` in Python. {summary}",
              "I need a Python function `{sig}`. {summary}",
              "Can you write `{sig}` in Python? Here is what it should do: {summary}"]
SOURCE_ASKS = ["Explain what this Python function does:", "What does this function do? Walk through it step by step.",
               "Add a docstring to this function:", "Write unit tests for this function:",
               "Review this function and suggest improvements:"]


@dataclass(frozen=True)
class Function:
    item: str  # "path/in/wheel.py:name"
    signature: str  # "name(a, b=1)"
    docstring: str
    source: str  # the whole def, decorators excluded


def wheel_functions(wheel: Path) -> Iterator[Function]:
    """Public module-level functions with a docstring, in file order; tests are skipped."""
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            parts = name.split("/")
            if not name.endswith(".py") or any(p in ("tests", "test", "testing") or p.startswith("test_")
                                               for p in parts) or parts[0].endswith(".dist-info"):
                continue
            source = archive.read(name).decode("utf-8", errors="replace")
            yield from _functions(name, source)


def _functions(path: str, source: str) -> Iterator[Function]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    lines = source.splitlines()
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
            continue
        doc = ast.get_docstring(node)
        if not doc or len(_summary(doc)) < MIN_SUMMARY:
            continue
        signature = f"{node.name}({ast.unparse(node.args)})"
        whole = "\n".join(lines[node.lineno - 1:node.end_lineno])
        yield Function(f"{path}:{node.name}", signature, doc, whole)


def _summary(doc: str) -> str:
    """The docstring's first paragraph, on one line."""
    return " ".join(doc.strip().split("\n\n")[0].split())


def _without_docstring(fn: Function) -> str:
    tree = ast.parse(textwrap.dedent(fn.source))
    node = tree.body[0]
    if node.body and isinstance(node.body[0], ast.Expr) and isinstance(getattr(node.body[0], "value", None), ast.Constant):
        node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(node)


def prompt_for(fn: Function, seed: int) -> tuple[str, str]:
    """(form, prompt text) for one function."""
    r = random.Random(f"{seed}:{fn.item}")
    doc_lines = fn.docstring.strip().splitlines()
    body = _without_docstring(fn)
    roll = r.random()
    if roll < 0.25 and len(body.splitlines()) <= MAX_EXPLAIN_LINES:
        return "source", f"{r.choice(SOURCE_ASKS)}\n\n```python\n{body}\n```"
    if roll < 0.55 or len(doc_lines) > MAX_DOC_LINES:
        summary = _summary(fn.docstring)
        return "task", r.choice(TASK_LEADS).format(sig=fn.signature, summary=summary)
    doc = textwrap.indent("\n".join(doc_lines), "    ").lstrip()
    stub = f'def {fn.signature}:\n    """{doc}\n    """'
    return "stub", f"{r.choice(STUB_ASKS)}\n\n```python\n{stub}\n```"
