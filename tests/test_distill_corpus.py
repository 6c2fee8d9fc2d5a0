"""The real-text prompt corpus: read from real archives (a wheel, a .deb), split, recorded,
and taken in by `distill --prompts-from`."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from dflash_tui.cli import main
from dflash_tui.engine.errors import InputError
from dflash_tui_distill import corpus, corpus_code, corpus_docs
from dflash_tui_distill.holdout import Holdout
from dflash_tui_distill.prompts_from import read_prompts_from

MODULE = '''"""A module of a real-looking package."""


def chunked(items, size=2):
    """Split ITEMS into lists of at most SIZE elements, keeping their order.

    >>> chunked([1, 2, 3])
    [[1, 2], [3]]
    """
    return [items[i:i + size] for i in range(0, len(items), size)]


def _private(x):
    """A helper that is not part of the public surface at all."""
    return x


def tiny(x):
    """Return x."""
    return x
'''
GUIDE = """Using the toolkit
=================

How do I split a list into chunks?
----------------------------------

The toolkit splits lists for you. Call the function with the list and the size of each piece,
and it returns the pieces in order. Nothing is copied twice, so it is cheap even for long lists,
and the last piece is shorter when the list does not divide evenly.

.. note::

   Indented directive bodies are not prose.

::

    chunked([1, 2, 3])
"""


def write_wheel(directory: Path, name: str = "toolkit", version: str = "1.0") -> Path:
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{name}/__init__.py", MODULE)
        archive.writestr(f"{name}/tests/test_it.py", MODULE.replace("chunked", "test_chunked"))
        archive.writestr(f"{name}-{version}.dist-info/METADATA", "Name: toolkit\n")
    return wheel


def write_deb(directory: Path, name: str = "toolkit-doc", version: str = "2.0", rst: bool = True,
              html: str | None = None) -> Path:
    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb is not installed")
    tree = directory / f"{name}-tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: t <t@example.invalid>\n"
        "Description: test documentation\n")
    sources = tree / "usr/share/doc/toolkit/html/_sources"
    sources.mkdir(parents=True)
    if rst:
        (sources / "guide.rst.txt").write_text(GUIDE)
    if html is not None:
        (sources.parent / "guide.html").write_text(html)
    deb = directory / f"{name}_{version.replace(':', '%3a')}_all.deb"  # as apt names it
    subprocess.run(["dpkg-deb", "--build", "-Zxz", str(tree), str(deb)], check=True, capture_output=True)
    return deb


def test_wheel_functions_become_prompts_with_their_own_text(tmp_path):
    functions = list(corpus_code.wheel_functions(write_wheel(tmp_path)))
    assert [f.item for f in functions] == ["toolkit/__init__.py:chunked"]  # no tests, private or one-liners
    chunked = functions[0]
    assert chunked.signature == "chunked(items, size=2)"
    form, text = corpus_code.prompt_for(chunked, seed=0)
    assert (form, text) == corpus_code.prompt_for(chunked, seed=0)
    if form == "source":
        assert "return [items[i:i + size]" in text and "Split ITEMS" not in text
    else:
        assert "chunked(items, size=2)" in text and "Split ITEMS into lists of at most SIZE elements" in text
    forms = {corpus_code.prompt_for(chunked, seed)[0] for seed in range(40)}
    assert forms == {"stub", "task", "source"}


def test_documentation_gives_its_questions_and_paragraphs(tmp_path):
    members = dict(corpus_docs.deb_members(write_deb(tmp_path), (".rst.txt",)))
    assert list(members) == ["usr/share/doc/toolkit/html/_sources/guide.rst.txt"]
    units = list(corpus_docs.rst_units(members["usr/share/doc/toolkit/html/_sources/guide.rst.txt"]))
    assert units == [
        ("question", "How do I split a list into chunks?"),
        ("paragraph", "The toolkit splits lists for you. Call the function with the list and the size of "
                      "each piece, and it returns the pieces in order. Nothing is copied twice, so it is "
                      "cheap even for long lists, and the last piece is shorter when the list does not "
                      "divide evenly."),
    ]
    asked = corpus_docs.prompt_for("paragraph", units[1][1], "guide#1", seed=0)
    assert asked.split("\n\n")[0] in corpus_docs.PARAGRAPH_ASKS and asked.endswith(units[1][1])


HTML_PARAGRAPH = ("The toolkit also joins lists. Give it the pieces in order and it returns one list, "
                  "copying each element once, so joining is as cheap as splitting. Empty pieces are "
                  "kept out of the result, and a piece that is not a list is refused with an error that "
                  "names its position.")


def test_a_package_gives_its_rest_sources_else_its_html_never_both(tmp_path, monkeypatch):
    archives = tmp_path / "archives"
    archives.mkdir()
    page = f"<html><body><p>{HTML_PARAGRAPH}</p><pre>not prose</pre></body></html>"
    write_deb(archives, html=page)  # a Sphinx build: its reST sources and their HTML
    write_deb(archives, name="pages-doc", version="3:1.0-1", rst=False, html=page)  # HTML only
    monkeypatch.setitem(corpus.LICENCES, "toolkit-doc", "MIT")
    monkeypatch.setitem(corpus.LICENCES, "pages-doc", "MIT")
    units = list(corpus.read_archives(archives, seed=0))
    by_source = {}
    for source, item, kind, form, text in units:
        by_source.setdefault(source, []).append((item, form))
    assert all(item.split("#")[0].endswith(".rst.txt") for item, _ in by_source["toolkit-doc==2.0"])
    assert by_source["pages-doc==3:1.0-1"] == [("usr/share/doc/toolkit/html/guide.html#0", "paragraph")]
    assert any(text.endswith(HTML_PARAGRAPH) for source, *_, text in units if source.startswith("pages-doc"))


def test_corpus_build_records_sources_and_splits_and_keeps_test_prompts_out(tmp_path, monkeypatch):
    archives = tmp_path / "archives"
    archives.mkdir()
    write_wheel(archives)
    write_deb(archives)
    math = tmp_path / "math.jsonl"
    math.write_text("".join(json.dumps({"module": "numbers__gcd", "question": f"What is the gcd of {n} and 6?"}) + "\n"
                            for n in range(40)))
    monkeypatch.setitem(corpus.LICENCES, "toolkit", "MIT")
    monkeypatch.setitem(corpus.LICENCES, "toolkit-doc", "MIT")
    tests = tmp_path / "tests" / "math"
    tests.mkdir(parents=True)
    (tests / "01.txt").write_text("What is the gcd of 12 and 6?")
    out = tmp_path / "corpus"
    assert corpus.main(["--archives", str(archives), "--math", str(math), "--out", str(out),
                        "--validation-share", "0.25", "--holdout", str(tests.parent)]) == 0
    rows = read_prompts_from(str(out / "prompts.jsonl"))
    summary = json.loads((out / "sources.json").read_text())
    assert not any("gcd of 12 and 6" in r["text"] for r in rows)
    assert summary["dropped"] == {"matches a test prompt": 1}
    assert {r["kind"] for r in rows} == {"real-code", "real-prose", "real-math"}
    math_rows = [r for r in rows if r["kind"] == "real-math"]
    assert 0 < sum(r["split"] == "validation" for r in math_rows) < len(math_rows)
    assert summary["sources"]["toolkit==1.0"]["licence"] == "MIT"
    assert summary["sources"][corpus.MATH_SOURCE]["prompts"] == {
        "train": sum(r["split"] == "train" for r in math_rows),
        "validation": sum(r["split"] == "validation" for r in math_rows)}
    first = (out / "prompts.jsonl").read_bytes()
    assert corpus.main(["--archives", str(archives), "--math", str(math), "--out", str(out),
                        "--validation-share", "0.25", "--holdout", str(tests.parent)]) == 0
    assert (out / "prompts.jsonl").read_bytes() == first, "the same archives give the same file"


def test_an_archive_without_a_recorded_licence_is_refused(tmp_path):
    archives = tmp_path / "archives"
    archives.mkdir()
    write_wheel(archives, name="unheard_of")
    with pytest.raises(InputError, match="no licence recorded for 'unheard-of'"):
        corpus.build(archives, None, 0, 0.1, Holdout([]))


@pytest.mark.parametrize("line, expected", [
    ("not json", "line 2: not JSON"),
    (json.dumps({"text": "", "kind": "real-code", "split": "train"}), "line 2: expected an object with a non-empty"),
    (json.dumps({"text": "hi there", "kind": "Real Code", "split": "train"}), "line 2: \"kind\" 'Real Code'"),
    (json.dumps({"text": "hi there", "kind": "real-code", "split": "test"}), "line 2: \"split\" 'test'"),
])
def test_a_bad_prompts_from_line_is_named(tmp_path, line, expected):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"text": "fine", "kind": "real-code", "split": "train"}) + "\n" + line + "\n")
    with pytest.raises(InputError, match=expected.replace("(", r"\(")):
        read_prompts_from(str(path))


def test_distill_takes_the_files_prompts_with_their_split_and_records_the_sources(make_pair, tmp_path):
    target_dir, _ = make_pair("llama")
    real = [{"text": f"Explain what line {n} of the poem means.", "kind": "real-prose",
             "split": "validation" if n < 3 else "train", "source": "poems==1.0"} for n in range(10)]
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in real))
    (tmp_path / "sources.json").write_text(json.dumps(
        {"sources": {"poems==1.0": {"archive": "poems-1.0.whl", "sha256": "ab", "licence": "MIT"}}}))
    data = tmp_path / "data"
    assert main(["distill", str(target_dir), "--out", str(tmp_path / "o"), "--data", str(data),
                 "--phase", "data", "--num-prompts", "6", "--max-new-tokens", "8", "--prompts-from", str(path)]) == 0
    stored = [json.loads(line) for line in (data / "prompts.jsonl").read_text().splitlines()]
    mine = {p["text"]: p["split"] for p in stored if p["kind"] == "real-prose"}
    assert mine == {r["text"]: r["split"] for r in real}
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest["sources"]["poems==1.0"] == {"train": 7, "validation": 3}
    assert manifest["prompts_from"]["sources"]["poems==1.0"]["licence"] == "MIT"
    assert manifest["sequences"]["validation"] >= 3


def write_problems_wheel(directory: Path, problems: list[dict]) -> Path:
    """A wheel laid out as reasoning-gym's: its CodeI/O problems as gzipped JSON, one file an
    array and the other JSON lines, with one problem in both; and code that must not be read."""
    import gzip
    wheel = directory / "reasoning_gym-0.1.25-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("reasoning_gym/data/codeio-hq.jsonl.gz", gzip.compress(json.dumps(problems[:2]).encode()))
        archive.writestr("reasoning_gym/data/codeio.jsonl.gz",
                         gzip.compress("".join(json.dumps(p) + "\n" for p in problems[1:]).encode()))
        archive.writestr("reasoning_gym/arithmetic/gsm_symbolic/generators.py", MODULE)
    return wheel


def problem(n: int) -> dict:
    return {"task_description": f"Given {n} apples shared among friends, how many does each friend get?",
            "input_output_spec": "Input:\n  `apples` (int): how many apples.\n  `friends` (int): how many friends.\n\n"
                                 "Output:\n  `return` (int): apples per friend.",
            "code_sample": f"# main function\ndef main_solution(apples, friends):\n    return apples // friends + {n} * 0"}


def test_problems_shipped_as_data_become_task_prompts_and_the_wheels_code_is_not_read(tmp_path):
    from dflash_tui_distill import corpus_tasks
    archives = tmp_path / "archives"
    archives.mkdir()
    write_problems_wheel(archives, [problem(n) for n in range(30)])
    tasks = list(corpus_tasks.wheel_tasks(archives / "reasoning_gym-0.1.25-py3-none-any.whl"))
    assert len(tasks) == 30, "a problem in both files is read once"
    units = list(corpus.read_archives(archives, seed=0))
    assert {(u[0], u[2]) for u in units} == {("reasoning-gym==0.1.25", "real-task")}, "no code prompts"
    forms = {form: text for _, _, _, form, text in units}
    assert set(forms) == {"write", "question", "source"}
    assert forms["write"].startswith(("Write", "Implement", "I need", "Can you")) and \
        "main_solution(apples, friends)" in forms["write"] and "`friends` (int)" in forms["write"]
    assert forms["question"].startswith("Given ") and forms["question"].endswith("each friend get?")
    assert "return apples // friends" in forms["source"]
    assert units == list(corpus.read_archives(archives, seed=0)), "the same wheel gives the same prompts"


def test_a_problems_file_that_is_not_gzipped_json_is_named(tmp_path):
    from dflash_tui_distill import corpus_tasks
    wheel = tmp_path / "reasoning_gym-0.1.25-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("reasoning_gym/data/codeio.jsonl.gz", b"plain text")
    with pytest.raises(InputError, match=r"reasoning_gym-0.1.25-py3-none-any.whl:reasoning_gym/data/codeio.jsonl.gz: not gzipped JSON"):
        list(corpus_tasks.wheel_tasks(wheel))


GENERATORS = {
    "seeded": "import string\ndef generate_inputs(rng):\n    return {'radius': rng.randint(1, 50), 'angle': round(rng.uniform(0, 360), 3),"
              " 'unit': rng.choice(string.ascii_lowercase)}",
    "unseeded": "import random\ndef generate_inputs(rng):\n    return {'n': random.random()}",
    "reaches_out": "import os\ndef generate_inputs(rng):\n    return {'home': os.getcwd()}",
    "opens_a_file": "def generate_input(rng):\n    return {'text': open('/etc/hostname').read()}",
    "loops": "def generate_inputs(rng):\n    while True:\n        pass",
    "too_big": "def generate_inputs(rng):\n    return {'xs': list(range(100))}",
    "prints": "def generate_inputs(rng):\n    print('chatty')\n    return {'n': rng.randint(1, 9)}",
    # seeded, but its order is a set's: it follows the process's string hashing
    "set_order": "def generate_inputs(rng):\n    return {'names': list({'ab', 'cd', 'ef', 'gh', 'ij', 'kl'})}",
}


def test_problems_are_asked_with_numbers_only_where_their_generator_runs_the_same_twice(tmp_path):
    from dflash_tui_distill import corpus_numbers, corpus_tasks
    tasks = [corpus_tasks.Task(f"codeio#{name}", f"Given a sector, what is its area ({name})?", "", "", code)
             for name, code in GENERATORS.items()]
    values = corpus_numbers.instantiate(tasks, seed=0)
    assert list(values) == ["codeio#seeded", "codeio#prints"], \
        "the unseeded, fenced-off, looping, too-big and set-ordered ones are left out; printing does no harm"
    assert values == corpus_numbers.instantiate(tasks, seed=0) != corpus_numbers.instantiate(tasks, seed=1)
    text = values["codeio#seeded"]
    assert text.startswith("radius = ") and ", angle = " in text and ' and unit = "' in text
    form, prompt = corpus_numbers.prompt_for(tasks[0], text, seed=0)
    assert form == "numbers" and prompt.startswith("Given a sector, what is its area (seeded)?\n\n") and text in prompt


def test_a_generator_child_is_a_function_of_its_request_and_hash_seed(tmp_path):
    """Builds agree because each child's string hashing is fixed: the same hash seed gives a
    set-ordered generator the same values every time, the other seed other values."""
    from dflash_tui_distill import corpus_numbers
    request = json.dumps({"seed": 0, "draw": 0, "tasks": [{"item": "codeio#set", "code": GENERATORS["set_order"]}]})
    runs = [corpus_numbers._run_child(request, 60, hash_seed) for hash_seed in (1, 1, 2)]
    assert runs[0] == runs[1] != runs[2]
    assert runs[0]["codeio#set"].startswith("names = [")


@pytest.mark.parametrize("inputs, expected", [
    ({"x": 0.123456}, "x = 0.1235"),
    ({"a": 1234.5678, "b": True}, "a = 1234.57 and b = True"),
    ({"m": [[1, 2], [3, 4]], "s": "abc", "t": 2.5e-07}, 'm = [[1, 2], [3, 4]], s = "abc" and t = 2.5e-07'),
    ({"d": {"k": 1}}, None),
    ({"s": "x" * 41}, None),
    ({"x": float("nan")}, None),
    ({}, None),
])
def test_values_read_as_a_question_or_not_at_all(inputs, expected):
    from dflash_tui_distill.corpus_numbers import values_text
    assert values_text(inputs) == expected


def test_task_numbers_give_a_second_prompt_on_its_problems_side(tmp_path):
    archives = tmp_path / "archives"
    archives.mkdir()
    problems = [dict(problem(n), input_generator=GENERATORS["seeded"]) for n in range(30)]
    write_problems_wheel(archives, problems)
    out = tmp_path / "corpus"
    assert corpus.main(["--archives", str(archives), "--out", str(out), "--validation-share", "0.3",
                        "--task-numbers"]) == 0
    rows = read_prompts_from(str(out / "prompts.jsonl"))
    by_item = {r["item"]: r for r in json.loads("[" + ",".join((out / "prompts.jsonl").read_text().splitlines()) + "]")}
    numbers = [item for item in by_item if item.endswith("|numbers")]
    assert len(numbers) == 30 and {by_item[i]["kind"] for i in numbers} == {"real-problem"}
    assert all(by_item[i]["split"] == by_item[i.split("|")[0]]["split"] for i in numbers)
    assert {r["split"] for r in rows} == {"train", "validation"}
    assert json.loads((out / "sources.json").read_text())["task_numbers"] is True


def test_task_draws_ask_a_problem_again_with_new_numbers_and_keep_one_draw_unchanged(tmp_path):
    archives = tmp_path / "archives"
    archives.mkdir()
    generators = {0: GENERATORS["seeded"], 1: "def generate_inputs(rng):\n    return {'n': 7}"}  # one fixed value
    write_problems_wheel(archives, [dict(problem(n), input_generator=generators[n % 2]) for n in range(20)])
    rows = {}
    for draws in (1, 3):
        out = tmp_path / f"corpus{draws}"
        args = ["--archives", str(archives), "--out", str(out), "--validation-share", "0.3", "--task-numbers"]
        assert corpus.main(args + (["--task-draws", str(draws)] if draws > 1 else [])) == 0
        rows[draws] = [json.loads(line) for line in (out / "prompts.jsonl").read_text().splitlines()]
    one, three = rows[1], rows[3]
    assert [r for r in three if not r["item"].endswith(("|numbers2", "|numbers3"))] == one, \
        "the first draw's prompts are the one-draw corpus's, in its order"
    by_item = {r["item"]: r for r in three}
    tasks = {int(r["text"].split()[1]): r["item"] for r in three if r["item"].endswith("|numbers")}
    assert sorted(tasks) == list(range(20))
    assert {r["split"] for r in three if "|" in r["item"]} == {"train", "validation"}
    for n, first in tasks.items():
        item = first.split("|")[0]
        variants = [i for i in (item + "|numbers", item + "|numbers2", item + "|numbers3") if i in by_item]
        # a generator that always gives the same numbers is asked once; a seeded one three times
        assert len(variants) == (3 if n % 2 == 0 else 1), (n, variants)
        assert {by_item[v]["split"] for v in variants} == {by_item[item]["split"]}, "the problem's side"
        assert {by_item[v]["kind"] for v in variants} == {"real-problem"}
        assert len({by_item[v]["text"].rsplit("\n\n", 1)[1] for v in variants}) == len(variants)
    assert json.loads((tmp_path / "corpus3" / "sources.json").read_text())["task_draws"] == 3
    assert "task_draws" not in json.loads((tmp_path / "corpus1" / "sources.json").read_text())


@pytest.mark.parametrize("extra", [["--task-draws", "0", "--task-numbers"], ["--task-draws", "2"]])
def test_task_draws_out_of_range_or_without_numbers_is_one_line(tmp_path, capsys, extra):
    assert corpus.main(["--archives", str(tmp_path), "--out", str(tmp_path / "corpus")] + extra) == 2
    assert capsys.readouterr().err.strip() == \
        f"corpus: error: --task-draws {extra[1]}: expected 1 or more, with --task-numbers"


def test_a_generator_child_that_cannot_run_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from dflash_tui_distill import corpus_numbers
    archives = tmp_path / "archives"
    archives.mkdir()
    write_problems_wheel(archives, [dict(problem(n), input_generator=GENERATORS["seeded"]) for n in range(3)])
    monkeypatch.setattr(corpus_numbers.sys, "executable", "/bin/false")  # an interpreter that fails at once
    assert corpus.main(["--archives", str(archives), "--out", str(tmp_path / "corpus"), "--task-numbers"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "corpus: error: CodeI/O input generators: the child process failed (no output)"
    assert not (tmp_path / "corpus").exists(), "nothing is written"
