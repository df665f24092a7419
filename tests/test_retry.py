"""The one retry mechanism: backoff shape, attempt and time budgets, the transient predicate."""

from __future__ import annotations

import asyncio
import random

import pytest

from lessonbank.errors import LLMError, LLMTransientError
from lessonbank.retry import Backoff, retry_async, retry_call


def test_backoff_grows_caps_and_jitters_within_bounds() -> None:
    plain = Backoff(base_s=1.0, max_s=5.0, jitter=0.0)
    assert [plain.delay(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    jittered = Backoff(base_s=1.0, max_s=300.0, factor=2.0, jitter=0.2)
    delays = [jittered.delay(3, random.Random(seed)) for seed in range(50)]
    assert all(3.2 <= d <= 4.8 for d in delays) and len(set(delays)) > 1


class Flaky:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def test_transient_errors_are_retried_until_success_with_each_retry_announced() -> None:
    flaky = Flaky([LLMTransientError("429"), LLMTransientError("503")])
    slept: list[float] = []
    seen: list[tuple[str, int, float]] = []
    result = retry_call(
        flaky,
        transient=(LLMTransientError,),
        backoff=Backoff(base_s=0.5, max_s=8.0, jitter=0.0),
        attempts=3,
        on_retry=lambda error, n, delay: seen.append((str(error), n, delay)),
        sleep=slept.append,
    )
    assert result == "ok" and flaky.calls == 3
    assert slept == [0.5, 1.0] and seen == [("429", 1, 0.5), ("503", 2, 1.0)]


def test_the_last_transient_error_is_raised_when_attempts_run_out() -> None:
    flaky = Flaky([LLMTransientError(str(n)) for n in range(5)])
    with pytest.raises(LLMTransientError, match="2"):
        retry_call(
            flaky, transient=(LLMTransientError,), backoff=Backoff(0.0, 0.0), attempts=3, sleep=lambda _: None
        )
    assert flaky.calls == 3


def test_other_errors_pass_through_at_once_and_a_predicate_decides() -> None:
    flaky = Flaky([LLMError("bad key")])
    with pytest.raises(LLMError, match="bad key"):
        retry_call(flaky, transient=(LLMTransientError,), backoff=Backoff(0.0, 0.0), sleep=lambda _: None)
    assert flaky.calls == 1
    flaky = Flaky([OSError("reset"), OSError("reset")])
    retry_call(flaky, transient=lambda e: "reset" in str(e), backoff=Backoff(0.0, 0.0), sleep=lambda _: None)
    assert flaky.calls == 3


def test_a_time_budget_stops_before_a_retry_that_would_end_past_it() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    flaky = Flaky([ConnectionError("down")] * 20)
    with pytest.raises(ConnectionError):
        retry_call(
            flaky,
            transient=(ConnectionError,),
            backoff=Backoff(base_s=0.05, max_s=1.0, jitter=0.0),
            budget_s=2.0,
            sleep=sleep,
            clock=lambda: now[0],
        )
    assert now[0] == pytest.approx(0.05 + 0.1 + 0.2 + 0.4 + 0.8)  # the next 1.0 s would pass 2.0 s
    assert flaky.calls == 6


def test_the_async_form_retries_the_same_way() -> None:
    flaky = Flaky([LLMTransientError("429")])
    slept: list[float] = []

    async def call() -> str:
        return flaky()

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    result = asyncio.run(
        retry_async(
            call,
            transient=(LLMTransientError,),
            backoff=Backoff(0.5, 8.0, jitter=0.0),
            attempts=2,
            sleep=sleep,
        )
    )
    assert result == "ok" and slept == [0.5]
    with pytest.raises(ValueError, match="at least 1"):
        asyncio.run(retry_async(call, transient=(LLMTransientError,), backoff=Backoff(0.5, 8.0), attempts=0))
