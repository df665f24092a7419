"""A scripted LLM for tests and demos: replies come from a list, every request is recorded."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lessonbank.errors import LLMError
from lessonbank.llm.base import ChatModel, Completion, CompletionRequest, Message, Usage

Reply = str | BaseException | Callable[[Sequence[Message]], str]


@dataclass(frozen=True)
class FakeCall:
    """One request FakeLLM received; fields read as attributes or as keys (``call["messages"]``)."""

    messages: list[Message]
    max_tokens: int | None
    temperature: float | None

    def __getitem__(self, name: str) -> Any:
        if name not in ("messages", "max_tokens", "temperature"):
            raise KeyError(name)
        return getattr(self, name)

    @property
    def prompt(self) -> str:
        """All message contents joined, for assertions on what the model was shown."""
        return "\n\n".join(message["content"] for message in self.messages)


class FakeLLM(ChatModel):
    """Returns scripted ``replies`` in order and records each request in ``calls``.

    A reply may be a string, an exception to raise (e.g. ``LLMTransientError`` to exercise
    retries) or a callable that gets the messages and returns the text. When the script runs
    out, ``default`` (a reply of any of those kinds) answers every further call if given, otherwise an :class:`LLMError` is raised. ``delay_s``
    makes each call take that long, without blocking the event loop.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        delay_s: float = 0.0,
        default: Reply | None = None,
        model: str = "fake:scripted",
    ) -> None:
        self._replies = list(replies)
        self._lock = threading.Lock()
        self.delay_s = delay_s
        self.default = default
        self._model = model
        self.calls: list[FakeCall] = []

    @property
    def model(self) -> str:
        return self._model

    @property
    def remaining(self) -> int:
        return len(self._replies)

    async def request(self, request: CompletionRequest) -> Completion:
        messages = request.messages
        with self._lock:
            self.calls.append(
                FakeCall(
                    [Message(role=m["role"], content=m["content"]) for m in messages],
                    request.max_tokens,
                    request.temperature,
                )
            )
            reply: Reply | None = self._replies.pop(0) if self._replies else self.default
        if self.delay_s:
            import asyncio  # here: importing the package does not load asyncio

            await asyncio.sleep(self.delay_s)
        if reply is None:
            raise LLMError(
                "FakeLLM ran out of scripted replies; pass more replies or a default", provider="fake"
            )
        if isinstance(reply, BaseException):
            raise reply
        text = reply(messages) if callable(reply) else reply
        prompt_chars = sum(len(m["content"]) for m in messages)
        return Completion(
            text=text, usage=Usage(prompt_chars // 4 + 1, len(text) // 4 + 1), model=self._model
        )
