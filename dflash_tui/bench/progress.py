"""Showing the runner's progress: a rich bar on a terminal, one line per run otherwise (logs
and CI keep a readable record instead of a redrawn bar)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn, MofNCompleteColumn, Progress as RichBar, TextColumn, TimeElapsedColumn,
    TimeRemainingColumn,
)

from .runner import Progress


class RichProgress(Progress):
    def __init__(self, console: Console):
        self.bar = RichBar(
            TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("tokens"), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
            console=console, transient=True,
        )
        self.task = None

    def __enter__(self):
        self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.stop()

    def start(self, total: int) -> None:
        self.task = self.bar.add_task("starting", total=total)

    def begin(self, label: str) -> None:
        self.bar.update(self.task, description=label)

    def advance(self, tokens: int) -> None:
        if tokens:
            self.bar.advance(self.task, tokens)

    def finished_run(self, label: str, summary: str) -> None:
        # Printed above the live bar, so the terminal keeps a log of every run.
        self.bar.console.print(f"bench: {label}: {summary}", style="dim", highlight=False)


class LineProgress(Progress):
    def __init__(self, console: Console):
        self.console = console

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def finished_run(self, label: str, summary: str) -> None:
        self.console.print(f"bench: {label}: {summary}")
