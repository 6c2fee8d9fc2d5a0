#!/usr/bin/env bash
# Build the real-text prompt corpus of the sample drafter's stages 5 to 13 (runs/corpus/prompts.jsonl
# and sources.json) from pinned public packages. The corpus itself is not in the repository
# (one of its sources, Debian Reference, is GPL-2.0+): this script remakes it, byte for byte
# from the same archives (sources.json records each archive's sha256).
#
#   scripts/build_prompt_corpus.sh                  # stage 6's corpus (stages 6-10); needs PyPI and a Debian mirror
#   CORPUS_STAGE=5 scripts/build_prompt_corpus.sh   # stage 5's (fewer sources)
#   CORPUS_STAGE=11 CORPUS_DIR=runs/corpus11 scripts/build_prompt_corpus.sh   # stage 11's: stage 6's
#                                                   # and the CodeI/O problems of reasoning-gym
#   CORPUS_STAGE=12 CORPUS_DIR=runs/corpus12 scripts/build_prompt_corpus.sh   # stage 12's: stage
#                                                   # 11's, and each problem again with numbers
#   CORPUS_STAGE=13 CORPUS_DIR=runs/corpus13 scripts/build_prompt_corpus.sh   # stage 13's: stage
#                                                   # 12's, and up to two more draws of numbers
#
# Sources (docs/DISTILL.md, "Real prompts", has what each gives and its licence):
#   code   public functions with docstrings in these wheels (stub, task in prose, or source
#          to explain / document / test)
#   prose  the Python 3.11 documentation's reST sources (python3.11-doc) and Debian
#          Reference (debian-reference-en): questions asked as headings, and paragraphs
#          under a request (summarize, explain, rewrite, ...)
#   task   (stage 11) the CodeI/O problems that the reasoning-gym wheel ships as data: a task in
#          prose with its input/output specification, asked as a function to write, as the
#          question alone, or its solving code to explain (none of the wheel's own code is read);
#          stage 12 also asks each problem with numbers drawn by its own input generator, run
#          in a fenced child process (corpus_numbers.py); stage 13 up to three times, each
#          draw with numbers the earlier ones did not give
#   math   DeepMind's Mathematics Dataset generator, train modules only, in its own venv
# The test sets (sample_prompts/, test_prompts/) read none of these.
#
# Environment: CORPUS_STAGE (5, 6, 11, 12 or 13, default 6), CORPUS_DIR (default runs/corpus), WORK (downloads and the math venv,
# default runs/corpus-src), PYTHON (the project's Python, default .venv/bin/python),
# MATH_PER_MODULE (default 130), SEED (default 0).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
CORPUS_DIR=${CORPUS_DIR:-runs/corpus}
WORK=${WORK:-runs/corpus-src}
PYTHON=${PYTHON:-.venv/bin/python}
MATH_PER_MODULE=${MATH_PER_MODULE:-130}
SEED=${SEED:-0}

CORPUS_STAGE=${CORPUS_STAGE:-6}

# stage 5's sources
WHEELS=(more-itertools==10.5.0 toolz==1.0.0 boltons==24.1.0 networkx==3.4.2
        python-dateutil==2.9.0.post0 sympy==1.13.3 pip==24.3.1 click==8.1.7 pyparsing==3.2.0
        jinja2==3.1.4 numpy==2.1.3)
DEBS=(python3.11-doc=3.11.2-6+deb12u8 debian-reference-en=2.100)
if [ "$CORPUS_STAGE" = 6 ] || [ "$CORPUS_STAGE" = 11 ] || [ "$CORPUS_STAGE" = 12 ] || [ "$CORPUS_STAGE" = 13 ]; then
  # stage 6 adds more packages' functions and four more projects' documentation
  WHEELS+=(scipy==1.14.1 scikit-learn==1.5.2 pandas==2.2.3 statsmodels==0.14.4 astropy==7.0.0
           dask==2024.12.0 xarray==2024.11.0 mpmath==1.3.0 sqlalchemy==2.0.36 shapely==2.0.6
           funcy==2.0 psutil==6.1.0 babel==2.16.0 tornado==6.4.2 werkzeug==3.1.3 pint==0.24.4
           pygments==2.18.0 requests==2.32.3 attrs==24.2.0 flask==3.1.0 markdown==3.7
           urllib3==2.2.3 pyyaml==6.0.2 lark==1.2.2 humanize==4.11.0 packaging==24.2 parso==0.8.4)
  DEBS+=(python-django-doc=3:3.2.25-0+deb12u3 python-pandas-doc=1.5.3+dfsg-2
         python-flask-doc=2.2.2-3 sphinx-doc=5.3.0-4)
elif [ "$CORPUS_STAGE" != 5 ]; then
  echo "CORPUS_STAGE must be 5, 6, 11, 12 or 13 (got $CORPUS_STAGE)" >&2; exit 2
fi
extra=()
if [ "$CORPUS_STAGE" -ge 11 ]; then
  WHEELS+=(reasoning-gym==0.1.25)  # its CodeI/O problems only (corpus_tasks.py)
fi
if [ "$CORPUS_STAGE" = 12 ]; then extra=(--task-numbers); fi
if [ "$CORPUS_STAGE" = 13 ]; then extra=(--task-numbers --task-draws 3); fi

archives="$WORK/archives-stage$CORPUS_STAGE"  # each stage reads every archive in its folder
mkdir -p "$archives"
# numpy is read for its Python sources only; any platform's wheel of the version has them
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
  --python-version 3.11 -d "$archives" "${WHEELS[@]}"
(cd "$archives" && apt-get download "${DEBS[@]}")

if [ ! -x "$WORK/math-venv/bin/python" ]; then
  python3 -m venv "$WORK/math-venv"
  "$WORK/math-venv/bin/python" -m pip install -q mathematics-dataset==1.0.1 sympy==1.5.1 \
    numpy==1.23.5 mpmath==1.3.0 six absl-py
fi
"$WORK/math-venv/bin/python" -W ignore distill/dflash_tui_distill/corpus_math.py \
  "$MATH_PER_MODULE" "$SEED" > "$WORK/math.jsonl"

"$PYTHON" -m dflash_tui_distill.corpus --archives "$archives" --math "$WORK/math.jsonl" \
  --out "$CORPUS_DIR" --seed "$SEED" "${extra[@]}"
