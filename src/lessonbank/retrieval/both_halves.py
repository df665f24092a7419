"""Work over a search's slots on both cores: the slots cut in two halves, one per thread.

A pruned search's cost at a million lessons is mostly adding words' upper bounds into its per-slot
array (:mod:`lessonbank.retrieval.pruning`); each slot's sum depends only on that slot's postings,
so two threads can each add the same words, in the same order, into their own half of the slots and
leave every sum as one thread would, to the bit (``run_halved``). Look-ups and exact scores of many
lessons are each lesson's own too, so each thread takes half the lessons (``map_halved``). The
calling thread takes the first half and one
pool thread the second (numpy releases the interpreter lock while it adds); the call returns once
both are done, whatever either raised, so nothing writes the array after the search moves on.
While the pool thread works for one search, another does both halves itself rather than queue.
Small batches stay on the calling thread (``SPLIT_FROM``): the hand-off would cost more than it
spares.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

SPLIT_FROM = 131_072  # postings added at once from which two threads share them ...
SPLIT_SLOTS = 65_536  # ... over this many slots or more

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_free = threading.Semaphore(1)  # held while the pool thread works for a search


def worth_splitting(postings: int, slots: int) -> bool:
    return postings >= SPLIT_FROM and slots >= SPLIT_SLOTS and (os.cpu_count() or 1) > 1


def run_halved(task: Callable[[int, int], None], slots: int) -> None:
    """``task(first, end)`` for the slots ``0 ≤ slot < slots / 2`` here and the rest on the pool
    thread, at once (both here, in turn, while the pool thread works for another search); ``task``
    must touch only the slots it is given."""
    middle = slots // 2
    other = _submit(task, middle, slots)
    if other is None:
        task(0, middle)
        task(middle, slots)
        return
    try:
        task(0, middle)
    finally:
        other.result()  # waited for even when this half raised


def map_halved(function: Callable[[Any], Any], items: Any) -> Any:
    """``function(items)`` as the two halves of ``items``, one here and one on the pool thread, at
    once, joined in order; ``function`` must compute each item's value from that item alone."""
    middle = len(items) // 2
    other = _submit(function, items[middle:])
    if other is None:
        return function(items)
    try:
        first = function(items[:middle])
    finally:
        second = other.result()  # waited for even when this half raised
    return np.concatenate((first, second))


def _submit(function: Callable[..., Any], *args: Any) -> Future[Any] | None:
    """``function(*args)`` on the pool thread, or None when it is busy with another search's half:
    a search never waits in a queue behind another."""
    if not _free.acquire(blocking=False):
        return None

    def freeing() -> Any:
        try:
            return function(*args)
        finally:
            _free.release()

    try:
        return _the_pool().submit(freeing)
    except BaseException:
        _free.release()
        raise


def _the_pool() -> ThreadPoolExecutor:
    """The one thread that takes second halves (made on first use; searches of several indexes
    queue for it, and none of its tasks waits on another)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lessonbank-halves")
        return _pool


def _forget_pool() -> None:
    """In a forked child: the parent's pool thread does not exist there, so a new one is made."""
    global _pool, _pool_lock, _free
    _pool, _pool_lock, _free = None, threading.Lock(), threading.Semaphore(1)


os.register_at_fork(after_in_child=_forget_pool)
