"""Job leases shared by every store's queue: who holds a lease, and whether that holder still lives.

The ports (protocols and records) live in :mod:`lessonbank.ports`, the write, filter and sort
rules in :mod:`lessonbank.lessons`; both are re-exported here for older imports.
"""

from __future__ import annotations

import os
import socket

from lessonbank.errors import LeaseLostError
from lessonbank.lessons import CONFIDENCE_STEP, episode_credit, pick_near_duplicate
from lessonbank.ports import (
    NEAR_DUPLICATE_JACCARD,
    Candidate,
    LessonQuery,
    LessonSort,
    Store,
    StoreStats,
    VectorChanges,
    WriteResult,
)

__all__ = [
    "CONFIDENCE_STEP",
    "NEAR_DUPLICATE_JACCARD",
    "Candidate",
    "LeaseLostError",
    "LessonQuery",
    "LessonSort",
    "Store",
    "StoreStats",
    "VectorChanges",
    "WriteResult",
    "episode_credit",
    "parse_owner",
    "pick_near_duplicate",
    "pid_alive",
    "worker_owner",
]


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
