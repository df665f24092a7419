"""The embedded SQLite store: the shared SQL store on the SQLite dialect (one file, no server).

See :mod:`lessonbank.stores.sql.store` for what it keeps and :mod:`lessonbank.stores.sql.sqlite`
for how SQLite does it (WAL, ``BEGIN IMMEDIATE`` writes, FTS5 recall, migrations).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from lessonbank.stores.sql.sqlite import SQLiteDialect
from lessonbank.stores.sql.store import SQLStore

__all__ = ["SQLiteStore"]


class SQLiteStore(SQLStore):
    """SQLite persistence of episodes, lessons, reflections, vectors and jobs.

    ``path`` is a file path, or ``":memory:"`` for a throwaway database removed on close. Workers
    poll SQLite for jobs (``notifier`` is None).
    """

    dialect: SQLiteDialect

    def __init__(
        self, path: str | Path, *, clock: Callable[[], float] = time.time, busy_timeout_s: float = 30.0
    ) -> None:
        super().__init__(SQLiteDialect(path, clock=clock, busy_timeout_s=busy_timeout_s))
        self.path = self.dialect.path
        self.notifier = None
        self.term_vectors = True  # the lessons triggers write them (migration 6)
