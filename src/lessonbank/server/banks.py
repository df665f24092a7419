"""The banks a server serves: one :class:`~lessonbank.LessonBank` per namespace, opened on first use
over the configured store, closed with the server.

Every request names its namespace; the server never lets one namespace's bank answer for another
(ids never cross namespaces in the stores either). ``bank_options`` are passed to every bank (an
``llm`` or ``embedder`` object in tests; strings come from the settings).
"""

from __future__ import annotations

import threading
from typing import Any

from lessonbank.bank import LessonBank
from lessonbank.errors import InputError
from lessonbank.models import namespace_problem
from lessonbank.settings import Settings


class Banks:
    """One open bank per namespace, shared by every request and thread of the server."""

    def __init__(self, settings: Settings, **bank_options: Any) -> None:
        self.settings = settings
        self.bank_options = bank_options
        self._banks: dict[str, LessonBank] = {}
        self._lock = threading.Lock()

    def get(self, namespace: str) -> LessonBank:
        check_namespace(namespace)
        with self._lock:
            bank = self._banks.get(namespace)
            if bank is None:
                bank = LessonBank(settings=self.settings, namespace=namespace, **self.bank_options)
                self._banks[namespace] = bank
            return bank

    def opened(self, namespace: str) -> LessonBank | None:
        """The bank of ``namespace`` if it is open already (never opens one, so never blocks long)."""
        with self._lock:
            return self._banks.get(namespace)

    def close(self) -> None:
        with self._lock:
            banks, self._banks = list(self._banks.values()), {}
        for bank in banks:
            bank.close()


def check_namespace(namespace: object) -> str:
    """``namespace`` if it may name a namespace (the rule of :func:`~lessonbank.models.namespace_problem`,
    which the bank's settings apply too), else :class:`InputError`, so a request gets a 422, not a 503."""
    problem = namespace_problem(namespace)
    if problem is not None:
        shown = repr(namespace)[:80]
        raise InputError(f"namespace {shown} {problem}", field="namespace")
    assert isinstance(namespace, str)
    return namespace
