"""Outcome attribution: which lessons a context injected, so the next episode credits them.

A context remembers its lesson ids per (agent, task) and per (agent, task_type); ``record()``
takes them when the caller passes no ``context_ids``. Explicit ids always win, and one
injection is credited once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from lessonbank.errors import InputError
from lessonbank.models import MAX_CONTEXT_IDS


class LastContexts:
    """The lesson ids of the last context built per (agent, task) and per (agent, task_type).

    Lets ``record(episode)`` credit the lessons that were injected for that task even when the
    caller does not pass ``context_ids``. Bounded, in-process; explicit ids always win.
    """

    def __init__(self, size: int = 1_024) -> None:
        self.size = size
        self._ids: OrderedDict[tuple[str, str, str], list[str]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _keys(agent: str | None, task: str | None, task_type: str | None) -> list[tuple[str, str, str]]:
        keys = []
        if task:
            keys.append((agent or "", "task", " ".join(task.lower().split())))
        if task_type:
            keys.append((agent or "", "type", task_type))
        return keys

    def remember(
        self, agent: str | None, task: str | None, task_type: str | None, ids: Sequence[str]
    ) -> None:
        remembered = list(ids)  # one list under every key, so taking it by one key forgets it by all
        with self._lock:
            for key in self._keys(agent, task, task_type):
                self._ids[key] = remembered
                self._ids.move_to_end(key)
            while len(self._ids) > self.size:
                self._ids.popitem(last=False)

    def take(self, agent: str | None, task: str | None, task_type: str | None) -> list[str]:
        """The ids remembered for this task (else its task type), forgotten once taken under every key
        they were remembered by: one injection is credited once."""
        with self._lock:
            for key in self._keys(agent, task, task_type):
                ids = self._ids.pop(key, None)
                if ids is not None:
                    for other in [k for k, v in self._ids.items() if v is ids]:
                        del self._ids[other]
                    return list(ids)
        return []


def check_context_ids(value: object) -> list[str]:
    """The lesson ids a caller says were injected, as a list of distinct strings, or an InputError."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InputError(
            f"context_ids must be a list of lesson ids (ContextBlock.lesson_ids), not {type(value).__name__}",
            field="context_ids",
        )
    ids = list(value)
    for index, item in enumerate(ids):
        if not isinstance(item, str) or not item.strip():
            raise InputError(
                f"context_ids[{index}] must be a lesson id (a non-empty string), got {item!r:.60}",
                field="context_ids",
            )
    ids = list(dict.fromkeys(ids))
    if len(ids) > MAX_CONTEXT_IDS:
        raise InputError(
            f"context_ids holds {len(ids)} ids; a context injects far fewer (at most {MAX_CONTEXT_IDS})",
            field="context_ids",
        )
    return ids
