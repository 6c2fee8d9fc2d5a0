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

Every generator is deterministic given its random.Random; duplicates are dropped by the
caller.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from . import prompts_identifiers as identifiers
from . import prompts_literals as literals
from . import prompts_requests as requests

# Share of math, code and prose drawn as a multi-constraint request (prompts_requests.py)
# instead of a one-line template: the first drafter, trained on templates only, accepted half as much on
# sample_prompts/ (multi-constraint requests) as on held-out template prompts.
REQUEST_SHARE = 0.5


@dataclass(frozen=True)
class Prompt:
    kind: str  # math | code | prose | self
    text: str


TOPICS = [
    "photosynthesis", "black holes", "the water cycle", "volcanoes", "plate tectonics",
    "the immune system", "vaccines", "DNA", "evolution", "climate change", "renewable energy",
    "solar panels", "wind turbines", "electric cars", "batteries", "the internet", "encryption",
    "machine learning", "neural networks", "databases", "operating systems", "compilers",
    "the Roman Empire", "ancient Egypt", "the printing press", "the industrial revolution",
    "the French Revolution", "the Silk Road", "the Renaissance", "the Cold War",
    "the moon landing", "the history of writing", "democracy", "inflation", "supply and demand",
    "interest rates", "the stock market", "budgeting", "saving for retirement",
    "healthy sleep", "nutrition", "exercise", "meditation", "stress", "learning a language",
    "public speaking", "time management", "teamwork", "leadership", "negotiation",
    "gardening", "composting", "bees", "coral reefs", "rainforests", "deserts", "glaciers",
    "ocean currents", "earthquakes", "hurricanes", "lightning", "rainbows", "the seasons",
    "the solar system", "Mars", "comets", "telescopes", "gravity", "magnetism", "electricity",
    "light", "sound", "heat", "friction", "simple machines", "bridges", "skyscrapers",
    "airplanes", "trains", "ships", "bicycles", "cooking pasta", "baking bread", "coffee",
    "tea", "chocolate", "cheese", "spices", "recycling", "plastic pollution", "clean water",
    "cities", "public transport", "libraries", "museums", "music theory", "jazz",
    "classical music", "painting", "photography", "film making", "poetry", "novels",
    "mythology", "chess", "football", "the Olympics", "marathons", "mountains", "rivers",
    "islands", "maps", "time zones", "calendars", "money", "banks", "taxes", "insurance",
    "friendship", "kindness", "curiosity", "honesty", "memory", "dreams", "habits",
    "robots", "3D printing", "smartphones", "social media", "video games", "open source",
]

PROSE_TEMPLATES = [
    "Explain {topic} in simple terms.",
    "Explain {topic} to a ten-year-old.",
    "Write a short paragraph about {topic}.",
    "What are the most important facts about {topic}?",
    "Give me three interesting facts about {topic}.",
    "Why does {topic} matter?",
    "Write a short story that involves {topic}.",
    "Describe the history of {topic} in a few sentences.",
    "What are the advantages and disadvantages of {topic}?",
    "Summarize what a beginner should know about {topic}.",
    "Write a friendly email to a colleague about {topic}.",
    "Write a short poem about {topic}.",
    "What is a common misconception about {topic}?",
    "How would you teach {topic} to a group of students?",
    "Compare {topic} and {other}.",
    "What is the connection between {topic} and {other}?",
    "List five questions people often ask about {topic}, with short answers.",
    "Write an introduction for an essay about {topic}.",
    "Give some practical tips related to {topic}.",
    "Describe a day in the life of someone who works with {topic}.",
    "What might {topic} look like in fifty years?",
    "Write a product description for a book about {topic}.",
    "Tell me about {topic}.",
    "Write a blog post outline about {topic}.",
    "Explain the difference between {topic} and {other} in two paragraphs.",
    "Write a polite letter to a local council about {topic}.",
    "Write a complaint email to a company about a problem related to {topic}.",
    "Write the opening paragraph of a story set in a world shaped by {topic}.",
    "Summarize the main arguments for and against {topic}.",
    "Write a short speech for a school assembly about {topic}.",
    "Write a thank-you note to a teacher who taught you about {topic}.",
    "Write a short news report about a new discovery in {topic}.",
    "Why do people find {topic} interesting? Answer in a short paragraph.",
    "Write a resignation email to a manager at a company that works on {topic}.",
]

NAMES = [
    "Alice", "Ben", "Carla", "David", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jamal",
    "Kate", "Liam", "Maya", "Noah", "Olga", "Pedro", "Quinn", "Rosa", "Sam", "Tara",
    "Umar", "Vera", "Will", "Xena", "Yusuf", "Zoe", "Anna", "Omar", "Lena", "Marco",
]
OBJECTS = [
    ("apple", "apples"), ("book", "books"), ("marble", "marbles"), ("pencil", "pencils"),
    ("cookie", "cookies"), ("sticker", "stickers"), ("card", "cards"), ("shell", "shells"),
    ("stamp", "stamps"), ("coin", "coins"), ("orange", "oranges"), ("cupcake", "cupcakes"),
    ("toy car", "toy cars"), ("flower", "flowers"), ("balloon", "balloons"), ("egg", "eggs"),
]
ITEMS_PRICED = ["notebook", "sandwich", "ticket", "shirt", "lamp", "pen", "mug", "game", "plant"]
UNITS = [
    ("kilometers", "meters", 1000), ("meters", "centimeters", 100), ("hours", "minutes", 60),
    ("minutes", "seconds", 60), ("kilograms", "grams", 1000), ("liters", "milliliters", 1000),
    ("days", "hours", 24), ("weeks", "days", 7), ("feet", "inches", 12), ("yards", "feet", 3),
]


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
        item = r.choice(ITEMS_PRICED)
        return f"A {item} costs ${price}. It is on sale for {off}% off. What is the sale price?"
    if kind == 2:
        big, small, factor = r.choice(UNITS)
        n = r.randint(2, 90)
        return f"How many {small} are in {n} {big}?"
    speed, hours = r.randint(20, 120), r.randint(2, 9)
    return f"A car travels at {speed} km per hour for {hours} hours. How far does it go?"


WORD_PROBLEMS = [
    "{n1} has {a} {objs}. {n2} gives {n1} {b} more. How many {objs} does {n1} have now?",
    "{n1} had {a} {objs} and gave {b} of them to {n2}. How many {objs} does {n1} have left?",
    "{n1} buys {a} boxes with {b} {objs} in each box. How many {objs} does {n1} have in total?",
    "{n1} shares {ab} {objs} equally among {b} friends. How many {objs} does each friend get?",
    "{n1} has {a} {objs} and {n2} has {b} {objs}. How many more {objs} does {n1} have than {n2}?",
    "{n1} reads {a} pages a day. How many pages does {n1} read in {b} days?",
    "A {item} costs ${a}. {n1} buys {b} of them and pays with ${c}. How much change does {n1} get?",
    "{n1} saves ${a} every week. How many weeks will it take to save ${ab}?",
    "There are {a} students in a class and {b} of them are absent. What fraction of the class is present?",
    "{n1} walks {a} km on Monday and {b} km on Tuesday. How far did {n1} walk in total, and what was the average per day?",
    "A train leaves at {h}:00 and the trip takes {b} hours. At what time does it arrive?",
    "{n1} is {a} years old. {n2} is {b} years older. How old will {n2} be in {c} years?",
    "A farmer has {a} chickens and {b} cows. How many legs do the animals have altogether?",
    "A recipe needs {b} eggs for {a} cookies. How many eggs are needed for {ac} cookies?",
    "{n1} and {n2} together have {ab2} {objs}. {n1} has {a} more than {n2}. How many does each have?",
    "A tank holds {ab} liters. It is filled at {b} liters per minute. How long does it take to fill?",
]


def _word_problem(r: random.Random) -> str:
    n1, n2 = r.sample(NAMES, 2)
    obj, objs = r.choice(OBJECTS)
    a, b = r.randint(3, 60), r.randint(2, 12)
    template = r.choice(WORD_PROBLEMS)
    text = template.format(
        n1=n1, n2=n2, obj=obj, objs=objs, a=a, b=b, c=r.randint(a * b + 1, a * b + 100),
        ab=a * b, ac=a * r.randint(2, 5), ab2=2 * b + a, item=r.choice(ITEMS_PRICED),
        h=r.randint(5, 14),
    )
    return text


FUNCTIONS = ["x^{a}", "{a}x^{b}", "sin(x)", "cos(x)", "e^x", "ln(x)", "x^{a} + {b}x", "sqrt(x)"]
WORKING = [" Show your working.", " Show each step.", " Explain each step.", " Think step by step.",
           " Show your working step by step.", " Explain your reasoning.", ""]


def _calculus(r: random.Random) -> str:
    a, b = r.randint(2, 6), r.randint(2, 9)
    f = r.choice(FUNCTIONS).format(a=a, b=b)
    g = r.choice(FUNCTIONS).format(a=r.randint(2, 5), b=r.randint(2, 9))
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
        return f"A {r.choice(ITEMS_PRICED)} costs ${price}. It is {off}% off, and then {tax}% tax is added. What do you pay?"
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
        text += r.choice(WORKING)
    return Prompt("math", text)


LANGUAGES = ["Python", "Python", "Python", "JavaScript", "TypeScript", "C", "C++", "Java",
             "Rust", "Go", "Bash", "SQL", "Ruby"]
CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "returns the nth Fibonacci number",
    "computes the factorial of a number", "finds the largest element in a list",
    "removes duplicates from a list", "counts the vowels in a string",
    "checks whether a string is a palindrome", "sorts a list of numbers with bubble sort",
    "implements binary search", "merges two sorted lists", "computes the greatest common divisor",
    "converts Celsius to Fahrenheit", "counts the words in a sentence",
    "returns the sum of the digits of a number", "flattens a nested list",
    "checks whether two strings are anagrams", "finds the second largest number in a list",
    "computes the average of a list of numbers", "reads a file and counts its lines",
    "validates an email address", "converts a decimal number to binary",
    "returns the common elements of two lists", "capitalizes the first letter of every word",
    "computes the median of a list", "rotates a list by k positions",
    "checks whether a year is a leap year", "generates all subsets of a set",
    "computes the power of a number recursively", "finds the longest word in a sentence",
    "implements a stack with push and pop", "implements a queue using two stacks",
    "counts the frequency of each character in a string", "transposes a matrix",
    "multiplies two matrices", "checks whether parentheses are balanced",
    "returns the first non-repeating character in a string", "implements quicksort",
    "implements merge sort", "finds all prime numbers below n with a sieve",
    "converts a Roman numeral to an integer", "returns the n largest items of a list",
    "groups a list of words by their first letter", "computes a running total of a list",
    "parses a date string like 2024-03-15", "truncates a string to n characters with an ellipsis",
    "computes the distance between two points", "shuffles a list", "chunks a list into pieces of size n",
    "finds the index of the minimum value", "checks whether a list is sorted",
    "computes simple interest", "returns the unique words of a text in sorted order",
    "converts a string to title case", "implements a linked list with insert and delete",
    "computes the Levenshtein distance between two strings", "finds the mode of a list",
    "counts how many times a substring occurs", "checks whether a number is a perfect square",
    "returns the prime factors of a number", "implements a simple LRU cache",
]
CODE_TEMPLATES = [
    "Write a {lang} function that {task}.",
    "Write a {lang} function that {task}. Include a short docstring or comment.",
    "How do I write a function in {lang} that {task}?",
    "Show me {lang} code that {task}, and explain how it works.",
    "Write a {lang} program that {task} and prints the result for an example input.",
    "Implement a function in {lang} that {task}. Then write two test cases for it.",
    "Write an efficient {lang} function that {task} and give its time complexity.",
]
# Tasks with a named signature: answers that must copy identifiers from the prompt are a
# large share of real code requests (and of what a drafter can get right cheaply).
NAMED_TASKS = [
    ("is_palindrome(text)", "returns True when a string reads the same backwards, ignoring case and spaces"),
    ("chunk(items, size)", "splits a list into consecutive pieces of at most size elements"),
    ("word_counts(text)", "returns a dictionary mapping each word to how often it occurs"),
    ("flatten(nested)", "turns a list of lists into a single flat list"),
    ("clamp(value, low, high)", "limits a number to the range from low to high"),
    ("parse_csv_line(line)", "splits one CSV line into fields, respecting double quotes"),
    ("merge_dicts(a, b)", "merges two dictionaries, with values from b winning on conflicts"),
    ("median(values)", "returns the median of a non-empty list of numbers"),
    ("rotate(items, k)", "rotates a list to the right by k positions"),
    ("top_n(scores, n)", "returns the n highest scores in descending order"),
    ("slugify(title)", "turns a title into a lowercase URL slug with hyphens"),
    ("retry(func, attempts)", "calls a function until it succeeds or the attempts run out"),
    ("read_lines(path)", "reads a text file and returns its non-empty lines without trailing newlines"),
    ("group_by(items, key)", "groups a list of records into a dictionary keyed by key(record)"),
    ("safe_divide(a, b)", "divides two numbers and returns None instead of raising on division by zero"),
    ("to_snake_case(name)", "converts a CamelCase identifier to snake_case"),
    ("running_max(values)", "returns a list whose i-th element is the largest of the first i+1 values"),
    ("count_vowels(word)", "counts the vowels in a word"),
    ("pairwise_sums(numbers)", "returns the sums of each pair of neighbouring numbers"),
    ("format_bytes(size)", "formats a byte count as a human-readable string such as 1.5 MB"),
]
NAMED_EXTRAS = [
    "", " Include a docstring.", " Include a docstring and two examples.",
    " Add type hints.", " Then show how to call it.", " Explain the edge cases it handles.",
    " Keep it short.", " Add a few doctest examples.",
]


def _named_task(r: random.Random) -> str:
    signature, task = r.choice(NAMED_TASKS)
    lang = r.choice(["Python", "Python", "Python", "JavaScript", "TypeScript"])
    lead = r.choice([
        "Write a {lang} function `{sig}` that {task}.",
        "Implement `{sig}` in {lang}: it {task}.",
        "I need a {lang} function called `{sig}`. It {task}.",
        "Please write `{sig}` in {lang}, which {task}.",
    ])
    return lead.format(lang=lang, sig=signature, task=task) + r.choice(NAMED_EXTRAS)


SQL_TASKS = [
    "select all customers from the city of {city}", "count the orders per customer",
    "find the five most expensive products", "compute the average salary per department",
    "list employees hired after {year}", "find customers who have never placed an order",
    "join the orders and customers tables and show the customer name with each order total",
    "delete rows with a NULL email from the users table",
]
SHELL_TASKS = [
    "backs up a directory into a dated tar.gz archive", "renames all .jpeg files in a folder to .jpg",
    "counts the lines in every .py file under a directory", "deletes log files older than 7 days",
    "checks whether a website responds and prints the status code", "finds the 10 largest files in a directory",
    "prints the disk usage of each subdirectory", "monitors a log file and prints lines containing ERROR",
]
JS_TASKS = [
    "debounces a function call", "throttles a function", "deep-clones an object", "fetches JSON from a URL and handles errors",
    "groups an array of objects by a key", "formats a number as a currency string", "validates a form field",
    "flattens a nested array", "memoizes a function", "parses query parameters from a URL",
]
CONFIG_TASKS = [
    "holds the settings of a web server (host, port, debug flag) with defaults",
    "loads settings from environment variables with type conversion",
    "validates a configuration dictionary and reports missing keys",
    "reads a JSON config file and merges it with defaults",
]
CITIES = ["Paris", "Lagos", "Tokyo", "Lima", "Oslo", "Cairo", "Toronto", "Sydney", "Mumbai"]
VAR_NAMES = ["items", "values", "numbers", "data", "scores", "prices", "words", "nums"]
FUNC_NAMES = ["process", "compute", "helper", "transform", "solve", "calc", "run", "check"]


def _snippet(r: random.Random) -> str:
    """A small, valid Python function built from pieces."""
    name, var = r.choice(FUNC_NAMES), r.choice(VAR_NAMES)
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
    var, k = r.choice(VAR_NAMES), r.randint(2, 9)
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
            return Prompt("code", f"Write a bash script that {r.choice(SHELL_TASKS)}.")
        if kind == 1:
            return Prompt("code", f"Write a JavaScript function that {r.choice(JS_TASKS)}. Explain how it works.")
        return Prompt("code", f"Write a Python dataclass that {r.choice(CONFIG_TASKS)}.")
    if roll < 0.25:
        code = _buggy_snippet(r)
        ask = r.choice(["This function has a bug. Find it and fix it:",
                        "Why does this function give the wrong result? Fix it:",
                        "Find the off-by-one or logic error in this code and correct it:"])
        return Prompt("code", f"{ask}\n\n```python\n{code}\n```")
    if roll < 0.45:
        return Prompt("code", _named_task(r))
    if roll < 0.75:
        lang = r.choice(LANGUAGES)
        if lang == "SQL":
            task = r.choice(SQL_TASKS).format(city=r.choice(CITIES), year=r.randint(2005, 2023))
            return Prompt("code", f"Write an SQL query to {task}.")
        return Prompt("code", r.choice(CODE_TEMPLATES).format(lang=lang, task=r.choice(CODE_TASKS)))
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
        return Prompt("prose", requests.prose_request(r, TOPICS))
    topic, other = r.sample(TOPICS, 2)
    return Prompt("prose", r.choice(PROSE_TEMPLATES).format(topic=topic, other=other))


WHO = ["a curious student", "a teacher", "a software engineer", "a parent", "a traveler",
       "a scientist", "a small business owner", "a retired nurse", "a child", "a journalist"]
SELF_SEEDS = [
    "Write one question that {who} might ask about {topic}. Reply with the question only.",
    "Write a short request that {who} might send to an AI assistant about {topic}. Reply with the request only.",
    "Ask a question about {topic} that has a clear answer. Reply with the question only.",
    "Write a homework question about {topic}. Reply with the question only.",
    "Write a task about {topic} that {who} would give to an assistant. Reply with the task only.",
    "Write an instruction asking for a short essay about {topic}. Reply with the instruction only.",
]


def self_seed(r: random.Random) -> Prompt:
    """A seed for the target to write a prompt from; the prompt is its greedy answer."""
    return Prompt("self", r.choice(SELF_SEEDS).format(topic=r.choice(TOPICS), who=r.choice(WHO)))


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


MAKERS = {"math": math_prompt, "code": code_prompt, "prose": prose_prompt, "self": self_seed,
          "ident": ident_prompt, "literal": literal_prompt}


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
