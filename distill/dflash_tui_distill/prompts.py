"""A broad prompt set made here, from word lists and procedures: no hub data.

Four kinds, matching the workloads the drafter is judged on (sample_prompts/ has prose,
code and math) plus the target's own voice:

    math   procedurally generated arithmetic, algebra, percentages, unit conversions and
           word problems with varied names, objects and numbers
    code   tasks from a list of functions x languages x phrasings, plus small generated
           snippets to explain, fix, test or translate
    prose  topics x templates (explain, compare, list, story, letter, ...)

Half of math, code and prose are multi-constraint requests instead (prompts_requests.py):
named signatures with extras, bugs described by symptom, SQL over given schemas, scripts
with paths, multi-part word problems, emails with details to mention.
    self   seeds asking the target to write a question about a topic; the target's answer
           (generated in the data phase) becomes the prompt, so some prompts are in the
           target's own words
    ident  code requests whose names are drawn per prompt (prompts_identifiers.py; not in
           the default mix, used by stages 2-4 of the sample recipe)
    literal  requests quoting paths, patterns, messages, URLs and flags the answer must
           repeat (prompts_literals.py; opt-in, 8% of stage 4 of the sample recipe)
    asked  user turns the target samples from its own chat template, steered to general,
           math or code by a system message (prompts_asked.py; the data phase samples them;
           stages 9 and 10 of the sample recipe)

Every generator is deterministic given its random.Random; duplicates are dropped by the
caller.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from . import pools
from . import prompts_asked as asked
from . import prompts_identifiers as identifiers
from . import prompts_literals as literals
from . import prompts_requests as requests

P = pools.load("prompts")  # the pools: prompt_data/prompts.json

# Share of math, code and prose drawn as a multi-constraint request (prompts_requests.py)
# instead of a one-line template: the first drafter, trained on templates only, accepted half as much on
# sample_prompts/ (multi-constraint requests) as on held-out template prompts.
REQUEST_SHARE = 0.5


@dataclass(frozen=True)
class Prompt:
    kind: str  # a key of MAKERS
    text: str


def _arithmetic(r: random.Random) -> str:
    op = r.choice(["+", "-", "*", "/", "mixed", "mixed", "power", "mod"])
    if op == "+":
        a, b = r.randint(2, 9999), r.randint(2, 9999)
        return r.choice(["What is {a} + {b}?", "Calculate {a} plus {b}.", "Add {a} and {b}."]).format(a=a, b=b)
    if op == "-":
        a, b = r.randint(50, 9999), r.randint(2, 999)
        return r.choice(["What is {a} - {b}?", "Subtract {b} from {a}.", "Compute {a} minus {b}."]).format(a=a, b=b)
    if op == "*":
        a, b = r.randint(2, 999), r.randint(2, 99)
        return r.choice(["What is {a} times {b}?", "Multiply {a} by {b}.", "Compute {a} * {b}."]).format(a=a, b=b)
    if op == "/":
        b = r.randint(2, 50)
        a = b * r.randint(2, 400)
        return r.choice(["What is {a} divided by {b}?", "Compute {a} / {b}.", "Divide {a} by {b}."]).format(a=a, b=b)
    if op == "power":
        a, b = r.randint(2, 15), r.randint(2, 4)
        return f"What is {a} to the power of {b}?"
    if op == "mod":
        a, b = r.randint(20, 999), r.randint(3, 19)
        return f"What is the remainder when {a} is divided by {b}?"
    a, b, c = r.randint(2, 99), r.randint(2, 99), r.randint(2, 20)
    expr = r.choice([f"{a} + {b} * {c}", f"({a} + {b}) * {c}", f"{a} * {c} - {b}", f"{a} - {b} + {c}"])
    return r.choice([f"Evaluate {expr}. Show your steps.", f"What is {expr}?", f"Compute {expr} step by step."])


def _algebra(r: random.Random) -> str:
    a, x, b = r.randint(2, 12), r.randint(-20, 30), r.randint(1, 50)
    c = a * x + b
    kind = r.randint(0, 4)
    if kind == 0:
        return f"Solve for x: {a}x + {b} = {c}."
    if kind == 1:
        return f"If {a} times a number plus {b} equals {c}, what is the number?"
    if kind == 2:
        w, h = r.randint(2, 40), r.randint(2, 40)
        return f"A rectangle is {w} cm wide and {h} cm long. What are its area and perimeter?"
    if kind == 3:
        n = r.randint(3, 8)
        start, step = r.randint(1, 20), r.randint(2, 9)
        seq = ", ".join(str(start + step * i) for i in range(n))
        return f"What is the next number in the sequence {seq}?"
    p, q = r.randint(1, 9), r.randint(2, 12)
    s, t = r.randint(1, 9), r.randint(2, 12)
    return f"What is {p}/{q} + {s}/{t}? Give the answer as a simplified fraction."


def _percent_units(r: random.Random) -> str:
    kind = r.randint(0, 3)
    if kind == 0:
        p, n = r.choice([5, 10, 12, 15, 20, 25, 30, 40, 50, 75]), r.randint(20, 2000)
        return f"What is {p}% of {n}?"
    if kind == 1:
        price, off = r.randint(10, 500), r.choice([10, 15, 20, 25, 30, 40, 50])
        item = r.choice(P.ITEMS_PRICED)
        return f"A {item} costs ${price}. It is on sale for {off}% off. What is the sale price?"
    if kind == 2:
        big, small, factor = r.choice(P.UNITS)
        n = r.randint(2, 90)
        return f"How many {small} are in {n} {big}?"
    speed, hours = r.randint(20, 120), r.randint(2, 9)
    return f"A car travels at {speed} km per hour for {hours} hours. How far does it go?"


def _word_problem(r: random.Random) -> str:
    n1, n2 = r.sample(P.NAMES, 2)
    obj, objs = r.choice(P.OBJECTS)
    a, b = r.randint(3, 60), r.randint(2, 12)
    template = r.choice(P.WORD_PROBLEMS)
    text = template.format(
        n1=n1, n2=n2, obj=obj, objs=objs, a=a, b=b, c=r.randint(a * b + 1, a * b + 100),
        ab=a * b, ac=a * r.randint(2, 5), ab2=2 * b + a, item=r.choice(P.ITEMS_PRICED),
        h=r.randint(5, 14),
    )
    return text


def _calculus(r: random.Random) -> str:
    a, b = r.randint(2, 6), r.randint(2, 9)
    f = r.choice(P.FUNCTIONS).format(a=a, b=b)
    g = r.choice(P.FUNCTIONS).format(a=r.randint(2, 5), b=r.randint(2, 9))
    kind = r.randint(0, 4)
    if kind == 0:
        return f"Find the derivative of f(x) = {f} * {g}."
    if kind == 1:
        return f"Differentiate f(x) = {f} + {r.randint(2, 9)}*{g} and evaluate it at x = {r.randint(0, 3)}."
    if kind == 2:
        return f"Compute the integral of {a}x^{b} from 0 to {r.randint(1, 5)}."
    if kind == 3:
        return f"Use the chain rule to differentiate ({a}x + {b})^{r.randint(2, 6)}."
    return f"Find the minimum of f(x) = x^2 - {2 * a}x + {b}."


def _probability(r: random.Random) -> str:
    kind = r.randint(0, 4)
    if kind == 0:
        n, k = r.randint(3, 8), r.randint(1, 3)
        return f"If I flip a fair coin {n} times, what is the probability of getting exactly {k} heads?"
    if kind == 1:
        s = r.randint(3, 11)
        return f"Two fair dice are rolled. What is the probability that the sum is {s}?"
    if kind == 2:
        red, blue = r.randint(2, 9), r.randint(2, 9)
        return (f"A bag has {red} red and {blue} blue marbles. Two are drawn without replacement. "
                "What is the probability that both are red?")
    if kind == 3:
        n = r.randint(4, 9)
        return f"In how many ways can {n} people stand in a line? And how many ways to choose 3 of them?"
    return f"A card is drawn from a standard deck. What is the probability that it is a {r.choice(['heart', 'king', 'red card', 'face card', 'number below 5'])}?"


def _equations(r: random.Random) -> str:
    p, q = r.randint(-9, 9), r.randint(-9, 9)
    a = r.randint(1, 4)
    b, c = -a * (p + q), a * p * q
    kind = r.randint(0, 3)
    if kind == 0:
        return f"Solve the quadratic equation {a}x^2 + {b}x + {c} = 0."
    if kind == 1:
        x, y = r.randint(-5, 9), r.randint(-5, 9)
        a1, b1, a2, b2 = r.randint(1, 5), r.randint(1, 5), r.randint(1, 5), -r.randint(1, 5)
        return (f"Solve the system of equations: {a1}x + {b1}y = {a1 * x + b1 * y} and "
                f"{a2}x {b2:+d}y = {a2 * x + b2 * y}.")
    if kind == 2:
        first, step, n = r.randint(1, 20), r.randint(2, 9), r.randint(10, 100)
        return f"What is the sum of the first {n} terms of the arithmetic sequence that starts {first}, {first + step}, {first + 2 * step}, ...?"
    ratio, first, n = r.randint(2, 4), r.randint(1, 5), r.randint(4, 10)
    return f"Find the sum of the first {n} terms of the geometric series {first} + {first * ratio} + {first * ratio ** 2} + ..."


def _money(r: random.Random) -> str:
    kind = r.randint(0, 3)
    principal, rate, years = r.randint(5, 200) * 100, r.choice([2, 3, 4, 5, 6, 8]), r.randint(2, 10)
    if kind == 0:
        return f"If you invest ${principal} at {rate}% interest compounded yearly, how much do you have after {years} years?"
    if kind == 1:
        price, off, tax = r.randint(20, 400), r.choice([10, 15, 20, 30]), r.choice([5, 7, 8, 10])
        return f"A {r.choice(P.ITEMS_PRICED)} costs ${price}. It is {off}% off, and then {tax}% tax is added. What do you pay?"
    if kind == 2:
        d, v1, v2 = r.randint(100, 600), r.randint(40, 90), r.randint(40, 90)
        return (f"Two cyclists start {d} km apart and ride towards each other at {v1} km/h and {v2} km/h. "
                "When do they meet?")
    hours, rate = r.randint(10, 45), r.randint(12, 40)
    return f"Someone earns ${rate} per hour and works {hours} hours a week. How much do they earn in a year of 50 working weeks?"


def math_prompt(r: random.Random) -> Prompt:
    if r.random() < REQUEST_SHARE:
        return Prompt("math", requests.math_request(r))
    maker = r.choice([_arithmetic, _algebra, _percent_units, _word_problem, _word_problem,
                      _calculus, _probability, _equations, _money])
    text = maker(r)
    if r.random() < 0.5 and not text.endswith(("step.", "steps.", "work.", "reasoning.")):
        text += r.choice(P.WORKING)
    return Prompt("math", text)


def _named_task(r: random.Random) -> str:
    """P.NAMED_TASKS has a named signature: answers that must copy identifiers from the
    prompt are a large share of real code requests (and of what a drafter gets cheaply)."""
    signature, task = r.choice(P.NAMED_TASKS)
    lang = r.choice(["Python", "Python", "Python", "JavaScript", "TypeScript"])
    lead = r.choice([
        "Write a {lang} function `{sig}` that {task}.",
        "Implement `{sig}` in {lang}: it {task}.",
        "I need a {lang} function called `{sig}`. It {task}.",
        "Please write `{sig}` in {lang}, which {task}.",
    ])
    return lead.format(lang=lang, sig=signature, task=task) + r.choice(P.NAMED_EXTRAS)


def _snippet(r: random.Random) -> str:
    """A small, valid Python function built from pieces."""
    name, var = r.choice(P.FUNC_NAMES), r.choice(P.VAR_NAMES)
    k = r.randint(2, 9)
    body = r.choice([
        ["    result = []", f"    for x in {var}:", f"        if x % {k} == 0:",
         "            result.append(x * x)", "    return result"],
        ["    total = 0", f"    for i, x in enumerate({var}):", "        total += x * i",
         f"    return total / max(len({var}), 1)"],
        ["    seen = set()", "    out = []", f"    for x in {var}:", "        if x not in seen:",
         "            seen.add(x)", "            out.append(x)", f"    return out[:{k}]"],
        ["    counts = {}", f"    for x in {var}:", "        counts[x] = counts.get(x, 0) + 1",
         "    return max(counts, key=counts.get)"],
        [f"    if not {var}:", "        return None", f"    best = {var}[0]",
         f"    for x in {var}[1:]:", "        if x > best:", "            best = x",
         f"    return best + {k}"],
        [f"    return sorted({var}, key=lambda x: (x % {k}, -x))"],
        [f"    left, right = 0, len({var}) - 1", "    while left < right:",
         f"        {var}[left], {var}[right] = {var}[right], {var}[left]",
         "        left += 1", "        right -= 1", f"    return {var}"],
    ])
    return "\n".join([f"def {name}({var}):", *body])


def _buggy_snippet(r: random.Random) -> str:
    """A small Python function with one planted bug."""
    var, k = r.choice(P.VAR_NAMES), r.randint(2, 9)
    return r.choice([
        f"def last_items({var}, n):\n    return {var}[len({var}) - n - 1:]",
        f"def average({var}):\n    total = 0\n    for x in {var}:\n        total += x\n    return total / len({var}) - 1",
        "def count_up_to(n):\n    result = []\n    for i in range(1, n):\n        result.append(i)\n    return result",
        f"def find_index({var}, target):\n    for i in range(len({var}) + 1):\n        if {var}[i] == target:\n            return i\n    return -1",
        "def is_even(n):\n    return n % 2 == 1",
        f"def multiples(n):\n    return [i * {k} for i in range(n) if i % {k} == 0]",
    ])


def code_prompt(r: random.Random) -> Prompt:
    if r.random() < REQUEST_SHARE:
        return Prompt("code", requests.code_request(r))
    roll = r.random()
    if roll < 0.15:
        kind = r.randint(0, 2)
        if kind == 0:
            return Prompt("code", f"Write a bash script that {r.choice(P.SHELL_TASKS)}.")
        if kind == 1:
            return Prompt("code", f"Write a JavaScript function that {r.choice(P.JS_TASKS)}. Explain how it works.")
        return Prompt("code", f"Write a Python dataclass that {r.choice(P.CONFIG_TASKS)}.")
    if roll < 0.25:
        code = _buggy_snippet(r)
        ask = r.choice(["This function has a bug. Find it and fix it:",
                        "Why does this function give the wrong result? Fix it:",
                        "Find the off-by-one or logic error in this code and correct it:"])
        return Prompt("code", f"{ask}\n\n```python\n{code}\n```")
    if roll < 0.45:
        return Prompt("code", _named_task(r))
    if roll < 0.75:
        lang = r.choice(P.LANGUAGES)
        if lang == "SQL":
            task = r.choice(P.SQL_TASKS).format(city=r.choice(P.CITIES), year=r.randint(2005, 2023))
            return Prompt("code", f"Write an SQL query to {task}.")
        return Prompt("code", r.choice(P.CODE_TEMPLATES).format(lang=lang, task=r.choice(P.CODE_TASKS)))
    code = _snippet(r)
    ask = r.choice([
        "Explain what this Python function does:",
        "What does this code return for the input [3, 6, 9, 12, 5]?",
        "Add type hints and a docstring to this function:",
        "Rewrite this Python function in {lang}:".format(lang=r.choice(["JavaScript", "C++", "Rust", "Go", "Java"])),
        "Write unit tests for this function:",
        "Can this function be simplified? Show a shorter version:",
        "Find any bugs or edge cases in this function:",
    ])
    return Prompt("code", f"{ask}\n\n```python\n{code}\n```")


def prose_prompt(r: random.Random) -> Prompt:
    if r.random() < REQUEST_SHARE:
        return Prompt("prose", requests.prose_request(r, P.TOPICS))
    topic, other = r.sample(P.TOPICS, 2)
    return Prompt("prose", r.choice(P.PROSE_TEMPLATES).format(topic=topic, other=other))


def self_seed(r: random.Random) -> Prompt:
    """A seed for the target to write a prompt from; the prompt is its greedy answer."""
    return Prompt("self", r.choice(P.SELF_SEEDS).format(topic=r.choice(P.TOPICS), who=r.choice(P.WHO)))


def clean_self_prompt(text: str) -> str | None:
    """The first line of what the target wrote for a self seed, or None if unusable."""
    line = ""
    for candidate in text.strip().splitlines():
        if candidate.strip():
            line = candidate.strip()
            break
    line = line.strip().strip('"').strip("*").strip()
    for prefix in ("Question:", "Request:", "Instruction:", "Q:"):
        if line.lower().startswith(prefix.lower()):
            line = line[len(prefix):].strip()
    if len(line) < 12 or len(line) > 400:
        return None
    return line


def ident_prompt(r: random.Random) -> Prompt:
    return Prompt("ident", identifiers.identifier_request(r))


def literal_prompt(r: random.Random) -> Prompt:
    return Prompt("literal", literals.literal_request(r))


def asked_seed(r: random.Random) -> Prompt:
    """A steer for the target to sample a user turn under; the data phase does the rest."""
    return Prompt("asked", asked.seed_text(r))


MAKERS = {"math": math_prompt, "code": code_prompt, "prose": prose_prompt, "self": self_seed,
          "ident": ident_prompt, "literal": literal_prompt, "asked": asked_seed}


def make_prompts(counts: dict[str, int], seed: int, reject=lambda text: False) -> list[Prompt]:
    """`counts[kind]` distinct prompts of each kind (fewer if the generator runs dry).

    `reject(text)` drops a prompt (the held-out check); the generator keeps drawing.
    """
    out: list[Prompt] = []
    for kind in sorted(counts):
        r = random.Random(f"{seed}:{kind}")
        seen: set[str] = set()
        misses = 0  # consecutive draws that gave nothing new: the generator has run dry
        while len(seen) < counts[kind] and misses < 2000:
            prompt = MAKERS[kind](r)
            if prompt.text in seen or reject(prompt.text):
                misses += 1
                continue
            misses = 0
            seen.add(prompt.text)
            out.append(prompt)
    return out


def split_counts(total: int, mix: dict[str, float]) -> dict[str, int]:
    """Integer counts per kind that add up to `total` (largest remainders)."""
    raw = {k: total * w for k, w in mix.items() if w > 0}
    counts = {k: int(v) for k, v in raw.items()}
    left = total - sum(counts.values())
    for k in sorted(raw, key=lambda k: raw[k] - counts[k], reverse=True)[:left]:
        counts[k] += 1
    return counts
