"""Retry wrapper: transient provider errors (429, 5xx, timeouts) are retried with backoff."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence

from lessonbank.errors import LLMTransientError
from lessonbank.llm.base import LLM, Completion, Message

log = logging.getLogger("lessonbank.llm")


class RetryingLLM:
    """Wraps an LLM; retries :class:`LLMTransientError` up to ``attempts`` times in all.

    Delays grow ``base_delay_s`` × 2ⁿ with ±20 % jitter, capped at ``max_delay_s``. Other
    errors pass through at once: a bad key or a bad request does not get better by waiting.
    """

    def __init__(
        self, inner: LLM, *, attempts: int = 3, base_delay_s: float = 0.5, max_delay_s: float = 8.0
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.inner = inner
        self.attempts = attempts
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s

    @property
    def model(self) -> str:
        return self.inner.model

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        for attempt in range(1, self.attempts + 1):
            try:
                return await self.inner.complete(messages, max_tokens=max_tokens, temperature=temperature)
            except LLMTransientError as exc:
                if attempt == self.attempts:
                    raise
                delay = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
                delay *= random.uniform(0.8, 1.2)
                log.warning(
                    "%s failed (%s); retry %d/%d in %.1fs", self.model, exc, attempt, self.attempts - 1, delay
                )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")
