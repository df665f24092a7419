"""Graph nodes around a model node: lessons into the state before it, the run's outcome recorded after.

``context_node`` writes the context block (text) and the ids of the lessons it holds into the state;
``record_node`` records the run as an episode with those ids (``context_ids``), so its outcome
credits or blames exactly the lessons that were injected, and a failure is reflected on in the
background like any episode. Both return a coroutine function for an ``AsyncLessonBank`` and a plain
function for a ``LessonBank``; neither waits for an LLM.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from lessonbank.errors import InputError

State = Mapping[str, Any]
TaskOf = str | Callable[[State], str]
OUTCOME_FIELDS = (
    "status",
    "error",
    "output",
    "attempt",
    "reward",
    "duration_s",
    "importance",
    "signals",
    "tags",
)


def task_text(state: State, task: TaskOf) -> str:
    """The task a run is about: ``task(state)``, else ``state[task]``, else the last human message."""
    text = task(state) if callable(task) else state.get(task)
    if text is None and not callable(task):
        text = _last_human_message(state.get("messages"))
    if not isinstance(text, str) or not text.strip():
        where = (
            "task(state)" if callable(task) else f"state[{task!r}] (or a human message in state['messages'])"
        )
        raise InputError(f"no task text in the graph state: {where} must be a non-empty string", field="task")
    return text


def _last_human_message(messages: object) -> str | None:
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        role = message.get("role") if isinstance(message, Mapping) else getattr(message, "type", None)
        content = (
            message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
        )
        if role in ("human", "user") and isinstance(content, str):
            return content
    return None


def default_outcome(state: State) -> dict[str, Any]:
    """The episode fields a state holds (``error``, ``output``, ``status``, ``reward``, …; None left out):
    a state with an ``error`` is a failure unless it says otherwise."""
    return {name: state[name] for name in OUTCOME_FIELDS if state.get(name) is not None}


def context_node(
    bank: Any,
    *,
    task: TaskOf = "task",
    context_key: str = "lessons",
    ids_key: str = "lesson_ids",
    budget_tokens: int = 800,
    agent: str | None = None,
    task_type: str | None = None,
) -> Callable[[State], Any]:
    """A node that puts the bank's context block for the state's task in ``state[context_key]``
    (text, never over ``budget_tokens``) and the injected lesson ids in ``state[ids_key]``.

    Add both keys to the graph's state schema, and put ``state[context_key]`` in the model's prompt."""

    def update(block: Any) -> dict[str, Any]:
        return {context_key: block.text, ids_key: list(block.lesson_ids)}

    kwargs: dict[str, Any] = {"budget_tokens": budget_tokens, "agent": agent, "task_type": task_type}
    if inspect.iscoroutinefunction(bank.context):

        async def acontext(state: State) -> dict[str, Any]:
            return update(await bank.context(task_text(state, task), **kwargs))

        return acontext

    def context(state: State) -> dict[str, Any]:
        return update(bank.context(task_text(state, task), **kwargs))

    return context


def record_node(
    bank: Any,
    *,
    task: TaskOf = "task",
    ids_key: str = "lesson_ids",
    outcome: Callable[[State], Mapping[str, Any]] = default_outcome,
    episode_key: str = "episode_id",
    agent: str | None = None,
    task_type: str | None = None,
) -> Callable[[State], Any]:
    """A node that records the run as an episode (``outcome(state)``: its status, error, output…)
    with the lesson ids ``context_node`` injected, and puts the episode id in ``state[episode_key]``.
    Returns at once: a failure's reflection runs in the bank's worker (``bank.flush()`` waits for it)."""

    def episode(state: State) -> tuple[dict[str, Any], list[str]]:
        fields = dict(outcome(state))
        record = {"task": task_text(state, task), "agent": agent, "task_type": task_type, **fields}
        ids = state.get(ids_key) or []
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise InputError(f"state[{ids_key!r}] must be a list of lesson ids, got {ids!r}", field=ids_key)
        return {name: value for name, value in record.items() if value is not None}, ids

    if inspect.iscoroutinefunction(bank.record):

        async def arecord(state: State) -> dict[str, Any]:
            fields, ids = episode(state)
            return {episode_key: (await bank.record(fields, context_ids=ids)).id}

        return arecord

    def record(state: State) -> dict[str, Any]:
        fields, ids = episode(state)
        return {episode_key: bank.record(fields, context_ids=ids).id}

    return record
