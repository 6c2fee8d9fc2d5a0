"""What the benchmarks share: a wall + CPU clock, the target decoding alone through mlx-lm's
own loop (the reference speed every speed-up is measured against), and the report's end."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Callable, Optional

import mlx.core as mx
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache


class Clock:
    """Wall and process CPU seconds since it was made."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def mlx_lm_greedy(model, stop: set[int]):
    """The target alone through mlx-lm's own decode loop (greedy), stopping at EOS."""

    def decode(ids: list[int], max_tokens: int):
        steps = generate_step(mx.array(ids), model, max_tokens=max_tokens,
                              sampler=lambda logits: mx.argmax(logits, axis=-1),
                              prompt_cache=make_prompt_cache(model))
        tokens = [int(next(steps)[0])]  # the prefill's token
        clock = Clock()
        while tokens[-1] not in stop and len(tokens) < max_tokens:
            tokens.append(int(next(steps)[0]))
        elapsed = clock.read()
        steps.close()
        return tokens, elapsed, 0

    return decode


def finish(result: dict, report: Callable[[dict], str], json_path: Optional[Path]) -> dict:
    """Print the report; write the numbers as JSON when asked. Returns them (tests read them)."""
    print(report(result))
    if json_path is not None:
        json_path.write_text(json.dumps(result, indent=1, default=str))
    return result


def parser(doc: str, dtype: str) -> argparse.ArgumentParser:
    """An argument parser with what every benchmark takes: --block, --dtype, --json."""
    out = argparse.ArgumentParser(description=doc.split("\n")[0])
    out.add_argument("--block", type=int, default=7, help="proposals per round")
    out.add_argument("--dtype", default=dtype)
    out.add_argument("--json", type=Path, help="write the numbers here")
    return out
