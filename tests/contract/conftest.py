"""The contract suite's backends: every test here runs on SQLite, Redis, PostgreSQL and the
in-memory test double.

Each test gets its own Redis key prefix, PostgreSQL schema or named memory database, removed
afterwards, so tests never see each other's data. A server that is not running skips its tests
with the reason, unless ``LESSONBANK_REQUIRE_SERVICES=1`` (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lessonbank.stores import Store, open_store
from lessonbank.stores.memory import drop_database

REDIS_URL = os.environ.get("LB_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get("LB_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")
BACKENDS = ("sqlite", "redis", "postgres", "memory")


class Clock:
    """A store clock tests move by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def require(backend: str) -> None:
    """Skip (or, when services are required, fail) unless ``backend``'s server answers."""
    if backend in ("sqlite", "memory"):
        return
    target = {"redis": ("127.0.0.1", 6379), "postgres": ("127.0.0.1", 5432)}[backend]
    url = REDIS_URL if backend == "redis" else POSTGRES_URL
    missing = None
    try:
        __import__("redis" if backend == "redis" else "psycopg")
    except ImportError:
        missing = f"{backend} client library not installed (pip install 'lessonbank[{backend}]')"
    if missing is None and not _reachable(*target):
        missing = f"no {backend} server at {url}"
    if missing is not None:
        if os.environ.get("LESSONBANK_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{missing}, and LESSONBANK_REQUIRE_SERVICES=1")
        pytest.skip(missing)


def drop_redis_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    for start in range(0, len(keys), 500):
        client.delete(*keys[start : start + 500])
    client.close()


def drop_postgres_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    require(name)
    return name


@pytest.fixture
def store_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL on ``backend``, cleaned up after the test."""
    tag = uuid.uuid4().hex[:12]
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'bank.db'}"
    elif backend == "memory":
        # A named database: every store the test opens on it shares it, as they would share a server.
        yield f"memory://lbtest{tag}"
        drop_database(f"lbtest{tag}")
    elif backend == "redis":
        prefix = f"lbtest{tag}:"
        yield f"{REDIS_URL}?prefix={prefix}"
        drop_redis_prefix(prefix)
    else:
        schema = f"lbtest_{tag}"
        yield f"{POSTGRES_URL}?schema={schema}"
        drop_postgres_schema(schema)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_url(clock: Clock) -> Iterator[Callable[[str], Store]]:
    """Opens stores on the test clock and closes them all afterwards."""
    opened: list[Store] = []

    def opener(url: str) -> Store:
        store = open_store(url, clock=clock)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


@pytest.fixture
def store(store_url: str, open_url: Callable[[str], Store]) -> Store:
    return open_url(store_url)
