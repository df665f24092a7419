"""What every service shares: the store, the namespace it serves, the settings and the clock.

One :class:`Scope` per bank, handed to each service, so a change of settings (the CLI tunes the
worker's concurrency before starting it) is seen by all of them. Also the argument checks the
services share, so each rejects a bad argument with the same words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from lessonbank.errors import InputError
from lessonbank.ports import Store
from lessonbank.settings import Settings


@dataclass
class Scope:
    """The store and namespace a bank serves, with its settings and its clock (Unix seconds)."""

    store: Store
    namespace: str
    settings: Settings
    clock: Callable[[], float]

    def now(self) -> datetime:
        """The clock as a datetime: every record the bank stamps uses it, so tests can move time."""
        return datetime.fromtimestamp(self.clock(), UTC)


class Scoped(Protocol):
    """Anything that names a store and the namespace it serves (a bank, or its :class:`Scope`)."""

    @property
    def store(self) -> Store: ...

    @property
    def namespace(self) -> str: ...


def check_text_arg(value: object, name: str) -> None:
    """Refuse a non-string or a string that is not valid UTF-8, naming the argument."""
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string, got {type(value).__name__}", field=name)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{name} is not valid UTF-8 (undecodable byte at position {exc.start})", field=name
        ) from None


def check_count(value: object, name: str, *, minimum: int = 0) -> None:
    """Refuse anything but a whole number ≥ ``minimum`` (a bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{name} must be a whole number ≥ {minimum}, got {value!r}", field=name)
