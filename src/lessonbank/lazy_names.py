"""Names a package exports but imports only when first used (a module ``__getattr__``, PEP 562).

``lessonbank`` and ``lessonbank.bank`` keep ``from lessonbank import LessonBank`` working while a
process that never touches a name never pays for building its module."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, sources: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``: each name of ``sources`` is read from its module
    (``sources[name]``) on first use and kept in the package's ``namespace`` (its ``globals()``), so
    the lookup runs once."""

    def __getattr__(name: str) -> Any:
        if name in sources:
            value = getattr(importlib.import_module(sources[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *sources})

    return __getattr__, __dir__
