"""Multi-constraint requests: prompts shaped like what people actually send an assistant.

The one-line templates in prompts.py ("Write a Python function that reverses a string.")
draw answers the drafter learns by heart; real requests name identifiers, fix a format,
give details to weave in and add a follow-up ask, and the target's answers to them are
longer and less formulaic. These generators compose such requests from independent pools
(a task x a signature x two or three extras; a scenario x numbers x asks), so nearly every
prompt is new. None is a copy of a held-out prompt: `make_prompts` refuses clashes anyway.

The shipped sample drafter was trained on exactly these pools and draws (with prompts.py,
seed 0): editing them changes what scripts/train_sample_drafter.sh reproduces, so a new
pool belongs behind a new generator that a new recipe opts into.
"""

from __future__ import annotations

import random

from . import pools

# the pools: prompt_data/prompts_requests.json. P.SIGNATURES: (signature, what it does),
# Python-style names (JS/TS get the camelCase form); P.BUGGY: (description of intent,
# symptom, code with one bug); P.SQL_SCHEMAS: (table, columns) pairs that go together, with
# questions over them.
P = pools.load("prompts_requests")

# ---- code ------------------------------------------------------------------------------


def camel_case(name: str) -> str:
    """snake_case -> camelCase (JavaScript and TypeScript spellings of a Python name)."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def signature_request(r: random.Random) -> str:
    signature, task = r.choice(P.SIGNATURES)
    lang = r.choice(P.LANGS_FOR_SIGNATURES)
    if lang != "Python":
        fname, args = signature.split("(", 1)
        signature = f"{camel_case(fname)}({', '.join(camel_case(a.strip()) for a in args[:-1].split(',') if a.strip())})"
    lead = r.choice([
        "Write a {lang} function `{sig}` that {task}.",
        "I need `{sig}` in {lang}: it {task}.",
        "Can you implement `{sig}` in {lang}? It {task}.",
        "Please write a {lang} function called `{sig}`, which {task}.",
        "Implement `{sig}` in {lang} so that it {task}.",
    ])
    extras = r.sample(P.CODE_EXTRAS, r.randint(1, 2))
    return " ".join([lead.format(lang=lang, sig=signature, task=task), *extras])


def debug_request(r: random.Random) -> str:
    intent, symptom, code = r.choice(P.BUGGY)
    lead = r.choice([
        "This function should {intent}, but {symptom}.",
        "My function is meant to {intent}. The problem: {symptom}.",
        "I wrote this to {intent}, but {symptom}.",
    ]).format(intent=intent, symptom=symptom)
    return f"{lead} {r.choice(P.DEBUG_ASKS)}\n\n```python\n{code}\n```"


def sql_request(r: random.Random) -> str:
    t1, t2, questions = r.choice(P.SQL_SCHEMAS)
    question = r.choice(questions).format(n=r.randint(3, 10), year=r.randint(2015, 2025),
                                          low=r.choice([40, 50, 60, 100, 250]))
    lead = r.choice([
        "I have two tables, `{t1}` and `{t2}`. Write a SQL query that returns {q}.",
        "Given the tables `{t1}` and `{t2}`, write an SQL query for {q}.",
        "Our database has `{t1}` and `{t2}`. I need a query that lists {q}.",
    ])
    tail = r.choice(["", " Explain each clause briefly.", " Use a CTE if it helps readability.",
                     " Mention which index would make it fast.", " Show the expected columns of the result."])
    return lead.format(t1=t1, t2=t2, q=question) + tail


def js_request(r: random.Random) -> str:
    signature, behaviour, use = r.choice(P.JS_UTILITIES)
    lang = r.choice(["JavaScript", "JavaScript", "TypeScript"])
    lead = r.choice([
        "Implement a `{sig}` function in {lang} that {b}.",
        "Write `{sig}` in {lang}: it {b}.",
    ]).format(sig=signature, lang=lang, b=behaviour)
    middle = r.choice(["", " It should keep `this` and pass all arguments through.",
                       " Do not use any libraries.", " Add JSDoc comments.",
                       " Handle errors sensibly."])
    return lead + middle + r.choice([f" Then show how to use it for {use}.",
                                     f" Then give an example with {use}.", ""])


def shell_request(r: random.Random) -> str:
    job, extra = r.choice(P.SHELL_JOBS)
    fill = dict(ext=r.choice([".log", ".csv", ".png", ".txt", ".py", ".mp4", ".pdf"]),
                src=r.choice(["~/Downloads", "~/projects", "/var/log/app", "./data", "~/Documents"]),
                dst=r.choice(["./archive", "/mnt/backup", "~/old", "./out"]),
                size=r.choice([10, 50, 100, 500]), days=r.choice([3, 14, 30, 90]), n=r.randint(3, 10))
    lead = r.choice(["Write a bash script that {job}. It should also {extra}.",
                     "I need a shell script that {job}; make sure it will {extra}.",
                     "Write a Bash script which {job}. It should {extra}."])
    tail = r.choice(["", " Add comments to each step.", " Make it safe for file names with spaces.",
                     " Explain how to run it from cron every night."])
    return lead.format(job=job.format(**fill), extra=extra.format(**fill)) + tail


def class_request(r: random.Random) -> str:
    name, fields, extra = r.choice(P.CLASSES)
    parts = []
    for field, typ, default in fields:
        parts.append(f"{field} ({typ}, default {default})" if default is not None else f"{field} ({typ})")
    field_text = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    kind = r.choice(["dataclass", "class", "dataclass"])
    lead = f"Write a Python {kind} `{name}` with fields {field_text}, plus {extra}."
    return lead + r.choice(["", " Show a short example of using it.", " Add type hints throughout.",
                            " Include a docstring for each method."])


def code_request(r: random.Random) -> str:
    return r.choice([signature_request, signature_request, signature_request, debug_request,
                     sql_request, js_request, shell_request, class_request])(r)


# ---- math ------------------------------------------------------------------------------


def _motion(r: random.Random) -> str:
    a, b = r.sample(P.PEOPLE, 2)
    v1, v2 = r.randint(3, 20) * 5, r.randint(3, 20) * 5
    d = (v1 + v2) * r.randint(1, 6)
    kind = r.randint(0, 2)
    if kind == 0:
        return (f"{a} and {b} live {d} km apart and drive towards each other, {a} at {v1} km/h and "
                f"{b} at {v2} km/h, both leaving at 9:00. At what time do they meet, and how far has "
                f"{a} driven by then?")
    if kind == 1:
        head = r.randint(1, 3)
        fast = max(v1, v2) + 10
        slow = min(v1, v2)
        return (f"A cyclist leaves a town at {slow} km/h. {head} hour(s) later a car follows on the same "
                f"road at {fast} km/h. How long does the car take to catch up, and how far from the town?")
    return (f"{a} drives to a city {d} km away at {v1} km/h and comes back at {v2} km/h. What is the "
            "average speed for the whole trip, and why is it not simply the mean of the two speeds?")


def _rates(r: random.Random) -> str:
    h1, h2 = r.choice([(2, 3), (3, 6), (4, 12), (5, 20), (6, 3), (10, 15)])
    kind = r.randint(0, 2)
    if kind == 0:
        return (f"One pipe fills a tank in {h1} hours and another fills it in {h2} hours. How long do "
                "they take together? What fraction of the tank does each pipe fill?")
    if kind == 1:
        a, b = r.sample(P.PEOPLE, 2)
        return (f"{a} can paint a fence in {h1} hours and {b} in {h2} hours. If they work together "
                f"for one hour and then {a} leaves, how much longer does {b} need to finish?")
    litres, pct, target = r.randint(2, 20), r.choice([10, 20, 25, 40]), r.choice([5, 8, 15])
    return (f"A {litres}-litre solution is {pct}% salt. How much pure water must be added to bring it "
            f"down to {target}% salt?")


def _percent_chain(r: random.Random) -> str:
    price = r.randint(4, 60) * 5
    item = r.choice(["laptop bag", "pair of boots", "bicycle helmet", "desk lamp", "rain coat",
                     "board game", "backpack", "blender"])
    off, tax, tip = r.choice([10, 15, 20, 30, 40]), r.choice([5, 6, 7, 9, 12]), r.choice([10, 15, 18, 20])
    kind = r.randint(0, 3)
    if kind == 0:
        return (f"A {item} is priced at ${price}. The shop takes {off}% off, and a coupon then takes a "
                f"further ${r.randint(2, 10)} off. What does it cost, and what percentage of the original "
                "price is that?")
    if kind == 1:
        return (f"A restaurant bill is ${price}. A {tax}% tax is added, then a {tip}% tip on the total "
                "with tax. How much is paid in all, and how much of that is the tip?")
    if kind == 2:
        up, down = r.choice([10, 20, 25, 50]), r.choice([10, 20, 25, 50])
        return (f"A share price rises by {up}% one year and falls by {down}% the next. Is it higher or "
                f"lower than at the start, and by what percentage? Use a starting price of ${price}.")
    return (f"A {item} costs ${price} after a {off}% discount. What was the price before the discount? "
            "Explain why you cannot just add the percentage back.")


def _equation_check(r: random.Random) -> str:
    p, q = r.randint(-6, 9), r.randint(-6, 9)
    a = r.choice([1, 1, 2, 3])
    b, c = -a * (p + q), a * p * q
    sign_b = f"- {abs(b)}x" if b < 0 else f"+ {b}x"
    sign_c = f"- {abs(c)}" if c < 0 else f"+ {c}"
    lead_a = "" if a == 1 else str(a)
    eq = f"{lead_a}x^2 {sign_b} {sign_c} = 0"
    method = r.choice(["by factoring", "with the quadratic formula", "by completing the square"])
    return r.choice([
        f"Solve {eq} {method}, then verify each root by substituting it back.",
        f"Use {method[3:] if method.startswith('by ') else method[5:]} to solve {eq}. Check your answers.",
        f"Find all real solutions of {eq}. Show the steps and say how many solutions there are and why.",
    ])


def _calculus_eval(r: random.Random) -> str:
    pairs = [("x^2 * cos(x)", "product"), ("e^x * x^3", "product"), ("ln(x) * x^2", "product"),
             ("sin(x) / x", "quotient"), ("(x^2 + 1) / (x - 1)", "quotient"),
             ("sin(3x^2)", "chain"), ("sqrt(1 + x^2)", "chain"), ("e^(2x) * sin(x)", "product"),
             ("(2x + 1)^5", "chain"), ("x * ln(x)", "product")]
    f, rule = r.choice(pairs)
    points = r.sample(["0", "1", "2", "pi", "pi/2", "-1"], 2)
    return r.choice([
        f"Differentiate f(x) = {f} using the {rule} rule, then evaluate f'({points[0]}) and f'({points[1]}).",
        f"Find f'(x) for f(x) = {f}. Which rule do you need and why? Then compute f'({points[0]}).",
        f"Using the {rule} rule, find the derivative of {f} and simplify it. Show the steps.",
    ])


def _probability_list(r: random.Random) -> str:
    kind = r.randint(0, 3)
    if kind == 0:
        k = r.randint(3, 11)
        what = r.choice([f"exactly {k}", f"at most {k}", f"a multiple of {r.choice([3, 4, 5])}", "a prime number"])
        return (f"Two fair dice are thrown. What is the probability that the total is {what}? List the "
                "outcomes that count and simplify the fraction.")
    if kind == 1:
        n = r.randint(3, 5)
        return (f"A fair coin is tossed {n} times. What is the probability of at least two heads in a row? "
                "List the sequences that work and give the answer as a fraction.")
    if kind == 2:
        red, green, blue = r.randint(2, 7), r.randint(2, 7), r.randint(2, 7)
        return (f"A box holds {red} red, {green} green and {blue} blue pens. Two are taken at random without "
                "replacement. What is the probability they are the same colour? Show the cases.")
    n = r.choice([6, 8, 10, 12])
    return (f"A spinner has {n} equal sections numbered 1 to {n}. It is spun twice. What is the probability "
            "that the second number is larger than the first? Explain how you counted.")


def _series_explain(r: random.Random) -> str:
    step = r.choice([3, 4, 5, 7, 9, 11])
    top = step * r.randint(20, 120)
    start = r.choice([1, step])
    return r.choice([
        f"What is the sum of all multiples of {step} between 1 and {top}? Use the formula for an arithmetic "
        "series and explain where the formula comes from.",
        f"Add up the odd numbers from 1 to {2 * r.randint(20, 150) - 1}. Then explain why the sum of the "
        "first n odd numbers is always a square.",
        f"An arithmetic sequence starts at {start} and goes up by {step}. What is its 50th term and the sum "
        "of its first 50 terms? Show both formulas.",
        f"How many terms does the sequence {start}, {start + step}, {start + 2 * step}, ..., {start + 40 * step} "
        "have, and what is their sum?",
    ])


def _geometry(r: random.Random) -> str:
    a, b = r.randint(3, 20), r.randint(3, 20)
    kind = r.randint(0, 3)
    if kind == 0:
        return (f"A right triangle has legs of {a} cm and {b} cm. Find its hypotenuse, its area and its "
                "perimeter, rounding to one decimal place where needed.")
    if kind == 1:
        return (f"A circular garden has a radius of {a} m. A path {r.randint(1, 3)} m wide runs around it. "
                "What is the area of the path? Use pi = 3.14 and show the steps.")
    if kind == 2:
        return (f"A box is {a} cm long, {b} cm wide and {r.randint(2, 15)} cm high. What are its volume and "
                "surface area, and how many 1 cm cubes fit inside?")
    return (f"A rectangular room is {a} m by {b} m. Carpet costs ${r.randint(8, 40)} per square metre and "
            "skirting board costs $5 per metre. What is the total cost to do both?")


def _statistics(r: random.Random) -> str:
    values = sorted(r.randint(1, 60) for _ in range(r.randint(6, 11)))
    r.shuffle(values)
    listed = ", ".join(map(str, values))
    return r.choice([
        f"Find the mean, median and mode of {listed}. Which one best describes the data and why?",
        f"For the data set {listed}, compute the range and the mean, then say how the mean changes if the "
        "largest value is removed.",
        f"The test scores of a small class were {listed}. What is the median score, and how many students "
        "scored above the mean?",
    ])


def math_request(r: random.Random) -> str:
    text = r.choice([_motion, _rates, _percent_chain, _equation_check, _calculus_eval,
                     _probability_list, _series_explain, _geometry, _statistics])(r)
    if r.random() < 0.5 and not text.rstrip().endswith(("steps.", "step.", "answers.")):
        text += " " + r.choice(P.SHOW)
    return text


# ---- prose -----------------------------------------------------------------------------


def prose_request(r: random.Random, topics: list[str]) -> str:
    kind = r.randint(0, 5)
    if kind == 0:
        who, purpose, details = r.choice(P.OCCASIONS)
        picked = r.sample(details, r.randint(2, 3))
        tone = r.choice(["friendly", "polite but firm", "warm", "short and professional", "cheerful"])
        return (f"Write a {tone} email to {who} to {purpose}. " +
                " ".join(f"{d[0].upper()}{d[1:]}." for d in picked))
    if kind == 1:
        topic = r.choice(topics)
        limit = r.choice(P.WORD_LIMITS)
        constraint = r.choice(["use one everyday comparison", "avoid technical terms",
                               "end with a question to think about", "start with a surprising fact"])
        return f"Explain {topic} to {r.choice(P.AUDIENCES)} in {limit}, and {constraint}."
    if kind == 2:
        premise = r.choice(P.STORY_PREMISES)
        return r.choice([f"Write the opening paragraph of a story about {premise}.",
                         f"Write the first scene of a short story about {premise}. Keep it under 200 words.",
                         f"Write a short story about {premise}, told in the first person."])
    if kind == 3:
        product, features = r.choice(P.PRODUCTS)
        return (f"Write a product description for {product}: {', '.join(features)}. "
                f"{r.choice(['Keep it warm but simple.', 'Make it sound premium.', 'Aim it at gift buyers.', 'Keep it under 80 words.'])}")
    if kind == 4:
        boss = r.choice(["My manager", "Our director", "The head of my department"])
        return (f"{boss} asked me to summarise the pros and cons of {r.choice(P.DECISIONS)}. Write a "
                f"balanced summary of {r.choice(P.WORD_LIMITS)} that I can send, in a neutral tone.")
    topic = r.choice(topics)
    return (f"Write a letter to the editor of a local paper about {topic}. Make {r.choice(['two', 'three'])} "
            f"clear points, keep it {r.choice(['polite', 'passionate but fair', 'short'])}, and end with a call to action.")
