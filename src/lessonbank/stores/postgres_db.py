"""PostgreSQL plumbing: URL options, the connection pool, migrations, retries, job wake-ups.

Invariants:

- Every connection runs in autocommit; writes that must go together run in one explicit
  transaction (``with conn.transaction()``), so nothing is half written.
- The store's tables live in one schema (``?schema=`` in the URL, default ``public``);
  migrations are applied on open under an advisory lock.
- A connection error is retried for the retry budget (``?retry_s=``, default 15 s); after it the
  caller gets a :class:`StoreError`. Retried calls are safe to repeat: a write either
  committed or did not, and writes are keyed by id.
- A job made runnable sends ``NOTIFY lessonbank_jobs`` in its transaction (delivered on
  commit); idle workers LISTEN and wake at once instead of waiting for their next poll.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lessonbank.errors import ConfigError, StoreError
from lessonbank.stores.postgres_schema import MIGRATIONS
from lessonbank.stores.shared import RetryBudget

try:
    import psycopg
    from psycopg import sql
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError(
        "the PostgreSQL backend needs psycopg 3 and psycopg-pool: pip install 'lessonbank[postgres]'"
    ) from exc

Clock = Callable[[], float]
CHANNEL = "lessonbank_jobs"
_OPTIONS = ("schema", "pool_min", "pool_max", "retry_s")


def parse_url(url: str) -> tuple[str, dict[str, str]]:
    """The libpq URL without lessonbank's own query options, and those options."""
    parts = urlsplit(url)
    if parts.scheme == "postgres":
        parts = parts._replace(scheme="postgresql")
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {key: value for key, value in query if key in _OPTIONS}
    rest = [(key, value) for key, value in query if key not in _OPTIONS]
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        parts = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@"))
    return urlunsplit(parts._replace(query=""))


class PostgresDatabase:
    """A pool of connections to one schema of one PostgreSQL database."""

    def __init__(self, url: str, *, clock: Clock = time.time) -> None:
        self.url = url
        self.clock = clock
        self.conninfo, options = parse_url(url)
        self.schema = options.get("schema", "public")
        if not self.schema or len(self.schema) > 63:
            raise ConfigError(f"bad schema name {self.schema!r} in {redacted(url)}")
        try:
            pool_min = int(options.get("pool_min", "1"))
            pool_max = int(options.get("pool_max", "10"))
            retry_s = float(options.get("retry_s", "15"))
        except ValueError as exc:
            raise ConfigError(f"bad option in {redacted(url)}: {exc}") from exc
        self._retry = RetryBudget(
            f"PostgreSQL at {redacted(url)}",
            (psycopg.OperationalError, PoolTimeout),
            budget_s=retry_s,
        )
        self._listeners: list[Callable[[], None]] = []
        self._listen_lock = threading.Lock()
        self._listen_thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._retry.call(self._migrate)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.conninfo,
            min_size=min(pool_min, pool_max),
            max_size=pool_max,
            kwargs={"autocommit": True},
            configure=self._configure,
            check=ConnectionPool.check_connection,
            open=False,
            name="lessonbank",
            timeout=self._retry.budget_s,
        )
        self._pool.open()

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))

    def _migrate(self) -> None:
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"cannot open PostgreSQL at {redacted(self.url)}: {exc}") from exc
        with conn:
            conn.execute("SELECT pg_advisory_lock(hashtext('lessonbank:' || %s))", (self.schema,))
            try:
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
                self._configure(conn)
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(version integer PRIMARY KEY, applied_at double precision NOT NULL)"
                )
                row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
                version = int(row[0]) if row else 0
                if version > len(MIGRATIONS):
                    raise StoreError(
                        f"schema {self.schema} was written by a newer lessonbank (version {version}, "
                        f"this version knows {len(MIGRATIONS)}); upgrade lessonbank"
                    )
                for number in range(version, len(MIGRATIONS)):
                    with conn.transaction():
                        conn.execute(MIGRATIONS[number])
                        conn.execute(
                            "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                            (number + 1, time.time()),
                        )
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtext('lessonbank:' || %s))", (self.schema,))

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        if self._closed.is_set():
            raise StoreError(f"store {redacted(self.url)} is closed")
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction on a pooled connection: committed on success, rolled back on any error."""
        with self._conn() as conn, conn.transaction():
            yield conn

    def _run(self, fn: Callable[[], Any]) -> Any:
        return self._retry.call(fn)

    @staticmethod
    def _notify(conn: psycopg.Connection[Any], namespace: str) -> None:
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, namespace))

    # ----------------------------------------------------------------- wake-ups

    def subscribe_jobs(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (from another thread) whenever a job becomes runnable; returns an unsubscribe."""
        with self._listen_lock:
            self._listeners.append(callback)
            if self._listen_thread is None:
                self._listen_thread = threading.Thread(
                    target=self._listen_loop, name="lessonbank-listen", daemon=True
                )
                self._listen_thread.start()

        def unsubscribe() -> None:
            with self._listen_lock, contextlib.suppress(ValueError):
                self._listeners.remove(callback)

        return unsubscribe

    def _listen_loop(self) -> None:
        while not self._closed.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
                    while not self._closed.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            with self._listen_lock:
                                listeners = list(self._listeners)
                            for listener in listeners:
                                listener()
            except psycopg.Error:
                self._closed.wait(1.0)  # the server went away: listen again once it is back

    def close(self) -> None:
        self._closed.set()
        self._pool.close()
        if self._listen_thread is not None and self._listen_thread is not threading.current_thread():
            self._listen_thread.join(timeout=5)
