"""Progress of long work (``import``, ``embed``, distilling an embedder, ``consolidate --wait``) on
stderr, for a person at a terminal; piped or redirected, the commands print nothing extra.

Whether stderr is a terminal is rich's decision, so ``TTY_COMPATIBLE=1`` (or ``FORCE_COLOR``) shows
the progress where no terminal is, and ``TTY_COMPATIBLE=0`` hides it where one is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console


def _console() -> Console:
    return Console(stderr=True, highlight=False)  # made when used: reads the environment of the moment


@contextmanager
def progress(description: str, *, total: float | None = None) -> Iterator[Callable[[float], None]]:
    """A progress bar (with ``total``) or a spinner (without) on stderr while the block runs, if stderr
    is a terminal; yields ``advance(amount)``. The bar is cleared when the block ends."""
    console = _console()
    if not console.is_terminal:
        yield lambda amount: None
        return
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        [TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn()]
        if total is not None
        else [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
    )
    with Progress(*columns, console=console, transient=True) as shown:
        task = shown.add_task(description, total=total)
        shown.refresh()
        yield lambda amount: shown.advance(task, amount)
        shown.refresh()
