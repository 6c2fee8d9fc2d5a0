"""Code requests whose identifiers are drawn fresh for every prompt (the `ident` kind).

Most of what the shipped drafter rejects on held-out code requests is a name the prompt
itself defines (`host`, `port`, `debug`, `from_env`): it learned the answers' usual names
from a few dozen fixed pools instead of copying the prompt's. Here an entity, its fields,
the function, class, table and environment names are composed per prompt, so the only way
to predict them in the answer is to read them from the prompt.

Opt-in: the shipped recipe's --mix has no `ident`, and adding a kind leaves the other
kinds' draws unchanged (each kind has its own seeded generator in make_prompts).
"""

from __future__ import annotations

import random

from . import pools
from .prompts_requests import camel_case

# the pools: prompt_data/prompts_identifiers.json; P.ENTITIES maps an entity to
# (plural, numeric fields, text fields, date fields)
P = pools.load("prompts_identifiers")


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _entity(r: random.Random):
    name = r.choice(sorted(P.ENTITIES))
    plural, numeric, text, dates = P.ENTITIES[name]
    return name, plural, numeric, text, dates


def function_request(r: random.Random) -> str:
    name, plural, numeric, text, dates = _entity(r)
    num, txt, date = r.choice(numeric), r.choice(text), r.choice(dates)
    lang = r.choice(["Python", "Python", "Python", "JavaScript", "TypeScript"])
    task = r.choice([
        (f"{r.choice(P.VERBS_SUM)}_{num}_by_{txt}", [plural],
         f"takes a list of {plural} (dictionaries with `{num}` and `{txt}` keys) and returns the total `{num}` for each `{txt}`"),
        (f"{r.choice(P.VERBS_FILTER)}_{plural}_before", [plural, "cutoff"],
         f"returns the {plural} whose `{date}` is earlier than `cutoff`, oldest first"),
        (f"top_{plural}_by_{num}", [plural, "n"],
         f"returns the `n` {plural} with the largest `{num}`, ties broken by `{txt}`"),
        (f"validate_{name}", [name],
         f"checks that a {name.replace('_', ' ')} has a non-empty `{txt}` and a non-negative `{num}`, and returns a list of error messages"),
        (f"average_{num}", [plural, txt],
         f"returns the mean `{num}` of the {plural} whose `{txt}` equals the given `{txt}`, or None if there are none"),
    ])
    fname, args, behaviour = task
    extras = ["", " Then show a call with two sample records.", " Handle an empty list."]
    if lang == "Python":
        extras += [" Include a docstring and one example.", " Add type hints."]
    else:
        fname, args = camel_case(fname), [camel_case(a) for a in args]
        behaviour = behaviour.replace("or None", "or null").replace("dictionaries", "objects")
        extras += [" Add a JSDoc comment."] if lang == "JavaScript" else [" Type the record shape."]
    signature = f"{fname}({', '.join(args)})"
    extra = r.choice(extras)
    lead = r.choice(["Write a {lang} function `{sig}` that {b}.", "Implement `{sig}` in {lang}: it {b}."])
    return lead.format(lang=lang, sig=signature, b=behaviour) + extra


def class_request(r: random.Random) -> str:
    name, plural, numeric, text, dates = _entity(r)
    prefix = r.choice(P.ENV_PREFIXES)
    fields = [(r.choice(text), "str", f'"{r.choice(["unknown", "default", "n/a", "main"])}"'),
              (r.choice(numeric), r.choice(["int", "float"]), str(r.choice([0, 1, 10, 100]))),
              ("active", "bool", r.choice(["True", "False"]))]
    described = ", ".join(f"`{f}` ({t}, default {d})" for f, t, d in fields)
    cls = _pascal(name) + r.choice(["Settings", "Record", "Options", "Summary"])
    env = ", ".join(f"{prefix}_{f.upper()}" for f, _, _ in fields)
    method = r.choice([
        f"a classmethod `from_env()` that reads {env} from the environment and converts each to its type",
        "a method `to_row()` that returns the fields as a tuple in the order given",
        "a classmethod `from_dict(data)` that ignores unknown keys and fills in the defaults",
    ])
    return f"Write a Python dataclass `{cls}` with fields {described}, plus {method}."


def sql_request(r: random.Random) -> str:
    name, plural, numeric, text, dates = _entity(r)
    num, txt, date = r.choice(numeric), r.choice(text), r.choice(dates)
    other = r.choice([t for t in text if t != txt] or text)
    table = f"{plural}({', '.join(['id', txt, other, num, date])})"
    ask = r.choice([
        f"the total `{num}` per `{txt}` in {r.randint(2018, 2025)}, largest first",
        f"the {r.randint(3, 10)} rows with the highest `{num}`, with their `{txt}` and `{other}`",
        f"every `{txt}` that appears more than {r.randint(2, 9)} times, with its count",
        f"the average `{num}` per month of `{date}`",
    ])
    return f"I have a table `{table}`. Write a SQL query that returns {ask}."


def shell_request(r: random.Random) -> str:
    name, plural, *_ = _entity(r)
    src = r.choice(["~/", "/srv/", "/var/data/", "./"]) + plural
    dst = r.choice(["./", "/mnt/", "~/"]) + f"{name}_{r.choice(['archive', 'backup', 'export'])}"
    ext = r.choice([".csv", ".json", ".log", ".xml", ".parquet"])
    days = r.choice([2, 5, 10, 30])
    return r.choice([
        f"Write a bash script that moves every `{ext}` file older than {days} days from `{src}` "
        f"into `{dst}`, creating `{dst}` if needed and printing how many files it moved.",
        f"Write a bash script that counts the lines of every `{ext}` file in `{src}` and writes "
        f"the counts, largest first, to `{dst}/{name}_line_counts.txt`.",
        f"Write a bash script that compresses each `{ext}` file in `{src}` with gzip unless "
        f"`{dst}` already holds a compressed copy, then lists what it compressed.",
    ])


def identifier_request(r: random.Random) -> str:
    return r.choice([function_request, function_request, class_request, sql_request, shell_request])(r)
