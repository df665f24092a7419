"""``serve --processes N`` spreads connections over its processes: clients that connect at once are
not all handed to the first process to wake (each process listens on its own socket of one
SO_REUSEPORT group on Linux), and each of them answers records."""

from __future__ import annotations

import select
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.test_scale_out import children_of, eventually, serve

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the connections are read from /proc"),
]

CLIENTS = 40
RECORD = b'{"episode": {"task": "renew the certificate", "status": "success"}}'


def socket_inodes(pid: int) -> set[int]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(int(target[8:-1]))
    return found


def established_on(port: int) -> set[int]:
    """Inodes of the established TCP connections whose local end is ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                found.add(inode)
    return found


def connect_at_once(port: int) -> list[socket.socket]:
    """``CLIENTS`` connections to ``port``, their connects sent together (as a load balancer or a
    pool of agents starting does), each then blocking."""
    connections = []
    for _ in range(CLIENTS):
        conn = socket.socket()
        conn.setblocking(False)
        conn.connect_ex(("127.0.0.1", port))
        connections.append(conn)
    for conn in connections:
        select.select([], [conn], [], 30)
        conn.setblocking(True)
    return connections


def test_clients_connecting_at_once_are_spread_over_the_processes(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    pids: list[int] = []
    with serve(db, tmp_path / "home", "--processes", "2", pids=pids) as url:
        (child,) = eventually(lambda: children_of(pids[0]) or None)
        port = urlsplit(url).port
        assert port is not None
        connections = connect_at_once(port)
        try:
            for conn in connections:  # one record on each, answered: the connection was accepted
                conn.sendall(
                    b"POST /api/v1/ns/default/episodes HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(RECORD), RECORD)
                )
            for conn in connections:
                assert conn.recv(65536).startswith(b"HTTP/1.1 201 ")
            open_here = established_on(port)
            held = {pid: len(socket_inodes(pid) & open_here) for pid in (pids[0], child)}
        finally:
            for conn in connections:
                conn.close()
    assert sum(held.values()) == CLIENTS
    # Spread by a hash of each connection: each process holds some (fewer than 8 of 40 for one of
    # two processes is a 1-in-25,000 draw), where one shared socket gave one process nearly all.
    assert min(held.values()) >= 8, held
