"""A real uvicorn server over an app, on a free loopback port, in a thread: for the tests that need
real HTTP (keep-alive connections, MCP's Streamable HTTP, a browser, clients in threads)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(app: Any, *, log_level: str = "warning") -> Iterator[str]:
    """``app`` served until the block ends; its base URL (``http://127.0.0.1:PORT``)."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(3_000):  # a bounded wait for the server, not a timing check
        if server.started or not thread.is_alive():
            break
        time.sleep(0.01)
    assert server.started, "the server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
