"""LessonBank (:mod:`.sync`) and AsyncLessonBank (:mod:`.aio`): two thin facades over one bank's
services (:mod:`lessonbank.services`), sharing one constructor (:mod:`.base`).

Their operations are written once, as AsyncLessonBank's coroutines in :mod:`.aio`; :mod:`.sync` is
generated from it by ``scripts/unasync.py`` (never edit it by hand). What really differs between the
two (service calls, the worker, closing) is written by hand in :mod:`.flavours`.

``record()`` only validates, redacts and writes the episode with its job in one transaction;
reflection happens in a worker (an asyncio task in a background thread for LessonBank, a
task on the caller's loop for AsyncLessonBank, or a separate ``lessonbank worker``).

The services are synchronous and thread-safe through the store; LessonBank calls them directly
and AsyncLessonBank from a thread, so the two can never drift apart in behaviour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lessonbank.lazy_names import lazy_names

if TYPE_CHECKING:
    from lessonbank.bank.aio import AsyncLessonBank
    from lessonbank.bank.base import BankBase
    from lessonbank.bank.sync import LessonBank

# Each facade loads on first use: a process that opens a LessonBank does not build AsyncLessonBank.
_LAZY = {
    "AsyncLessonBank": "lessonbank.bank.aio",
    "BankBase": "lessonbank.bank.base",
    "LessonBank": "lessonbank.bank.sync",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())


__all__ = ["AsyncLessonBank", "BankBase", "LessonBank"]
