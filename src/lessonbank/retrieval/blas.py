"""NumPy's BLAS held to one thread around small products.

OpenBLAS wakes its worker threads for every product it deems big enough. On a busy machine waking
them costs more than the product itself: a 12-token MiniLM query went from ~5 ms to ~400 ms, and a
scan of a million 256-dimension vectors from 17 to 40 ms at p50 (81 ms at p99). Everything here runs
as NumPy chooses when threadpoolctl is not installed.
"""

from __future__ import annotations

import contextlib
import importlib
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


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """A context in which BLAS products run on the calling thread only."""
    controller = blas_controller()
    return controller.limit(limits=1, user_api="blas") if controller is not None else contextlib.nullcontext()
