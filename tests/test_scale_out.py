"""Two ``lessonbank serve`` processes over one PostgreSQL database (or one Redis db) behave as one
bank: what is written through one is recalled through the other, without restarting either.

Each server keeps its own in-process indexes; they follow the store's change sequence on every
recall (see docs/how-to/scale-out.md). The checks poll with a generous deadline: they assert what
becomes visible, never how fast.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from lessonbank import RemoteBank
from tests.contract.conftest import POSTGRES_URL, REDIS_URL, drop_postgres_schema, drop_redis_prefix, require

pytestmark = pytest.mark.slow

DEADLINE_S = 30.0  # generous: two servers and the tests share a small machine
T = TypeVar("T")


@pytest.fixture(params=["postgres", "redis"])
def shared_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database both servers open: a PostgreSQL schema or a Redis key prefix."""
    backend: str = request.param
    require(backend)
    tag = uuid.uuid4().hex[:12]
    if backend == "postgres":
        yield f"{POSTGRES_URL}?schema=lbscale_{tag}"
        drop_postgres_schema(f"lbscale_{tag}")
    else:
        yield f"{REDIS_URL}?prefix=lbscale{tag}:"
        drop_redis_prefix(f"lbscale{tag}:")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(db: str, home: Path, *more: str, pids: list[int] | None = None) -> Iterator[str]:
    """A real ``lessonbank serve`` over ``db`` (its own home: nothing shared but the store); its URL.
    ``more``: further ``serve`` options; ``pids`` gets the server's process id."""
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("LESSONBANK_")}
    env["LESSONBANK_HOME"] = str(home)
    argv = [sys.executable, "-m", "lessonbank.cli", "--db", db, "serve", "--port", str(port), "--no-worker"]
    argv += more
    home.mkdir(parents=True, exist_ok=True)
    log = home / "serve.log"
    with log.open("w") as err:
        server = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
    if pids is not None:
        pids.append(server.pid)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                if server.poll() is not None:
                    raise RuntimeError(
                        f"lessonbank serve exited {server.returncode}: {log.read_text()}"
                    ) from None
                if time.monotonic() > deadline:
                    raise RuntimeError("lessonbank serve did not answer within 60 s") from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def eventually(check: Callable[[], T | None]) -> T:
    """``check()``'s first answer that is not None, polled until the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        answer = check()
        if answer is not None:
            return answer
        assert time.monotonic() < deadline, f"not seen within {DEADLINE_S} s"
        time.sleep(0.1)


def recalled_ids(bank: RemoteBank, query: str) -> list[str]:
    return [hit.lesson.id for hit in bank.recall(query, k=10)]


def test_a_lesson_written_through_one_server_is_recalled_through_the_other(
    shared_url: str, tmp_path: Path
) -> None:
    with ExitStack() as stack:
        url_a = stack.enter_context(serve(shared_url, tmp_path / "a"))
        url_b = stack.enter_context(serve(shared_url, tmp_path / "b"))
        a = stack.enter_context(RemoteBank(url_a))
        b = stack.enter_context(RemoteBank(url_b))
        # Both servers have built their indexes before the writes: what follows is kept in step.
        assert (
            recalled_ids(a, "kubernetes rollout canary") == recalled_ids(b, "kubernetes rollout canary") == []
        )

        first = a.add_lesson(
            "When a kubernetes rollout stalls, roll back the canary before scaling", tags=["deploy"]
        )
        eventually(lambda: True if first.id in recalled_ids(b, "kubernetes rollout canary") else None)

        second = b.add_lesson("Pin the terraform provider version before running plan in CI", tags=["infra"])
        eventually(lambda: True if second.id in recalled_ids(a, "terraform provider version") else None)

        # A change to a lesson another server holds in its index: archived through B, gone from A.
        b.archive(first.id, reason="superseded")
        eventually(lambda: True if first.id not in recalled_ids(a, "kubernetes rollout canary") else None)

        # Episodes recorded through both land in one store, and each server lists them all.
        recorded = {a.record({"task": "deploy the api", "status": "failure", "error": "timeout"}).id}
        recorded.add(b.record({"task": "deploy the web app", "status": "success"}).id)
        for bank in (a, b):
            assert recorded <= {row["episode_id"] for row in bank.decisions(limit=50)}


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
def test_serve_processes_share_one_port_and_one_bank(tmp_path: Path) -> None:
    """``serve --processes 2`` over one SQLite file: two server processes answer on one port as one
    bank (every record kept, a lesson added through one is recalled by whichever answers), and
    stopping the server stops both."""
    from concurrent.futures import ThreadPoolExecutor

    from lessonbank import Episode

    db = f"sqlite:///{tmp_path / 'bank.db'}"
    pids: list[int] = []
    with serve(db, tmp_path / "home", "--processes", "2", pids=pids) as url:
        (child,) = eventually(lambda: children_of(pids[0]) or None)
        with RemoteBank(url) as bank:
            lesson = bank.add_lesson("rotate the staging TLS certificate before it expires")

            def record(n: int) -> str:
                # One client each: new connections are spread over both processes by the kernel.
                with RemoteBank(url) as own:
                    return own.record(Episode(task=f"renew certificate {n}", status="success")).id

            with ThreadPoolExecutor(8) as pool:
                recorded = list(pool.map(record, range(40)))
            assert len(set(recorded)) == 40
            stored = {row["episode_id"] for row in bank.decisions(limit=100)}
            assert set(recorded) <= stored
            for _ in range(10):
                with RemoteBank(url) as fresh:
                    assert lesson.id in recalled_ids(fresh, "staging TLS certificate")
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
