"""The PostgreSQL store: the shared SQL store on the PostgreSQL dialect, for many agents and workers.

``LessonBank("postgresql://127.0.0.1:5432/test")``; the URL options and invariants are in
:mod:`lessonbank.stores.sql.postgres`. Workers need not poll: the store is its own
:class:`~lessonbank.ports.JobNotifier` (LISTEN/NOTIFY).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lessonbank.stores.sql.postgres import PostgresDialect
from lessonbank.stores.sql.store import SQLStore

__all__ = ["PostgresStore"]


class PostgresStore(SQLStore):
    """PostgreSQL persistence of episodes, lessons, reflections, vectors and jobs."""

    dialect: PostgresDialect

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(PostgresDialect(url, clock=clock))
        self.schema = self.dialect.schema
        self.notifier = self
        self.term_vectors = True  # the dialect writes them with each lesson (migration 5)

    def subscribe_jobs(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (from another thread) whenever a job becomes runnable; returns an unsubscribe."""
        return self.dialect.subscribe_jobs(callback)
