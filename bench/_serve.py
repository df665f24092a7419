"""A real ``lessonbank serve`` process for the benchmarks that talk to it over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
def serving(db: str, home: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """``lessonbank serve`` over ``db`` (no API key: loopback only, no in-process worker), started
    and answering; its base URL. Stopped on exit. ``env``: more settings (``LESSONBANK_LLM``…)."""
    port = free_port()
    argv = [sys.executable, "-m", "lessonbank.cli", "--db", db, "serve", "--port", str(port), "--no-worker"]
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
