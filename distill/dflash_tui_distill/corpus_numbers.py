"""Worded computations with the numbers given, from the CodeI/O problems' input generators.

A CodeI/O problem (corpus_tasks.py) states a computation in words ("Given the radius and the
angle of a sector, what is its area?") and ships a small generator of valid inputs for it.
Run with a seeded generator, that gives the question with its numbers ("... Use radius = 34
and angle = 213."): the shape of a worded problem that a user types, which no other offline
source gives. Each problem with a generator that runs becomes a second prompt, beside its
stage-11 one, and keeps that prompt's split.

The generators are code from a data file. They run here only in a child process with a
memory limit, two seconds of wall time each, builtins without file, exec or eval access, and
imports limited to math, random and string (what nearly all of them use; the few that
need numpy are left out). That is a fence around a pinned archive whose sha256 the corpus
records, not a sandbox for untrusted code. Each generator runs twice, in two children with
different fixed hash seeds (PYTHONHASHSEED 1 and 2), and only the problems whose two runs
agree are kept, so a generator that is not seeded by its argument, or whose values follow a
set's order, is left out the same way in every build. A problem can be asked more than once
(draws): draw 0 is seeded as it always was, so a corpus of one draw is unchanged, and each
later draw is a further variant of the same item, on the same side of the split.
"""

from __future__ import annotations

import builtins
import json
import math
import os
import random
import signal
import subprocess
import sys

from dflash_tui.engine.errors import InputError

ALLOWED_IMPORTS = {"math", "random", "string"}
DENIED_BUILTINS = {"open", "exec", "eval", "compile", "input", "breakpoint", "exit", "quit", "help",
                   "globals", "locals", "vars", "memoryview"}
SECONDS_EACH = 2
MEMORY_BYTES = 2 << 30
MAX_VALUES_CHARS = 240
MAX_LIST = 8
MAX_STRING = 40
LEADS = ["Use {values}.", "Take {values}.", "Work it out for {values}.", "With {values}."]


def instantiate(tasks, seed: int, draw: int = 0, timeout: float = 900.0) -> dict[str, str]:
    """{item: the values as text} for every task whose generator runs to the same values twice."""
    request = json.dumps({"seed": seed, "draw": draw,
                          "tasks": [{"item": t.item, "code": t.generator} for t in tasks if t.generator]})
    runs = [_run_child(request, timeout, hash_seed) for hash_seed in (1, 2)]
    return {item: text for item, text in runs[0].items() if runs[1].get(item) == text}


def _run_child(request: str, timeout: float, hash_seed: int) -> dict[str, str]:
    try:
        # a bare environment, and this process's import path so the child finds the same code;
        # a fixed hash seed, so a set's order is the same in every build
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PYTHONHASHSEED": str(hash_seed)}
        done = subprocess.run([sys.executable, "-m", "dflash_tui_distill.corpus_numbers"],
                              input=request, capture_output=True, text=True, timeout=timeout,
                              cwd="/", env=env)
    except subprocess.TimeoutExpired:
        raise InputError(f"CodeI/O input generators: still running after {timeout:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InputError(f"CodeI/O input generators: the child process failed ({last})")
    return json.loads(done.stdout)


def values_text(inputs) -> str | None:
    """'a = 1, b = 2.5 and name = "x"' for small inputs; None for ones too big to read as a question."""
    if not isinstance(inputs, dict) or not inputs:
        return None
    parts = []
    for name, value in inputs.items():
        shown = _value(value, depth=0)
        if shown is None or not str(name).isidentifier():
            return None
        parts.append(f"{name} = {shown}")
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return text if len(text) <= MAX_VALUES_CHARS else None


def _value(value, depth: int) -> str | None:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value == 0 or 1e-3 <= abs(value) < 1e6:
            return repr(round(value, 2 if abs(value) >= 1 else 4))
        return f"{value:.3g}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if len(value) <= MAX_STRING else None
    if isinstance(value, (list, tuple)) and depth < 2 and len(value) <= MAX_LIST:
        items = [_value(v, depth + 1) for v in value]
        return None if None in items else "[" + ", ".join(items) + "]"
    return None


def variant(item: str, draw: int) -> str:
    """The corpus item of a problem's draw: "ITEM|numbers", then "ITEM|numbers2", ..."""
    return f"{item}|numbers" if draw == 0 else f"{item}|numbers{draw + 1}"


def prompt_for(task, values: str, seed: int, draw: int = 0) -> tuple[str, str]:
    """(form, prompt text): the task in its own words, then its numbers."""
    r = random.Random(f"{seed}:{variant(task.item, draw)}")
    return "numbers", f"{task.task}\n\n{r.choice(LEADS).format(values=values)}"


# --- the child process -------------------------------------------------------------------

def _draw_seed(seed: int, item: str, draw: int) -> str:
    return f"{seed}:{item}" if draw == 0 else f"{seed}:{item}:{draw}"


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level or name.split(".")[0] not in ALLOWED_IMPORTS:
        raise ImportError(f"{name} is not importable here")
    return __import__(name, globals, locals, fromlist, level)


def _on_alarm(signum, frame):
    raise TimeoutError("generator took too long")


def _child() -> int:
    import resource
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    except (ValueError, OSError):  # a platform without an address-space limit keeps the rest
        pass
    request = json.loads(sys.stdin.read())
    safe = {k: v for k, v in vars(builtins).items() if k not in DENIED_BUILTINS}
    safe["__import__"] = _guarded_import
    signal.signal(signal.SIGALRM, _on_alarm)
    result, sys.stdout = sys.stdout, sys.stderr  # what a generator prints must not reach the answer
    out = {}
    for task in request["tasks"]:
        scope = {"__builtins__": safe, "Random": random.Random, "__name__": "codeio"}
        signal.alarm(SECONDS_EACH)
        try:
            exec(task["code"], scope)
            generate = scope.get("generate_inputs") or scope.get("generate_input")
            inputs = generate(random.Random(_draw_seed(request["seed"], task["item"], request["draw"]))) \
                if generate else None
            text = values_text(inputs)
        except BaseException:  # a generator that fails, loops or reaches out is left out
            text = None
        finally:
            signal.alarm(0)
        if text:
            out[task["item"]] = text
    result.write(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(_child())
