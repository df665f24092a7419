"""A local OpenAI-compatible chat-completions server for the OpenAI Agents SDK adapter's tests and bench.

``POST /v1/chat/completions`` answers from a script: the scripted tool calls first, one per request
(the next one once the previous call's tool result is in the conversation), then a text answer. Every
request body is kept in ``ChatScript.requests``, so a test can read the system message a model saw.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request


class ChatScript:
    """The replies: ``tool_calls`` as ``(tool name, arguments)`` in order, then ``answer``."""

    def __init__(self, tool_calls: Sequence[tuple[str, dict[str, Any]]] = (), answer: str = "done") -> None:
        self.tool_calls = list(tool_calls)
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def system_messages(self) -> list[str]:
        """The system message of each request, in order ("" when a request had none)."""
        return [
            next((str(m.get("content")) for m in body["messages"] if m.get("role") == "system"), "")
            for body in self.requests
        ]

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(body)
            number = next(self._ids)
        done = sum(1 for message in body.get("messages", []) if message.get("role") == "tool")
        if body.get("tools") and done < len(self.tool_calls):
            name, arguments = self.tool_calls[done]
            call = {"id": f"call_{number}", "type": "function"}
            call["function"] = {"name": name, "arguments": json.dumps(arguments)}
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": self.answer}, "stop"
        return {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model", "local"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }


def chat_app(script: ChatScript) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def completions(request: Request) -> dict[str, Any]:
        return script.reply(await request.json())

    return app


@contextmanager
def serving(script: ChatScript) -> Iterator[str]:
    """The script's server on a free loopback port, in a thread, until the block ends; its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    config = uvicorn.Config(chat_app(script), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(3_000):  # a bounded wait for the server to listen
        if server.started or not thread.is_alive():
            break
        time.sleep(0.01)
    if not server.started:
        raise RuntimeError("the chat-completions server did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
