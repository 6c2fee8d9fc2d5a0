"""Math questions from DeepMind's Mathematics Dataset generator, TRAIN split only.

Run by path with a Python that has `mathematics-dataset==1.0.1`, `sympy==1.5.1` and
`numpy==1.23.5` (the newest its 2019 code still runs on); it imports nothing from dflash-tui:

    python corpus_math.py PER_MODULE SEED > math.jsonl

One JSON line per question: {"module", "question"}; the same arguments give the same file
(the script runs itself with PYTHONHASHSEED=0, as sympy's set order feeds the draws). Only the generator's training modules
(`modules.train`, full difficulty range) are called; its interpolation and extrapolation
test sets are never generated. The modules kept are the ones whose questions read like
something a person asks (arithmetic, equations, derivatives, conversions, number facts,
probability); the "composed" modules chain several definitions into one riddle and are
left out, and so is `polynomials__add`, which fails even with those pins.
"""

from __future__ import annotations

import json
import os
import random
import sys

MODULES = [
    "algebra__linear_1d", "algebra__linear_2d", "algebra__polynomial_roots",
    "arithmetic__add_or_sub", "arithmetic__add_sub_multiple", "arithmetic__div",
    "arithmetic__mixed", "arithmetic__mul", "arithmetic__mul_div_multiple",
    "calculus__differentiate", "comparison__closest", "comparison__kth_biggest",
    "comparison__pair", "comparison__sort", "measurement__conversion", "measurement__time",
    "numbers__base_conversion", "numbers__div_remainder", "numbers__gcd", "numbers__is_factor",
    "numbers__is_prime", "numbers__lcm", "numbers__list_prime_factors", "numbers__place_value",
    "numbers__round_number", "polynomials__coefficient_named",
    "polynomials__collect", "polynomials__evaluate", "polynomials__expand",
    "polynomials__simplify_power", "probability__swr_p_level_set", "probability__swr_p_sequence",
]
MAX_QUESTION_CHARS = 160  # the generator's own limit


def _flatten(tree, prefix=""):
    for key, value in tree.items():
        name = f"{prefix}__{key}" if prefix else key
        if isinstance(value, dict):
            yield from _flatten(value, name)
        else:
            yield name, value


def main(per_module: int, seed: int) -> None:
    import numpy as np
    from mathematics_dataset.modules import modules

    random.seed(seed)
    np.random.seed(seed)
    train = dict(_flatten(modules.train(lambda range_: range_)))
    for name in MODULES:
        made, seen = 0, set()
        while made < per_module:
            question = str(train[name]().question)
            if len(question) > MAX_QUESTION_CHARS or question in seen:
                continue
            seen.add(question)
            made += 1
            print(json.dumps({"module": name, "question": question}))


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":  # sympy's set order feeds the draws: fix it
        os.execve(sys.executable, sys.orig_argv, {**os.environ, "PYTHONHASHSEED": "0"})
    main(int(sys.argv[1]), int(sys.argv[2]))
