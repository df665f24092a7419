"""Reflectors: one episode in, one LLM call, one parsed reflection out.

A reflector is a prompt builder plus a tolerant parser. :func:`reflect` runs one: it redacts
the prompt, calls the model once, parses, and on malformed output makes exactly one repair
call; if that fails too the result is a skip that keeps the raw output for inspection.

Built-in reflectors: :class:`lessonbank.reflectors.lesson.LessonReflector` (seed 004),
:class:`lessonbank.reflectors.insight.InsightReflector` (seed 000),
:class:`lessonbank.reflectors.dual.DualReflector` (seed 003),
:class:`lessonbank.reflectors.reflexion.ReflexionReflector` (seed 001).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Protocol

from lessonbank.errors import ParseError
from lessonbank.llm.base import LLM, Message, Usage
from lessonbank.models import Episode, Lesson
from lessonbank.redact import redact
from lessonbank.reflectors.budget import PROMPT_BUDGET_TOKENS, Field, fit_fields
from lessonbank.text import estimate_tokens


@dataclass
class Parsed:
    """A reflector's parsed answer: either ``skip_reason`` or structured ``fields``."""

    fields: dict[str, Any] = field(default_factory=dict)
    skip_reason: str | None = None


@dataclass
class ReflectorRun:
    """Everything one reflection produced, ready to be written by the store."""

    parsed: Parsed
    raw_output: str
    model: str
    usage: Usage
    llm_calls: int
    error: str | None = None  # set when the output stayed unparseable after the repair call


DEFAULT_REPAIR_HINT = "Answer again in exactly the format the instructions above ask for, and nothing else."


class Reflector(Protocol):
    """What :func:`reflect` runs. A reflector may also set ``repair_hint``: the instruction sent,
    after the parse error, when its first reply is malformed (default :data:`DEFAULT_REPAIR_HINT`).
    Reflectors are looked up by ``name`` in :mod:`lessonbank.reflectors.registry`."""

    name: str
    max_output_tokens: int

    def messages(self, episode: Episode, trigger: str) -> list[Message]:
        """The conversation to send for ``episode``."""
        ...

    def parse(self, text: str) -> Parsed:
        """Parse model output; raise :class:`ParseError` when it is malformed."""
        ...

    def lessons(self, parsed: Parsed, episode: Episode, trigger: str) -> list[Lesson]:
        """The lessons to store for a parsed, non-skip answer."""
        ...


def load_prompt(name: str) -> str:
    return (
        resources.files("lessonbank.reflectors")
        .joinpath("prompts")
        .joinpath(f"{name}.md")
        .read_text("utf-8")
        .strip()
    )


class PromptReflector(ABC):
    """Base of the built-in reflectors: the system prompt is ``prompts/<name>.md`` and the user
    prompt is what :meth:`user_prompt` makes of the episode."""

    name: str

    def __init__(self) -> None:
        self.system_prompt = load_prompt(self.name)

    def messages(self, episode: Episode, trigger: str) -> list[Message]:
        return [
            Message(role="system", content=self.system_prompt),
            Message(role="user", content=self.user_prompt(episode, trigger)),
        ]

    @abstractmethod
    def user_prompt(self, episode: Episode, trigger: str) -> str:
        """The user message for ``episode``, within the reflector's prompt budget."""

    def fit(self, fields: Sequence[Field], render: Callable[[dict[str, str]], str]) -> str:
        """``render`` of ``fields``, cut (see :func:`fit_fields`) so that it and the system prompt
        together stay within :data:`PROMPT_BUDGET_TOKENS`."""
        budget = PROMPT_BUDGET_TOKENS - estimate_tokens(self.system_prompt)
        return fit_fields(fields, render, budget, estimate_tokens)


async def reflect(reflector: Reflector, llm: LLM, episode: Episode, trigger: str) -> ReflectorRun:
    """One LLM call (plus one repair call on malformed output), parsed.

    Secrets are redacted both ways: out of the prompt, and out of the reply (a model may echo
    or invent one), so nothing derived from the reply can store a secret.
    """
    messages = [
        Message(role=m["role"], content=redact(m["content"])) for m in reflector.messages(episode, trigger)
    ]
    completion = await llm.complete(messages, max_tokens=reflector.max_output_tokens, temperature=0.0)
    first_text = redact(completion.text)
    usage = completion.usage
    try:
        return ReflectorRun(reflector.parse(first_text), first_text, completion.model, usage, 1)
    except ParseError as first:
        repair = [
            *messages,
            Message(role="assistant", content=first_text),
            Message(role="user", content=f"Your reply could not be read: {first}. {repair_hint(reflector)}"),
        ]
        second = await llm.complete(repair, max_tokens=reflector.max_output_tokens, temperature=0.0)
        second_text = redact(second.text)
        usage = usage + second.usage
        raw = f"{first_text}\n\n--- repair ---\n\n{second_text}"
        try:
            return ReflectorRun(reflector.parse(second_text), raw, second.model, usage, 2)
        except ParseError as again:
            reason = f"unparseable output after one repair: {again}"
            return ReflectorRun(Parsed(skip_reason=reason), raw, second.model, usage, 2, error=reason)


def repair_hint(reflector: Reflector) -> str:
    """The reflector's own instruction for a second try, or the generic one."""
    hint = getattr(reflector, "repair_hint", None)
    return hint if isinstance(hint, str) and hint.strip() else DEFAULT_REPAIR_HINT
