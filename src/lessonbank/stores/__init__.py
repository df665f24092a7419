"""Stores, resolved from a database URL in one place (SQLAlchemy's URL convention).

``sqlite:///relative.db``, ``sqlite:////absolute/path.db``, ``sqlite://`` (a throwaway database,
removed on close), or a plain file path; ``redis://host:6379/0`` or ``rediss://`` (needs
``lessonbank[redis]``); ``postgresql://host:5432/db`` or ``postgres://`` (needs
``lessonbank[postgres]``); ``memory://name`` (the in-memory test double). The server backends
are imported only when their URL is used.

SQLite and PostgreSQL are one store (:mod:`lessonbank.stores.sql`) on two dialects; Redis has its
own (:mod:`lessonbank.stores.redis`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lessonbank.errors import ConfigError
from lessonbank.ports import LessonQuery, Store, StoreStats, WriteResult
from lessonbank.stores.sqlite import SQLiteStore

__all__ = ["LessonQuery", "SQLiteStore", "Store", "StoreStats", "WriteResult", "open_store", "sqlite_path"]


def sqlite_path(url: str) -> str:
    """The file path in a ``sqlite:`` URL (``:memory:`` for an in-memory database)."""
    rest = url[len("sqlite:") :]
    if rest in ("", "//", "///:memory:", "//:memory:"):
        return ":memory:"
    if not rest.startswith("///"):
        raise ConfigError(
            f"bad SQLite URL {url!r}: write sqlite:///relative.db or sqlite:////absolute/path.db"
        )
    path = rest[3:]
    if not path:
        raise ConfigError(f"SQLite URL {url!r} names no file")
    return path


def open_store(url: str, *, clock: Callable[[], float] = time.time) -> Store:
    scheme = url.split(":", 1)[0].lower() if "://" in url or url.startswith("sqlite:") else ""
    if scheme == "sqlite":
        return SQLiteStore(sqlite_path(url), clock=clock)
    if scheme == "":
        return SQLiteStore(url, clock=clock)
    if scheme == "memory":
        from lessonbank.stores.memory import MemoryStore

        return MemoryStore.from_url(url, clock=clock)
    if scheme in ("redis", "rediss"):
        try:
            from lessonbank.stores.redis import RedisStore
        except ImportError as exc:
            raise ConfigError(
                f"the Redis backend needs redis-py ({exc}): pip install 'lessonbank[redis]'"
            ) from exc
        return RedisStore(url, clock=clock)
    if scheme in ("postgresql", "postgres"):
        try:
            from lessonbank.stores.postgres import PostgresStore
        except ImportError as exc:
            raise ConfigError(
                f"the PostgreSQL backend needs psycopg 3 and psycopg-pool ({exc}): pip install 'lessonbank[postgres]'"
            ) from exc
        return PostgresStore(url, clock=clock)
    raise ConfigError(
        f"unknown database URL scheme {scheme!r} in {url!r}; use sqlite:///path.db, redis://host:6379/0 or postgresql://host/db"
    )
