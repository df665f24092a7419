"""The MCP endpoint of ``lessonbank serve``: the tools of :mod:`.mcp_tools` over Streamable HTTP at
``/mcp``, on the server's banks and keys.

Every HTTP request to ``/mcp`` carries an API key (``Authorization: Bearer lbk_…`` or ``X-API-Key``),
checked here before the SDK sees the request: none or an unknown one is a 401 with a JSON body.
The key's principal rides in the request's ASGI scope to the tools, which check the role of each
tool's operation (:mod:`lessonbank.operations`) on the namespace of each call: a key may hold an MCP
session and still be refused a namespace. A server without keys is open (the local user) and then
answers only requests addressed to this machine, as every route does (:mod:`.hosts`), so a web page
cannot reach it by DNS rebinding.

The SDK's session manager runs inside the application's lifespan (a new one each time the app
starts, as the SDK requires); outside it the endpoint answers 503.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import FastAPI
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from lessonbank.errors import ConfigError
from lessonbank.server.auth import KeyStore, Principal, token_of
from lessonbank.server.banks import Banks
from lessonbank.server.errors import UNAUTHORIZED, body
from lessonbank.server.mcp_tools import Access, build_server

PATH = "/mcp"
PRINCIPAL = "lessonbank.principal"  # the ASGI scope key the endpoint leaves the checked principal under


def mount(app: FastAPI) -> None:
    """Serve MCP at ``/mcp`` on ``app``'s banks (``app.state.banks``) and keys (``app.state.keys``)."""
    banks: Banks = app.state.banks
    server = build_server(Access(banks, banks.settings.namespace, _principal_of))
    endpoint = _Endpoint(app, server)
    app.router.routes.append(Route(PATH, endpoint=endpoint, methods=["GET", "POST", "DELETE"]))
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(running: Any) -> AsyncIterator[Any]:
        async with outer(running) as state, endpoint.running():  # sessions end before the banks close
            yield state

    app.router.lifespan_context = lifespan


def _principal_of(request: Any) -> Principal | None:
    if request is None:  # not over HTTP: never happens on this server, so nothing is allowed
        return None
    found = request.scope.get(PRINCIPAL)
    return found if isinstance(found, Principal) else None


class _Endpoint:
    """The ASGI app at ``/mcp``: the key check, then the SDK's session manager."""

    def __init__(self, app: FastAPI, server: MCPServer) -> None:
        self.app = app
        self.server = server
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # streamable_http_app() makes the session manager anew; its Starlette app is not used (the
        # route is ours). Host checks are done in __call__, where open and keyed servers differ.
        self.server.streamable_http_app(
            streamable_http_path=PATH,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self.server.session_manager
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        keys: KeyStore = self.app.state.keys
        token = token_of(headers.get("authorization"), headers.get("x-api-key"))
        try:
            who = await anyio.to_thread.run_sync(keys.principal, token)  # reads the key file
        except ConfigError as exc:  # keys vanished or broke under a closed server: refuse, say why
            response = JSONResponse(body("not_configured", str(exc)), status_code=503)
            await response(scope, receive, send)
            return
        if who is None:
            message = "a valid API key is required (Authorization: Bearer lbk_… or X-API-Key)"
            response = JSONResponse(
                body(UNAUTHORIZED, message), status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
        elif self.manager is None:
            message = "the MCP endpoint runs while the server runs (its lifespan has not started)"
            response = JSONResponse(body("unavailable", message), status_code=503)
        else:
            scope[PRINCIPAL] = who
            await self.manager.handle_request(scope, receive, send)
            return
        await response(scope, receive, send)
