"""What the server stores share about their connection: lessonbank's own URL options split from
the driver's, passwords masked in messages, connection errors retried for a time budget.

``redis://:secret@host:6379/0?prefix=a:&retry_s=5`` → the driver gets ``redis://:secret@host:6379/0``,
lessonbank gets ``{"prefix": "a:", "retry_s": "5"}``; messages show ``redis://:***@host:6379/0``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import ClassVar, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lessonbank.errors import StoreError
from lessonbank.retry import Backoff, retry_call

T = TypeVar("T")
log = logging.getLogger("lessonbank.stores")
# Connection retries: 50 ms doubling to 1 s, no jitter (one client, nothing to spread out).
CONNECTION_BACKOFF = Backoff(0.05, 1.0, jitter=0.0)


def split_options(
    url: str, options: Collection[str], *, schemes: Mapping[str, str] | None = None
) -> tuple[str, dict[str, str]]:
    """The driver's URL without the query ``options`` lessonbank reads, and those options.

    ``schemes`` renames schemes the driver does not know (``postgres`` → ``postgresql``)."""
    parts = urlsplit(url)
    if schemes and parts.scheme in schemes:
        parts = parts._replace(scheme=schemes[parts.scheme])
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {key: value for key, value in query if key in options}
    rest = [(key, value) for key, value in query if key not in options]
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def redacted(url: str) -> str:
    """``url`` fit for messages and logs: the password masked, the query left out."""
    parts = urlsplit(url)
    if parts.password:
        parts = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@"))
    return urlunsplit(parts._replace(query=""))


class RetryBudget:
    """Retries a call on connection errors with capped exponential backoff for ``budget_s`` seconds.

    After the budget the caller gets a :class:`StoreError` naming the server and the last error.
    Only calls that are safe to repeat are wrapped (writes are idempotent or checked by id).

    :attr:`fail_fast` (process-wide, off by default) makes one attempt whatever the budget: the
    interactive CLI commands set it, so a wrong URL is one error line, not a minute of retries;
    servers and workers leave it off and ride out a restarting database.
    """

    fail_fast: ClassVar[bool] = False

    def __init__(
        self, what: str, transient: tuple[type[BaseException], ...], *, budget_s: float = 15.0
    ) -> None:
        self.what = what
        self.transient = transient
        self.budget_s = budget_s

    def call(self, fn: Callable[[], T]) -> T:
        attempts = 1
        if RetryBudget.fail_fast:
            try:
                return fn()
            except self.transient as exc:
                raise StoreError(
                    f"{self.what} is unreachable ({type(exc).__name__}: {_one_line(exc)}); "
                    "check that the server is up and the URL is right"
                ) from exc

        def retrying(exc: BaseException, retry: int, delay: float) -> None:
            nonlocal attempts
            attempts = retry + 1
            log.warning("%s: %s; retrying in %.2fs", self.what, _one_line(exc), delay)

        try:
            return retry_call(
                fn,
                transient=self.transient,
                backoff=CONNECTION_BACKOFF,
                budget_s=self.budget_s,
                on_retry=retrying,
            )
        except self.transient as exc:
            raise StoreError(
                f"{self.what} is unreachable after {attempts} attempts over {self.budget_s:g}s "
                f"({type(exc).__name__}: {_one_line(exc)}); check that the server is up and the URL is right"
            ) from exc


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())  # libpq errors span lines
