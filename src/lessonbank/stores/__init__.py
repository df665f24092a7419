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

import importlib
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


# Server stores, imported only when their URL is used: (module, class, backend, what it needs, the
# extra that installs it).
_REDIS = ("lessonbank.stores.redis", "RedisStore", "Redis", "redis-py", "redis")
_POSTGRES = (
    "lessonbank.stores.postgres",
    "PostgresStore",
    "PostgreSQL",
    "psycopg 3 and psycopg-pool",
    "postgres",
)
_SERVER_STORES = {"redis": _REDIS, "rediss": _REDIS, "postgresql": _POSTGRES, "postgres": _POSTGRES}


def _server_store(module: str, name: str, backend: str, needs: str, extra: str) -> Callable[..., Store]:
    try:
        store: Callable[..., Store] = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise ConfigError(
            f"the {backend} backend needs {needs} ({exc}): pip install 'lessonbank[{extra}]'"
        ) from exc
    return store


def open_store(url: str, *, clock: Callable[[], float] = time.time) -> Store:
    scheme = url.split(":", 1)[0].lower() if "://" in url or url.startswith("sqlite:") else ""
    if scheme == "sqlite":
        return SQLiteStore(sqlite_path(url), clock=clock)
    if scheme == "":
        return SQLiteStore(url, clock=clock)
    if scheme == "memory":
        from lessonbank.stores.memory import MemoryStore

        return MemoryStore.from_url(url, clock=clock)
    if scheme in _SERVER_STORES:
        return _server_store(*_SERVER_STORES[scheme])(url, clock=clock)
    raise ConfigError(
        f"unknown database URL scheme {scheme!r} in {url!r}; use sqlite:///path.db, redis://host:6379/0 or postgresql://host/db"
    )
