"""A real ``lessonbank serve`` process for the benchmarks that talk to it over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx


def environment(home: Path) -> dict[str, str]:
    """This environment without any ``LESSONBANK_*`` setting, its state under ``home``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("LESSONBANK_")}
    env["LESSONBANK_HOME"] = str(home)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(db: str, home: Path, env: dict[str, str] | None = None, processes: int = 1) -> Iterator[str]:
    """``lessonbank serve`` over ``db`` (no API key: loopback only, no in-process worker), started
    and answering; its base URL. Stopped on exit. ``env``: more settings (``LESSONBANK_LLM``…);
    ``processes``: ``serve --processes``."""
    port = free_port()
    argv = [sys.executable, "-m", "lessonbank.cli", "--db", db, "serve", "--port", str(port), "--no-worker"]
    argv += ["--processes", str(processes)]
    server = subprocess.Popen(argv, env={**environment(home), **(env or {})}, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"lessonbank serve did not start (exit {server.poll()})") from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


class RawClient:
    """One keep-alive HTTP/1.1 connection that sends pre-encoded JSON requests: a load generator
    costing tens of microseconds per request, so the figures are of the server, not of the client
    (an ``httpx.AsyncClient`` request costs a few milliseconds of the same two cores)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> RawClient:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Send one request; its status and its JSON answer (None for an empty one)."""
        assert self._reader is not None and self._writer is not None, "use RawClient in `async with`"
        data = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self._writer.write(head.encode() + data)
        status_line = await self._reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split()[1])
        length = 0
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        answer = await self._reader.readexactly(length) if length else b""
        return status, json.loads(answer) if answer else None
