"""The record route's light path: ``POST /api/v1/ns/{namespace}/episodes`` answered in plain ASGI.

Recording is the call agents make most, and under load most of a record's time in the server was
the framework around it (dependency resolution, body validation through FastAPI's field, response
validation, the middleware stack). :class:`RecordPath` answers a well-formed record itself and hands
every other request it is given, and every record it does not accept as it is, to the FastAPI app,
which answers as it always did:

- The app (:func:`.app.create_app`) gives it only requests for the record route (:meth:`RecordPath.claims`),
  behind the same host guard and body limit as every route (:mod:`.hosts`, ``_LimitBody``).
- The key is checked with the same functions as every route (:func:`.deps.principal_of`,
  :func:`.deps.bank_of` with the ``record`` operation's role from :mod:`lessonbank.operations`).
- The body is read as the route reads it (JSON, validated as :class:`~lessonbank.requests.RecordRequest`)
  and the bank is called by the route's own handler (:data:`.rest.record_handler`), in a thread.
- A request it does not accept as it is (no or another content type, a refused key, a body that is
  not valid JSON or not a valid request) goes on, body included, to the FastAPI route, which refuses
  it with its usual status and JSON (401, 403, 422): there is one way to say no, not two.
- The answer is the route's: 201 with the stored episode as JSON, or an error from the bank as JSON
  with its stable code (:func:`.errors.error_body`, as the app's handlers answer).

The FastAPI route stays declared, so the OpenAPI schema and ``/docs`` list the operation unchanged.
FastAPI's own OpenTelemetry middleware does not see the records answered here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import TypeAdapter, ValidationError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lessonbank.models import Episode
from lessonbank.operations import OPERATIONS
from lessonbank.requests import RecordRequest
from lessonbank.server.deps import bank_of, principal_of
from lessonbank.server.errors import error_body

log = logging.getLogger("lessonbank.server")

OPERATION = OPERATIONS["record"]
_EPISODE = TypeAdapter(Episode)
# Threads the records wait in. Each waiting record holds one (its write shares a commit with the
# others waiting, see lessonbank.stores.group_commit), so this bounds how many share a commit; a
# thread that waits costs no CPU. Over the limit a record waits its turn in the pool's queue.
RECORD_THREADS = 64


class RecordPath:
    """An ASGI app answering the record route (see the module); ``app``: the FastAPI app, for what
    it does not answer; ``prefix``: the REST API's."""

    def __init__(self, app: ASGIApp, *, prefix: str) -> None:
        from lessonbank.server.rest import record_handler  # the route's own call of the bank

        assert OPERATION.rest is not None
        self.app = app
        self.method, path = OPERATION.rest
        # Starlette's own compilation of the route's path: the same match, the same namespace.
        self.pattern, _, self.convertors = compile_path(prefix + path)
        self.act = record_handler
        # A pool of its own rather than anyio's: a hop through it costs a third of anyio's CPU
        # (no capacity limiter, cancel scope or condition variable on the way), and the other
        # routes' threads are not taken by waiting records. Threads start as records need them.
        self.threads = ThreadPoolExecutor(RECORD_THREADS, thread_name_prefix="lessonbank-record")
        weakref.finalize(self, self.threads.shutdown, wait=False)

    def claims(self, scope: Scope) -> bool:
        """Whether ``scope`` is a request for the record route (served at the root: under a
        ``root_path`` the app routes it)."""
        return (
            scope["type"] == "http"
            and scope["method"] == self.method
            and not scope.get("root_path")
            and self.pattern.match(scope["path"]) is not None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = self.pattern.match(scope["path"]) if self.claims(scope) else None
        if match is None:
            await self.app(scope, receive, send)
            return
        namespace = self.convertors["namespace"].convert(match["namespace"])
        headers = Headers(scope=scope)
        if not _json_type(headers.get("content-type")):
            await self.app(scope, receive, send)  # the route says what it thinks of this body
            return
        state = scope["app"].state
        try:
            who = principal_of(state.keys, headers.get("authorization"), headers.get("x-api-key"))
            bank = await bank_of(state.banks, who, namespace, OPERATION.name)
        except Exception:  # refused (or a bank that cannot open): the route answers in its own words
            await self.app(scope, receive, send)
            return
        data = await _body(receive)
        if data is None:
            return  # the client went away before its request was whole: nothing to answer
        try:
            request = RecordRequest.model_validate(json.loads(data)) if data else None
        except (ValueError, ValidationError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            request = None
        if request is None:
            await self.app(scope, replay_body(data, receive), send)  # 422 in the route's words
            return
        try:
            # Not cancelled with its client: once handed over, a record is written (as on the route).
            episode = await asyncio.get_running_loop().run_in_executor(
                self.threads, self.act, bank, request, who, namespace
            )
        except Exception as exc:  # as the app's handlers answer a route's error (logged if a bug)
            status, content = error_body(exc)
            await JSONResponse(content, status_code=status)(scope, receive, send)
            return
        answer = _EPISODE.dump_json(episode, by_alias=True)
        await send(
            {
                "type": "http.response.start",
                "status": 201,
                "headers": [
                    (b"content-length", str(len(answer)).encode()),
                    (b"content-type", b"application/json"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer})


def _json_type(value: str | None) -> bool:
    """Whether a Content-Type is one the route reads as JSON without a doubt (``application/json``,
    with parameters or not); any other goes to the route, which decides as it always did."""
    return value is not None and value.partition(";")[0].strip().lower() == "application/json"


async def _body(receive: Receive) -> bytes | None:
    """The whole request body, or None when the client disconnected first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay_body(data: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``data`` (the body already read) once, then what the client sends."""
    replayed = False

    async def again() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        message: dict[str, Any] = {"type": "http.request", "body": data, "more_body": False}
        return message

    return again
