"""Progress for the training loop: a rich bar on a terminal, plain lines otherwise.

On a terminal: one live bar (step, loss, slot-1 accuracy, tokens/s, ETA) with notes
printed above it. Without one (CI, a remote command whose output is captured), a line
every --log-every steps, so a captured log still shows the run's progress.
"""

from __future__ import annotations

import sys
from typing import Optional


class Progress:
    def __init__(self, total: int, completed: int, enabled: bool = True, log_every: int = 10):
        self.total, self.log_every = total, log_every
        self.live = enabled and sys.stderr.isatty()
        self._bar = None
        self._task = None
        if self.live:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress,
                                       TextColumn, TimeRemainingColumn)

            self._bar = RichProgress(
                TextColumn("[bold]distill"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"), TimeRemainingColumn(),
                console=Console(stderr=True), transient=False,
            )
            self._task = self._bar.add_task("train", total=total, completed=completed, stats="")
            self._bar.start()

    def update(self, step: int, stats: str, eta: Optional[float] = None) -> None:
        if self._bar is not None:  # the bar shows its own time remaining
            self._bar.update(self._task, completed=step, stats=stats)
        elif step % self.log_every == 0 or step == self.total:
            if eta is not None:
                stats += f"  eta {eta / 60:.1f} min"
            print(f"step {step}/{self.total}  {stats}", file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text)
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def format_stats(loss: float, acc1: float, tokens_per_s: float) -> str:
    return f"loss {loss:.3f}  acc1 {acc1:6.1%}  {tokens_per_s:,.0f} tok/s"
