"""Which ``Host`` an open server answers: DNS rebinding cannot reach it.

A server without API keys is open to whoever reaches it, so ``lessonbank serve`` binds it to the
loopback. That is not enough in a browser: a page of ``evil.example`` whose name is made to resolve
to 127.0.0.1 (DNS rebinding) sends its requests to the open server with ``Host: evil.example``, and
reads the answers as same-origin. So an open server answers a request only when its ``Host`` names
this machine's loopback (``localhost``, ``127.0.0.1``, ``::1``), the address the server is bound to, or
a name allowed explicitly (``lessonbank serve --allow-host NAME``); and when a browser says where the
request comes from (``Origin``), that must be one of them too. Anything else is a 403 before any
route runs, on every route: REST, MCP and the dashboard (its sign-in page and CSRF token included).

A server with keys needs none of this: a rebinding page has no key, and the dashboard's cookie is
bound to the server's own name (HttpOnly, SameSite=Strict), so the check is for open servers only
and a keyed server may sit behind any name.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from lessonbank.errors import ConfigError
from lessonbank.server.auth import KeyStore
from lessonbank.server.errors import FORBIDDEN, body

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def allowed_hosts(bound: str | None = None, extra: Iterable[str] = ()) -> frozenset[str]:
    """The host names an open server answers: the loopback names, ``bound`` and ``extra``
    (lowercased, without a port or IPv6 brackets)."""
    names = set(LOOPBACK_NAMES)
    for name in (bound, *extra):
        if name and name.strip():
            names.add(host_name(name.strip()) or name.strip().lower())
    return frozenset(names)


def host_name(value: str) -> str | None:
    """The host name in a ``Host`` header or an ``Origin`` (``[::1]:8765`` → ``::1``), lowercased."""
    try:
        parsed = urlsplit(value if "//" in value else "//" + value)
        return parsed.hostname
    except ValueError:  # a malformed port or bracket
        return None


class HostGuard:
    """ASGI middleware: on an open server, refuse a request whose Host or Origin is not allowed."""

    def __init__(self, app: ASGIApp, *, keys: KeyStore, hosts: frozenset[str]) -> None:
        self.app = app
        self.keys = keys
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._keyed():
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self.refusal(headers.get("host", ""), headers.get("origin"))
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await JSONResponse(body(FORBIDDEN, refusal), status_code=403)(scope, receive, send)

    def refusal(self, host: str, origin: str | None) -> str | None:
        """Why a request with this Host and Origin is refused (None: it is not)."""
        if host_name(host) not in self.hosts:
            return (
                f"this server has no API keys, so it answers only requests addressed to "
                f"{', '.join(sorted(self.hosts))}; not {host[:100]!r} (add a name with "
                "`lessonbank serve --allow-host NAME`, or create a key)"
            )
        if origin is not None and origin != "null" and host_name(origin) not in self.hosts:
            return f"this server has no API keys and does not answer pages of {origin[:100]!r}"
        return None

    def _keyed(self) -> bool:
        try:
            return self.keys.required()
        except ConfigError:  # an unreadable key file: the routes refuse with 503 and say why
            return True
