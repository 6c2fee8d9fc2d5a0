"""Requests that quote literal strings the answer must repeat (the `literal` kind).

Stepping the shipped drafter through a held-out bash request showed it missing spans the
target copies verbatim from the prompt: a folder-name pattern took six rounds, a path's
last token was rejected five times. The `ident` kind teaches copying names; this one
teaches copying everything else a request spells out: paths, file-name patterns, date
formats, messages, URLs, flags, ticket and branch names. Every literal is composed per
prompt from small pools, so remembering them does not pay and reading them does.

Opt-in: not in the default mix. Stage 4 of the sample recipe draws 8% of its prompts from
it; a smaller, literal-heavy try lowered the bench (docs/DISTILL.md, "A literal-heavy try
that was not shipped"). Its own seeded generator leaves the other kinds' prompts unchanged.
"""

from __future__ import annotations

import random

from . import pools

P = pools.load("prompts_literals")  # the pools: prompt_data/prompts_literals.json



def _word(r: random.Random) -> str:
    return r.choice(P.WORDS)


def _two(r: random.Random, sep: str) -> str:
    a, b = r.sample(P.WORDS, 2)
    return f"{a}{sep}{b}"


def _path(r: random.Random) -> str:
    return f"{r.choice(P.ROOTS)}/{_two(r, r.choice(['_', '-', '/']))}"


def _pattern(r: random.Random) -> str:
    ext = r.choice(P.EXTS)
    return r.choice([
        f"{_word(r)}-{r.choice(P.DATE_FORMATS)}.{ext}",
        f"{_word(r)}_{r.choice(['001', 'v2', 'final', 'part1', 'raw'])}.{ext}",
        f"{_two(r, '-')}.{ext}",
        f"{_word(r).upper()}_{r.choice(P.DATE_FORMATS)}",
    ])


def _message(r: random.Random) -> str:
    thing = _word(r)
    return r.choice([
        f"{thing.capitalize()} file not found: {{path}}",
        f"Processed {{count}} {thing} records in {{seconds}}s",
        f"Warning: {thing} data is older than {r.choice([2, 3, 7, 14, 30])} days",
        f"{thing}: {r.choice(['skipped', 'failed', 'done', 'retrying'])} ({{reason}})",
    ])


def _url(r: random.Random) -> str:
    return f"https://{_word(r)}.example.com/api/v{r.randint(1, 4)}/{_word(r)}s"


def file_task(r: random.Random) -> str:
    src, dst, pattern, ext = _path(r), _path(r), _pattern(r), r.choice(P.EXTS)
    lang = r.choice(P.LANGS)
    task = r.choice([
        f"renames every `.{ext}` file in `{src}` to the pattern `{pattern}`",
        f"compresses `{src}` into an archive named `{pattern}` inside `{dst}`",
        f"counts the lines containing `{_message(r).split(':')[0]}` in every `.{ext}` file "
        f"under `{src}` and writes the totals to `{dst}/counts.txt`",
        f"deletes files in `{src}` larger than {r.choice([5, 50, 100, 500])} MB, printing "
        f"`{_message(r)}` for each one",
    ])
    return f"Write {lang} code that {task}."


def message_task(r: random.Random) -> str:
    fn = f"{r.choice(['load', 'read', 'parse', 'sync', 'check'])}_{_word(r)}"
    path, message = _path(r) + "." + r.choice(P.EXTS), _message(r)
    return r.choice([
        f"Write a Python function `{fn}(path)` that reads `{path}` by default and raises "
        f"`ValueError(\"{message}\")` when the file is empty.",
        f"Write a Python script that logs each {_word(r)} it handles in the format "
        f"`{r.choice(P.DATE_FORMATS)} | {message}` and writes the log to `{path}`.",
        f"Write a JavaScript function that fetches `{_url(r)}` and, if the request fails, "
        f"shows `{message}` in the element with id `{_two(r, '-')}`.",
    ])


def config_task(r: random.Random) -> str:
    service, env = _two(r, "-"), f"{_word(r).upper()}_{r.choice(['TOKEN', 'URL', 'DSN', 'KEY'])}"
    return (f"Write a {r.choice(['YAML', 'JSON', 'TOML'])} config for a service named `{service}` "
            f"that listens on port {r.choice([3000, 5000, 8000, 8443, 9090])}, writes logs to "
            f"`{_path(r)}`, reads its secret from `{env}` and calls `{_url(r)}`. "
            f"{r.choice(['Then explain each field.', 'Add a comment on each line.', ''])}").strip()


def flag_task(r: random.Random) -> str:
    tool, flags = _word(r), [f"--{_two(r, '-')}" for _ in range(2)]
    return (f"Write a Python command-line tool `{tool}` with argparse that accepts `{flags[0]}` "
            f"(a path, default `{_path(r)}`) and `{flags[1]}` (a date in `{r.choice(P.DATE_FORMATS)}` "
            f"format), and prints `{_message(r)}` when it finishes.")


def status_task(r: random.Random) -> str:
    ticket = f"{r.choice(['INC', 'OPS', 'BUG', 'FEAT', 'SUP'])}-{r.randint(100, 99999)}"
    branch = f"{r.choice(['fix', 'feature', 'hotfix'])}/{_two(r, '-')}"
    return (f"Write a short status update to the team about ticket `{ticket}`: the fix is on "
            f"branch `{branch}`, the failing job wrote `{_message(r)}`, and the output now goes "
            f"to `{_path(r)}`.")


def literal_request(r: random.Random) -> str:
    return r.choice([file_task, file_task, message_task, message_task, config_task, flag_task,
                     status_task])(r)
