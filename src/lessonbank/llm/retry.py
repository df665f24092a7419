"""Retry wrapper: transient provider errors (429, 5xx, timeouts) are retried with backoff."""

from __future__ import annotations

import logging

from lessonbank.errors import LLMTransientError
from lessonbank.llm.base import LLM, ChatModel, Completion, CompletionRequest
from lessonbank.retry import Backoff, retry_async

log = logging.getLogger("lessonbank.llm")


class RetryingLLM(ChatModel):
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

    async def request(self, request: CompletionRequest) -> Completion:
        def announce(exc: BaseException, attempt: int, delay: float) -> None:
            log.warning(
                "%s failed (%s); retry %d/%d in %.1fs", self.model, exc, attempt, self.attempts - 1, delay
            )

        return await retry_async(
            lambda: request.send(self.inner),
            transient=(LLMTransientError,),
            backoff=Backoff(base_s=self.base_delay_s, max_s=self.max_delay_s, factor=2.0, jitter=0.2),
            attempts=self.attempts,
            on_retry=announce,
        )
