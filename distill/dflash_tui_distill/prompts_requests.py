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

# ---- code ------------------------------------------------------------------------------

# (signature, what it does). Python-style names; JS/TS get the camelCase form.
SIGNATURES = [
    ("interleave(a, b)", "alternates the elements of two lists, appending the rest of the longer one"),
    ("count_words(path)", "returns how many words a text file contains"),
    ("longest_run(values)", "returns the length of the longest run of equal neighbouring values"),
    ("parse_duration(text)", "turns strings like '1h30m' or '45s' into a number of seconds"),
    ("mask_email(address)", "hides all but the first letter of the part before the @"),
    ("nth_prime(n)", "returns the n-th prime number, counting 2 as the first"),
    ("moving_average(values, window)", "returns the averages of every window of consecutive values"),
    ("invert_dict(mapping)", "swaps keys and values, collecting keys that share a value into a list"),
    ("roman_to_int(numeral)", "converts a Roman numeral such as 'MCMXCIV' to an integer"),
    ("int_to_words(n)", "spells out a number below one thousand in English words"),
    ("is_valid_ipv4(address)", "checks whether a string is a valid dotted IPv4 address"),
    ("merge_intervals(intervals)", "merges overlapping (start, end) intervals and returns them sorted"),
    ("split_evenly(total, parts)", "splits an integer amount into parts that differ by at most one"),
    ("caesar(text, shift)", "shifts every letter by shift places in the alphabet, leaving other characters alone"),
    ("most_common(items, k)", "returns the k most frequent items with their counts"),
    ("deep_get(data, path)", "reads a value from nested dictionaries using a dotted path such as 'a.b.c'"),
    ("batch_sum(rows, key)", "adds up the numeric field key over a list of dictionaries"),
    ("normalize_whitespace(text)", "collapses runs of spaces and tabs into one space and trims the ends"),
    ("first_duplicate(values)", "returns the first value that appears a second time, or None"),
    ("binary_search(sorted_values, target)", "returns the index of target in a sorted list, or -1"),
    ("zigzag(matrix)", "returns the elements of a 2D list in zigzag diagonal order"),
    ("percent_change(old, new)", "returns the percentage change from old to new, rounded to one decimal"),
    ("strip_comments(source)", "removes '#' comments from lines of Python source, keeping strings intact"),
    ("weekday_name(date_string)", "returns the weekday of a date given as 'YYYY-MM-DD'"),
    ("compress(text)", "run-length encodes a string, so 'aaabcc' becomes 'a3b1c2'"),
    ("validate_password(password)", "checks length, a digit, an upper-case letter and a symbol, and says which rule failed"),
    ("sum_of_squares(n)", "returns 1^2 + 2^2 + ... + n^2 without a loop"),
    ("histogram(values, bins)", "counts how many values fall into each of bins equal-width ranges"),
    ("camel_to_kebab(name)", "converts camelCase names to kebab-case"),
    ("unique_paths(rows, cols)", "counts the paths from the top-left to the bottom-right of a grid moving only right or down"),
    ("transpose(matrix)", "returns the transpose of a rectangular list of lists"),
    ("word_frequencies(text, stop_words)", "counts words case-insensitively, skipping the stop words"),
    ("next_business_day(day)", "returns the next date that is not a Saturday or Sunday"),
    ("partition(values, predicate)", "splits a list into the items that pass a test and those that fail it"),
    ("hex_to_rgb(color)", "converts a colour like '#1a2b3c' to a tuple of three integers"),
    ("window_max(values, k)", "returns the maximum of every window of k consecutive values"),
    ("anagram_groups(words)", "groups words that are anagrams of each other"),
    ("digits_sum(n)", "adds the digits of a non-negative integer until one digit is left"),
    ("balance_after(transactions)", "applies a list of ('deposit' | 'withdraw', amount) pairs to a zero balance, refusing overdrafts"),
    ("pad_table(rows)", "formats a list of rows as a text table with aligned columns"),
]
LANGS_FOR_SIGNATURES = ["Python", "Python", "Python", "Python", "JavaScript", "TypeScript", "Go", "Rust"]
CODE_EXTRAS = [
    "Include a docstring and a couple of doctest examples.",
    "Add type hints and a docstring.",
    "Handle the empty input without raising an error.",
    "Explain the time complexity in one sentence.",
    "Then write three unit tests for it, including an edge case.",
    "Keep it under fifteen lines.",
    "Do not use any imports.",
    "Raise a ValueError with a clear message on invalid input.",
    "Then show an example call and its output.",
    "Add a short comment explaining the trickiest line.",
    "Explain why you chose this approach over a simpler one.",
    "Make it work for very large inputs too.",
]


def camel_case(name: str) -> str:
    """snake_case -> camelCase (JavaScript and TypeScript spellings of a Python name)."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def signature_request(r: random.Random) -> str:
    signature, task = r.choice(SIGNATURES)
    lang = r.choice(LANGS_FOR_SIGNATURES)
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
    extras = r.sample(CODE_EXTRAS, r.randint(1, 2))
    return " ".join([lead.format(lang=lang, sig=signature, task=task), *extras])


# (description of intent, symptom, code with one bug)
BUGGY = [
    ("return the largest value in a list", "it returns the wrong answer when every value is negative",
     "def largest(values):\n    best = 0\n    for v in values:\n        if v > best:\n            best = v\n    return best"),
    ("count how many words start with a capital letter", "it always returns one less than expected",
     "def count_capitalised(text):\n    count = 0\n    words = text.split()\n    for i in range(1, len(words)):\n        if words[i][0].isupper():\n            count += 1\n    return count"),
    ("return the average of the numbers in a list", "it crashes on an empty list",
     "def mean(numbers):\n    return sum(numbers) / len(numbers)"),
    ("reverse the words in a sentence", "the words come back unchanged",
     "def reverse_words(sentence):\n    words = sentence.split()\n    words.reversed()\n    return ' '.join(words)"),
    ("check whether a year is a leap year", "it says 1900 was a leap year",
     "def is_leap(year):\n    return year % 4 == 0"),
    ("add an item to a list and return the list", "items from earlier calls keep showing up",
     "def add_item(item, items=[]):\n    items.append(item)\n    return items"),
    ("return the first n Fibonacci numbers", "it returns one number too many",
     "def fib(n):\n    out = [0, 1]\n    while len(out) <= n:\n        out.append(out[-1] + out[-2])\n    return out"),
    ("find the position of a value in a sorted list", "it loops forever on some inputs",
     "def search(values, target):\n    lo, hi = 0, len(values) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n        if values[mid] < target:\n            lo = mid\n        elif values[mid] > target:\n            hi = mid - 1\n        else:\n            return mid\n    return -1"),
    ("remove the even numbers from a list in place", "some even numbers survive",
     "def drop_evens(values):\n    for v in values:\n        if v % 2 == 0:\n            values.remove(v)\n    return values"),
    ("convert a temperature from Fahrenheit to Celsius", "32 degrees comes out as a large negative number",
     "def to_celsius(f):\n    return f - 32 * 5 / 9"),
    ("sum the numbers from 1 to n", "the total is short by n",
     "def total(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s"),
    ("return a copy of a dictionary with one key changed", "the original dictionary changes too",
     "def with_key(d, key, value):\n    new = d\n    new[key] = value\n    return new"),
    ("return the initials of a full name", "it crashes when the name has two spaces in a row",
     "def initials(name):\n    return ''.join(part[0].upper() for part in name.split(' '))"),
    ("capitalise the first letter of each word", "only the first word is capitalised",
     "def title(text):\n    return text.capitalize()"),
]
DEBUG_ASKS = [
    "Find the bug and show the corrected code.",
    "Explain what is wrong and give a fixed version.",
    "What causes this, and how would you fix it? Show the corrected function.",
    "Fix it and add a test that would have caught the bug.",
]


def debug_request(r: random.Random) -> str:
    intent, symptom, code = r.choice(BUGGY)
    lead = r.choice([
        "This function should {intent}, but {symptom}.",
        "My function is meant to {intent}. The problem: {symptom}.",
        "I wrote this to {intent}, but {symptom}.",
    ]).format(intent=intent, symptom=symptom)
    return f"{lead} {r.choice(DEBUG_ASKS)}\n\n```python\n{code}\n```"


# (table, columns) pairs that go together, with a question over them.
SQL_SCHEMAS = [
    ("employees(id, name, department_id, salary, hired_on)", "departments(id, name, city)",
     ["the average salary per department name, highest first",
      "the {n} best-paid employees hired after {year}, with their department name",
      "every department with more than {n} employees, and how many it has",
      "employees who earn more than the average salary of their own department"]),
    ("students(id, name, year)", "grades(student_id, course, score, term)",
     ["each student's average score in {year}, best first",
      "the {n} students with the highest average score, with their names",
      "courses where nobody scored below {low}",
      "students who have no grades at all"]),
    ("books(id, title, author, published)", "loans(id, book_id, member_id, borrowed_on, returned_on)",
     ["the {n} most borrowed books in {year}, with their authors",
      "books that are currently on loan and were borrowed more than 30 days ago",
      "authors whose books were borrowed more than {n} times in total",
      "books that have never been borrowed"]),
    ("products(id, name, category, price)", "sales(id, product_id, quantity, sold_at)",
     ["total revenue per category in {year}, highest first",
      "the {n} products with the most units sold, with their category",
      "categories whose average price is above {low} dollars",
      "products that sold nothing in the last 30 days"]),
    ("flights(id, origin, destination, departs_at, seats)", "bookings(id, flight_id, passenger, price)",
     ["the {n} busiest routes by number of bookings",
      "flights that are more than 90% full, with their route",
      "the average ticket price per destination in {year}",
      "passengers who booked more than {n} flights"]),
    ("patients(id, name, born_on)", "visits(id, patient_id, doctor, visited_on, cost)",
     ["the total cost of visits per doctor in {year}",
      "patients with more than {n} visits, most visits first",
      "each patient's most recent visit",
      "doctors whose average visit cost is above {low}"]),
]


def sql_request(r: random.Random) -> str:
    t1, t2, questions = r.choice(SQL_SCHEMAS)
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


JS_UTILITIES = [
    ("throttle(fn, interval)", "calls fn at most once every interval milliseconds",
     "scroll events on a long page"),
    ("once(fn)", "runs fn only the first time and returns the same result afterwards",
     "initialising an analytics library"),
    ("memoize(fn)", "caches results by the arguments it was called with",
     "an expensive price calculation"),
    ("retryFetch(url, attempts)", "retries a failed fetch with a growing delay between attempts",
     "loading a flaky API"),
    ("groupBy(array, keyFn)", "groups array items into an object keyed by keyFn(item)",
     "grouping orders by customer"),
    ("chunk(array, size)", "splits an array into arrays of at most size items",
     "sending records to a server in batches"),
    ("deepEqual(a, b)", "compares two values structurally, including nested objects and arrays",
     "checking whether a form's state changed"),
    ("formatCurrency(amount, currency)", "formats a number as money for the user's locale",
     "showing prices in a shopping cart"),
    ("parseQuery(search)", "turns a query string like '?a=1&b=two' into an object",
     "reading filters from the page URL"),
    ("sleep(ms)", "returns a promise that resolves after ms milliseconds",
     "pausing between steps of an animation"),
    ("pick(object, keys)", "returns a new object with only the given keys",
     "sending part of a user record to the client"),
    ("createCounter(start)", "returns an object with increment, decrement and reset methods",
     "a like button"),
]


def js_request(r: random.Random) -> str:
    signature, behaviour, use = r.choice(JS_UTILITIES)
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


SHELL_JOBS = [
    ("finds every `{ext}` file under `{src}` larger than {size} MB", "print their sizes, largest first"),
    ("moves `{ext}` files older than {days} days from `{src}` into `{dst}`", "keep the folder structure"),
    ("compresses each subfolder of `{src}` into its own `.tar.gz` archive in `{dst}`", "skip archives that already exist"),
    ("counts the `{ext}` files in `{src}` per month they were modified", "print a small table"),
    ("checks every URL listed in `{src}/urls.txt`", "write the ones that fail to `{dst}/failed.txt`"),
    ("renames every `{ext}` file in `{src}` to its modification date", "add a number when two files share a date"),
    ("deletes empty folders under `{src}`", "ask for confirmation unless `-y` is given"),
    ("syncs `{src}` to `{dst}` with rsync", "log what it did to a file named after today's date"),
    ("watches `{src}` and runs the tests whenever a `{ext}` file changes", "stop cleanly on Ctrl-C"),
    ("prints the {n} most common words in every `{ext}` file in `{src}`", "ignore case"),
]


def shell_request(r: random.Random) -> str:
    job, extra = r.choice(SHELL_JOBS)
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


CLASSES = [
    ("Invoice", [("number", "str", None), ("amount", "float", "0.0"), ("paid", "bool", "False")],
     "a method `overdue(today)` that says whether it is unpaid thirty days after an `issued` date"),
    ("Rectangle", [("width", "float", "1.0"), ("height", "float", "1.0")],
     "methods for the area, the perimeter and whether it is a square"),
    ("BankAccount", [("owner", "str", None), ("balance", "float", "0.0")],
     "`deposit` and `withdraw` methods that refuse negative amounts and overdrafts"),
    ("Temperature", [("celsius", "float", "0.0")],
     "properties for Fahrenheit and Kelvin and a classmethod `from_fahrenheit`"),
    ("TodoItem", [("title", "str", None), ("done", "bool", "False"), ("priority", "int", "3")],
     "a classmethod `from_line(line)` that parses lines like '[x] (1) Buy milk'"),
    ("RetryPolicy", [("attempts", "int", "3"), ("delay", "float", "0.5"), ("backoff", "float", "2.0")],
     "a method `delays()` that returns the wait before each retry"),
    ("Book", [("title", "str", None), ("author", "str", None), ("pages", "int", "0")],
     "a `__str__` that prints 'Title by Author (N pages)' and ordering by title"),
    ("CacheSettings", [("max_items", "int", "1000"), ("ttl_seconds", "int", "300"), ("enabled", "bool", "True")],
     "a classmethod `from_dict(data)` that ignores unknown keys and converts the types"),
]


def class_request(r: random.Random) -> str:
    name, fields, extra = r.choice(CLASSES)
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

PEOPLE = ["Amira", "Bruno", "Chen", "Dana", "Elif", "Felix", "Gita", "Hugo", "Ivy", "Jonas",
          "Keiko", "Luca", "Mina", "Nils", "Oona", "Priya", "Rafael", "Sofia", "Tomas", "Uma"]
SHOW = ["Show your working step by step.", "Explain each step.", "Show each step.",
        "Show your steps and check the answer.", "Explain your reasoning clearly."]


def _motion(r: random.Random) -> str:
    a, b = r.sample(PEOPLE, 2)
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
        a, b = r.sample(PEOPLE, 2)
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
        text += " " + r.choice(SHOW)
    return text


# ---- prose -----------------------------------------------------------------------------

OCCASIONS = [
    ("my neighbours", "let them know we are renovating the kitchen for three weeks from Monday",
     ["apologise for the noise", "say work stops at 5 pm", "give my phone number for problems"]),
    ("a client", "tell them the project will be two weeks late",
     ["explain that the supplier delayed the parts", "offer a discount on the next invoice", "propose a call on Thursday"]),
    ("my landlord", "ask for the broken heating to be repaired",
     ["mention it has been cold for ten days", "note that I reported it twice", "ask for a date for the repair"]),
    ("the parents of my class", "invite them to the end-of-year school play",
     ["give the date and time", "ask them to bring a snack to share", "mention the children wrote the script"]),
    ("a hiring manager", "follow up after a job interview",
     ["thank them for their time", "mention one thing I learned about the team", "say I am still very interested"]),
    ("my book club", "suggest we move our meetings to the first Sunday of the month",
     ["explain why Fridays are hard for several members", "propose a new venue", "ask for a quick vote"]),
    ("a hotel", "ask for a refund for a cancelled booking",
     ["give the booking dates", "mention the cancellation was within their free window", "ask for a reply within a week"]),
    ("my team", "announce that a new colleague, Tomas, starts on Monday",
     ["say he will work on the mobile app", "ask someone to show him around", "suggest a welcome lunch"]),
    ("a local newspaper", "complain about the lack of bicycle parking at the train station",
     ["say how many bikes are locked to railings", "suggest a covered rack", "mention the safety risk"]),
    ("an old friend", "congratulate them on opening a bakery",
     ["recall the bread we baked as students", "promise to visit next month", "ask what their best seller is"]),
]
AUDIENCES = ["a curious eight-year-old", "a busy manager", "a first-year university student",
             "my grandmother", "a group of teenagers", "someone who has never used a computer"]
STORY_PREMISES = [
    "a night-train conductor who notices one passenger never gets older",
    "a beekeeper whose bees start bringing back blue honey",
    "a girl who finds a map of her town with one street she has never seen",
    "an astronaut who receives a phone call from her childhood home",
    "a baker who can taste people's memories in the bread they buy",
    "a museum guard who hears the paintings arguing at night",
    "two strangers stuck in a lift during a city-wide blackout",
    "a fisherman who catches a bottle with his own handwriting inside",
]
PRODUCTS = [
    ("a wool blanket", ["150 x 200 cm", "woven in Wales", "machine washable at 30 degrees"]),
    ("a bamboo cutting board", ["40 x 25 cm", "juice groove on one side", "oiled by hand"]),
    ("a pair of running socks", ["cushioned heel", "made from recycled yarn", "sold in packs of three"]),
    ("a leather notebook cover", ["fits A5 notebooks", "brass press studs", "ages to a darker brown"]),
    ("a glass teapot", ["900 ml", "steel infuser", "safe on a gas hob"]),
    ("a desk plant kit", ["three succulents", "terracotta pots", "care card included"]),
]
DECISIONS = ["moving our team to a four-day week", "switching the office to hot desks",
             "replacing our weekly meeting with written updates", "letting staff choose their own hours",
             "buying laptops instead of desktop computers", "hiring a contractor instead of a full-time designer",
             "moving our servers to the cloud", "closing the office in August"]
WORD_LIMITS = ["about 100 words", "no more than 120 words", "two short paragraphs", "about 200 words",
               "five bullet points", "three sentences"]


def prose_request(r: random.Random, topics: list[str]) -> str:
    kind = r.randint(0, 5)
    if kind == 0:
        who, purpose, details = r.choice(OCCASIONS)
        picked = r.sample(details, r.randint(2, 3))
        tone = r.choice(["friendly", "polite but firm", "warm", "short and professional", "cheerful"])
        return (f"Write a {tone} email to {who} to {purpose}. " +
                " ".join(f"{d[0].upper()}{d[1:]}." for d in picked))
    if kind == 1:
        topic = r.choice(topics)
        limit = r.choice(WORD_LIMITS)
        constraint = r.choice(["use one everyday comparison", "avoid technical terms",
                               "end with a question to think about", "start with a surprising fact"])
        return f"Explain {topic} to {r.choice(AUDIENCES)} in {limit}, and {constraint}."
    if kind == 2:
        premise = r.choice(STORY_PREMISES)
        return r.choice([f"Write the opening paragraph of a story about {premise}.",
                         f"Write the first scene of a short story about {premise}. Keep it under 200 words.",
                         f"Write a short story about {premise}, told in the first person."])
    if kind == 3:
        product, features = r.choice(PRODUCTS)
        return (f"Write a product description for {product}: {', '.join(features)}. "
                f"{r.choice(['Keep it warm but simple.', 'Make it sound premium.', 'Aim it at gift buyers.', 'Keep it under 80 words.'])}")
    if kind == 4:
        boss = r.choice(["My manager", "Our director", "The head of my department"])
        return (f"{boss} asked me to summarise the pros and cons of {r.choice(DECISIONS)}. Write a "
                f"balanced summary of {r.choice(WORD_LIMITS)} that I can send, in a neutral tone.")
    topic = r.choice(topics)
    return (f"Write a letter to the editor of a local paper about {topic}. Make {r.choice(['two', 'three'])} "
            f"clear points, keep it {r.choice(['polite', 'passionate but fair', 'short'])}, and end with a call to action.")
