"""Fresh, isolated databases on each backend for the benchmarks (removed afterwards).

Redis gets its own key prefix, PostgreSQL its own schema, SQLite a file in a temporary
folder. ``LB_BENCH_REDIS_URL`` / ``LB_BENCH_POSTGRES_URL`` point at other servers.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

REDIS_URL = os.environ.get("LB_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get("LB_BENCH_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")


def available(backend: str) -> str | None:
    """None when ``backend`` can be used, else why not."""
    if backend == "sqlite":
        return None
    url = REDIS_URL if backend == "redis" else POSTGRES_URL
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 0), timeout=1):
            return None
    except OSError:
        return f"no server at {url}"


def drop_redis_prefix(prefix: str) -> None:
    """Delete every key of a bank's Redis prefix."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{prefix}*", count=5000))
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start : start + 1000])
    client.close()


def drop_schema(schema: str) -> None:
    """Drop a bank's PostgreSQL schema with everything in it."""
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def fresh_url(backend: str, workdir: Path) -> Iterator[str]:
    tag = uuid.uuid4().hex[:10]
    if backend == "sqlite":
        yield f"sqlite:///{workdir / f'bench-{tag}.db'}"
    elif backend == "redis":
        prefix = f"lbbench{tag}:"
        try:
            yield f"{REDIS_URL}?prefix={prefix}"
        finally:
            drop_redis_prefix(prefix)
    else:
        schema = f"lbbench_{tag}"
        try:
            yield f"{POSTGRES_URL}?schema={schema}"
        finally:
            drop_schema(schema)
