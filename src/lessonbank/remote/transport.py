"""The plumbing under the two remote facades, the one place they differ by more than ``await``:
:class:`Transport` sends with ``httpx.Client``, :class:`AsyncTransport` with ``httpx.AsyncClient``.
Each sends a request model as its operation's REST call (:func:`~.calls.call_of`) and streams an
export; :mod:`.sync` and :mod:`.aio` build on them and differ only by ``async``/``await``.
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any, Generic, TypeVar

import httpx

from lessonbank.remote import calls
from lessonbank.requests import ExportRequest, Request
from lessonbank.services.transfer import ExportFormat, ExportTarget, check_format

T = TypeVar("T")
C = TypeVar("C", httpx.Client, httpx.AsyncClient)


class _Base(Generic[C]):
    """What both transports keep: the server's address, the key's header, and the httpx client (the
    caller's, left open, or one of its own)."""

    def __init__(
        self, url: str, api_key: str | None, namespace: str, timeout: float, client: C | None
    ) -> None:
        self.url = url
        self.namespace = namespace
        self.timeout = timeout
        self._base = calls.base_url(url, namespace)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owned = client is None
        self._client: C = client if client is not None else self._new_client()

    def _new_client(self) -> C:
        raise NotImplementedError

    def _send_options(self, call: calls.Call[Any]) -> dict[str, Any]:
        return {
            "params": call.params or None,
            "headers": self._headers,
            "timeout": calls.timeout_of(call, self.timeout),
        }

    def _request_of(self, call: calls.Call[Any]) -> dict[str, Any]:
        """The arguments of the client's ``request`` for ``call``."""
        return {
            "method": call.method,
            "url": self._base + call.path,
            "json": call.json,
            **self._send_options(call),
        }


class Transport(_Base[httpx.Client]):
    """Sends with an ``httpx.Client`` (the caller's, left open, or one of its own)."""

    def _new_client(self) -> httpx.Client:
        return httpx.Client()

    def _call(self, request: Request[T]) -> T:
        call = calls.call_of(request)
        with calls.transport_errors(self.url):
            response = self._client.request(**self._request_of(call))
        return calls.parse(call, response)

    def _export_to(self, dest: ExportTarget, format: ExportFormat, live_only: bool) -> int:
        """Streamed from the server as JSON Lines and written in ``format`` as it arrives."""
        call = calls.call_of(ExportRequest.model_construct(format="jsonl", live_only=live_only))
        check_format(format)
        with (
            calls.transport_errors(self.url),
            self._client.stream("GET", self._base + call.path, **self._send_options(call)) as response,
        ):
            if response.status_code >= 300:
                response.read()
                raise calls.error_of(response)
            return calls.write_export(response.iter_lines(), dest, format, self.namespace)

    def close(self) -> None:
        """Close the connections (a client passed in stays open: it is the caller's)."""
        if self._owned:
            self._client.close()


class AsyncTransport(_Base[httpx.AsyncClient]):
    """Sends with an ``httpx.AsyncClient`` (the caller's, left open, or one of its own)."""

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient()

    async def _call(self, request: Request[T]) -> T:
        call = calls.call_of(request)
        with calls.transport_errors(self.url):
            response = await self._client.request(**self._request_of(call))
        return calls.parse(call, response)

    async def _export_to(self, dest: ExportTarget, format: ExportFormat, live_only: bool) -> int:
        """Streamed from the server as JSON Lines into a temporary file, then written in ``format``
        in a thread (writing a file would block the event loop)."""
        call = calls.call_of(ExportRequest.model_construct(format="jsonl", live_only=live_only))
        check_format(format)
        with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
            with calls.transport_errors(self.url):
                async with self._client.stream(
                    "GET", self._base + call.path, **self._send_options(call)
                ) as response:
                    if response.status_code >= 300:
                        await response.aread()
                        raise calls.error_of(response)
                    async for line in response.aiter_lines():
                        spool.write(line + "\n")
            spool.seek(0)
            return await asyncio.to_thread(calls.write_export, spool, dest, format, self.namespace)

    async def close(self) -> None:
        """Close the connections (a client passed in stays open: it is the caller's)."""
        if self._owned:
            await self._client.aclose()
