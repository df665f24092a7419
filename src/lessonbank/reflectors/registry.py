"""Which reflectors exist, by name: the four built-ins, and any a user registers.

Each bank gets its own instances (``build_reflectors()``), so a reflector may keep state
without it leaking between banks. Registering is explicit and idempotent per name; nothing
registers itself on import.

    from lessonbank.reflectors.registry import register_reflector
    register_reflector("postmortem", PostmortemReflector)   # then LESSONBANK_ROUTE_SIGNAL=postmortem
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from lessonbank.errors import ConfigError
from lessonbank.reflectors.base import Reflector
from lessonbank.reflectors.dual import DualReflector
from lessonbank.reflectors.insight import InsightReflector
from lessonbank.reflectors.lesson import LessonReflector
from lessonbank.reflectors.reflexion import ReflexionReflector

ReflectorFactory = Callable[[], Reflector]

BUILT_IN_REFLECTORS: dict[str, ReflectorFactory] = {
    "lesson": LessonReflector,
    "insight": InsightReflector,
    "dual": DualReflector,
    "reflexion": ReflexionReflector,
}

_registry: dict[str, ReflectorFactory] = dict(BUILT_IN_REFLECTORS)
_lock = threading.Lock()


def register_reflector(name: str, factory: ReflectorFactory, *, replace: bool = False) -> None:
    """Make ``name`` available to every bank built afterwards.

    ``factory`` builds one reflector (a class works); its ``name`` must be ``name``. Registering a
    name that exists is a ``ConfigError`` unless ``replace=True`` (which also replaces a built-in).
    """
    if not name or not name.strip() or name != name.strip() or name == "off":
        raise ConfigError(f"reflector name {name!r} is not usable; use a non-empty word other than 'off'")
    with _lock:
        if name in _registry and not replace and _registry[name] is not factory:
            raise ConfigError(
                f"reflector {name!r} is already registered; pass replace=True to register_reflector to replace it"
            )
        _registry[name] = factory


def unregister_reflector(name: str) -> None:
    """Forget a registered reflector (a built-in comes back as it was shipped)."""
    with _lock:
        if name in BUILT_IN_REFLECTORS:
            _registry[name] = BUILT_IN_REFLECTORS[name]
        else:
            _registry.pop(name, None)


def registered_reflectors() -> tuple[str, ...]:
    """The names a route or a manual reflection may use, sorted."""
    with _lock:
        return tuple(sorted(_registry))


def build_reflectors() -> dict[str, Reflector]:
    """One fresh instance of every registered reflector, by name, for one bank."""
    with _lock:
        factories = dict(_registry)
    reflectors: dict[str, Reflector] = {}
    for name, factory in factories.items():
        reflector = factory()
        if reflector.name != name:
            raise ConfigError(
                f"reflector registered as {name!r} calls itself {reflector.name!r}; "
                "register it under its own name"
            )
        reflectors[name] = reflector
    return reflectors
