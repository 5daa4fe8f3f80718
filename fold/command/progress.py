"""The fold's progress bar: bytes read, on stderr."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

AFTER_SECONDS = 1.0
"""A fold quicker than this shows no bar."""


class ProgressBar:
    """A byte progress bar on stderr, shown only on a terminal and once a fold takes a while."""

    def __init__(self, paths: list[str], console: Console, quiet: bool) -> None:
        self._enabled = console.is_terminal and not quiet
        self._console = console
        self._total = sum(os.path.getsize(path) for path in paths)
        self._done = 0
        self._started = time.monotonic()
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def advance(self, read_bytes: int) -> None:
        self._done += read_bytes
        if not self._enabled:
            return
        if self._progress is None:
            if time.monotonic() - self._started < AFTER_SECONDS:
                return
            from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

            self._progress = Progress(
                "folding",
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
                console=self._console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("fold", total=self._total)
        if self._task is not None:
            self._progress.update(self._task, completed=self._done)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
