"""Progress bars and messages on stderr (data goes to stdout).

One console for both, so that a message printed while a bar is live lands above the bar
instead of through it. Bars are drawn only on a terminal.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

stderr = Console(stderr=True)

Advance = Callable[[int], None]
"""Called with the number of items just done."""


@contextlib.contextmanager
def progress_bars(bars: Sequence[tuple[str, int | None]]) -> Iterator[list[Advance]]:
    """One bar per (description, total) (None: unknown total); yields their advance callbacks."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=stderr, transient=False, disable=not stderr.is_terminal) as progress:
        tasks = [progress.add_task(description, total=total) for description, total in bars]
        yield [functools.partial(progress.advance, task) for task in tasks]


@contextlib.contextmanager
def progress_bar(description: str, total: int | None) -> Iterator[Advance]:
    """A single bar; yields its advance callback."""
    with progress_bars([(description, total)]) as (advance,):
        yield advance
