"""The server's application: the REST API under ``/api/v1``, the MCP endpoint at ``/mcp`` and the
dashboard at ``/``, over one set of banks and one key store (``create_app``).

Every error is JSON with a stable code (:mod:`.errors`); request bodies over ``max_body_bytes`` are
refused with 413 before they are read whole; a request without a valid key (while keys exist) is 401,
one outside its key's namespaces or role 403 (the role of each operation: :mod:`lessonbank.operations`);
a server without keys answers only requests addressed to this machine (:mod:`.hosts`), and one whose
key file vanished or broke while it ran refuses every request with 503 (:mod:`.auth`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from lessonbank.errors import LessonbankError
from lessonbank.server.auth import KeyStore, default_keys_path
from lessonbank.server.banks import Banks
from lessonbank.server.errors import INTERNAL, TOO_LARGE, body, error_body
from lessonbank.server.hosts import HostGuard, allowed_hosts
from lessonbank.server.record_path import RecordPath, replay_body
from lessonbank.settings import Settings

MAX_BODY_BYTES = 4 * 1024 * 1024  # a batch import goes through the CLI's streamed import, not one request
API_PREFIX = "/api/v1"


def create_app(
    settings: Settings | None = None,
    *,
    keys: KeyStore | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    bound_host: str | None = None,
    allow_hosts: Iterable[str] = (),
    **bank_options: Any,
) -> FastAPI:
    """The server over ``settings`` (default: the environment's). ``bank_options`` go to every
    namespace's bank (an ``llm`` or ``embedder`` object, ``worker=False``, ...).

    Without keys the server answers only requests addressed to the loopback names, ``bound_host``
    (the address it listens on) and ``allow_hosts`` (see :mod:`.hosts`)."""
    chosen = settings or Settings.from_env()
    banks = Banks(chosen, **bank_options)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            banks.close()

    app = _App(
        title="lessonbank",
        summary="Lessons LLM agents learned from experience: record, recall, context, review.",
        version="0.1.0",
        docs_url="/docs",
        openapi_url="/openapi.json",
        lifespan=lifespan,
    )
    app.state.settings = chosen
    app.state.banks = banks
    app.state.keys = keys or KeyStore(default_keys_path(chosen.home))
    app.state.max_body_bytes = max_body_bytes
    _errors(app)
    hosts = allowed_hosts(bound_host, allow_hosts)
    app.add_middleware(_LimitBody)
    app.add_middleware(HostGuard, keys=app.state.keys, hosts=hosts)
    # Records skip FastAPI's stack, not the app's own guards; what it does not answer goes on to it.
    app.record_path = RecordPath(partial(FastAPI.__call__, app), prefix=API_PREFIX)
    app.light = HostGuard(_LimitBody(app.record_path), keys=app.state.keys, hosts=hosts)

    from lessonbank.server import dashboard, mcp_http, rest  # the parts, each a router over the same state

    app.include_router(rest.router, prefix=API_PREFIX)
    mcp_http.mount(app)
    app.include_router(dashboard.router)
    return app


class _App(FastAPI):
    """FastAPI, with the record route's light path (:mod:`.record_path`) in front of its stack."""

    record_path: RecordPath | None = None
    light: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = self.record_path
        if self.light is not None and path is not None and not self.root_path and path.claims(scope):
            scope["app"] = self  # as Starlette sets it: the guards and the route read the app's state
            await self.light(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _errors(app: FastAPI) -> None:
    @app.exception_handler(LessonbankError)
    async def lessonbank_error(request: Request, exc: LessonbankError) -> JSONResponse:
        status, content = error_body(exc)
        return JSONResponse(content, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = exc.errors()
        first = problems[0] if problems else {}
        if first.get("type") == "json_invalid":
            detail = (first.get("ctx") or {}).get("error", "")
            message = f"the request body is not valid JSON{f' ({detail})' if detail else ''}"
            return JSONResponse(body("invalid_input", message), status_code=422)
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        # "field — reason": a "name: value" shape would read as a credential to the redaction of messages
        reason = str(first.get("msg", "invalid request"))
        message = f"{where} — {reason}" if where else reason
        return JSONResponse(body("invalid_input", message, field=where or None), status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if isinstance(exc.detail, dict) and "error" in exc.detail:
            content = exc.detail
        else:
            content = body(_code_of_status(exc.status_code), str(exc.detail))
        return JSONResponse(content, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        status, content = error_body(exc)
        return JSONResponse(content, status_code=status)


def _code_of_status(status: int) -> str:
    return {404: "not_found", 405: "method_not_allowed", 401: "unauthorized", 403: "forbidden"}.get(
        status, INTERNAL if status >= 500 else "bad_request"
    )


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse(body(TOO_LARGE, f"the request body is over {limit} bytes"), status_code=413)


class _LimitBody:
    """413 for a body over the limit: by its Content-Length, or while it streams in without one.

    Plain ASGI rather than ``BaseHTTPMiddleware``, which costs every request a task group and a
    response stream (a large share of a record's time under load)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit: int = scope["app"].state.max_body_bytes
        length = Headers(scope=scope).get("content-length")
        if length is not None:
            try:
                over = int(length) > limit
            except ValueError:
                bad = JSONResponse(body("bad_request", "Content-Length is not a number"), status_code=400)
                await bad(scope, receive, send)
                return
            if over:
                await _too_large(limit)(scope, receive, send)
                return
        elif scope["method"] in ("POST", "PUT", "PATCH"):
            received = 0
            chunks: list[bytes] = []
            while True:
                message = await receive()
                if message["type"] != "http.request":  # the client went away: let the app see it
                    chunks = []
                    break
                received += len(message.get("body", b""))
                if received > limit:
                    await _too_large(limit)(scope, receive, send)
                    return
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
            receive = replay_body(b"".join(chunks), receive)
        await self.app(scope, receive, send)
