"""Job leases shared by every store's queue: who holds a lease, and whether that holder still lives.

A lease owner is ``host@pid:random``; a queue that finds a lease held by a process of its own
host that no longer runs takes the job back at once instead of waiting for the lease to expire.
"""

from __future__ import annotations

import os
import socket

__all__ = ["parse_owner", "pid_alive", "worker_owner"]


def worker_owner() -> str:
    """A lease owner id that says which host and process holds the lease."""
    return f"{socket.gethostname()}@{os.getpid()}:{os.urandom(4).hex()}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) still answers signal 0 but runs nothing.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True


def parse_owner(owner: str) -> tuple[str, int | None]:
    """The host and process id encoded in a lease owner by :func:`worker_owner`."""
    host, _, rest = owner.rpartition("@")
    pid_text = rest.split(":", 1)[0]
    return host, int(pid_text) if pid_text.isdigit() else None
