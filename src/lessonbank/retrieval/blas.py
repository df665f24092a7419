"""NumPy's BLAS held to one thread around small products.

OpenBLAS wakes its worker threads for every product it deems big enough. On a busy machine waking
them costs more than the product itself: a 12-token MiniLM query went from ~5 ms to ~400 ms, and a
scan of a million 256-dimension vectors from 17 to 40 ms at p50 (81 ms at p99). Everything here runs
as NumPy chooses when threadpoolctl is not installed.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def blas_controller() -> Any:
    """threadpoolctl's controller for NumPy's BLAS, or None when threadpoolctl is not installed."""
    try:
        threadpoolctl = importlib.import_module("threadpoolctl")
    except ImportError:
        return None
    return threadpoolctl.ThreadpoolController()


_held = threading.Lock()
_holders = 0
_limiter: Any = None


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """A context in which BLAS products run on the calling thread only.

    BLAS's thread count is one setting for the whole process, so concurrent holders share one limit:
    the first sets it and the last restores it (nested limits each restoring what they found would
    leave BLAS on one thread for good when two threads leave out of order)."""
    global _holders, _limiter
    controller = blas_controller()
    if controller is None:
        yield
        return
    with _held:
        if _holders == 0:
            _limiter = controller.limit(limits=1, user_api="blas")
        _holders += 1
    try:
        yield
    finally:
        with _held:
            _holders -= 1
            if _holders == 0:
                _limiter.restore_original_limits()
                _limiter = None
