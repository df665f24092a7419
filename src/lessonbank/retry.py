"""One retry mechanism: capped exponential backoff with jitter, an attempt and/or time budget,
and a predicate for what is worth retrying.

Used by the LLM wrapper (``llm/retry.py``), the OpenAI embedder and the server stores' connection
retries (``stores/connection.py``); the durable job queue schedules its retries with
:meth:`Backoff.delay`. Errors that are not transient pass through at once; when the budget is spent
the last transient error is raised unchanged, so callers translate it as they always did.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

Transient = tuple[type[BaseException], ...] | Callable[[BaseException], bool]
OnRetry = Callable[[BaseException, int, float], None]  # (error, retry number from 1, delay in seconds)


@dataclass(frozen=True)
class Backoff:
    """Delay before retry n (1-based): ``base_s`` × ``factor``^(n−1), capped at ``max_s``, then ± ``jitter``."""

    base_s: float
    max_s: float
    factor: float = 2.0
    jitter: float = 0.2

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        capped = min(self.max_s, self.base_s * self.factor ** (retry - 1))
        if not self.jitter:
            return capped
        return capped * (rng or random).uniform(1.0 - self.jitter, 1.0 + self.jitter)


def _is_transient(transient: Transient, error: BaseException) -> bool:
    return isinstance(error, transient) if isinstance(transient, tuple) else transient(error)


class _Schedule:
    """When the next attempt may run: the budget and backoff shared by the sync and async loops."""

    def __init__(
        self,
        transient: Transient,
        backoff: Backoff,
        attempts: int | None,
        budget_s: float | None,
        on_retry: OnRetry | None,
        clock: Callable[[], float],
    ) -> None:
        if attempts is not None and attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.transient = transient
        self.backoff = backoff
        self.attempts = attempts
        self.on_retry = on_retry
        self.clock = clock
        self.deadline = None if budget_s is None else clock() + budget_s
        self.made = 0

    def after(self, error: BaseException) -> float | None:
        """The delay before the next attempt after ``error``, or None when it must be raised now."""
        self.made += 1
        if not _is_transient(self.transient, error):
            return None
        if self.attempts is not None and self.made >= self.attempts:
            return None
        delay = self.backoff.delay(self.made)
        if self.deadline is not None and self.clock() + delay > self.deadline:
            return None
        if self.on_retry is not None:
            self.on_retry(error, self.made, delay)
        return delay


def retry_call(
    fn: Callable[[], T],
    *,
    transient: Transient,
    backoff: Backoff,
    attempts: int | None = None,
    budget_s: float | None = None,
    on_retry: OnRetry | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Call ``fn`` until it succeeds, an error is not transient, or ``attempts`` (calls in all) or
    ``budget_s`` (seconds from the first call; a retry that would end past it is not made) run out."""
    schedule = _Schedule(transient, backoff, attempts, budget_s, on_retry, clock)
    while True:
        try:
            return fn()
        except Exception as error:
            if (delay := schedule.after(error)) is None:
                raise
        sleep(delay)


async def retry_async(
    fn: Callable[[], Awaitable[T]],
    *,
    transient: Transient,
    backoff: Backoff,
    attempts: int | None = None,
    budget_s: float | None = None,
    on_retry: OnRetry | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """:func:`retry_call` for a coroutine function; waits with ``sleep`` (default ``asyncio.sleep``,
    imported here: a process that never awaits does not load asyncio)."""
    if sleep is None:
        import asyncio

        sleep = asyncio.sleep
    schedule = _Schedule(transient, backoff, attempts, budget_s, on_retry, clock)
    while True:
        try:
            return await fn()
        except Exception as error:
            if (delay := schedule.after(error)) is None:
                raise
        await sleep(delay)
