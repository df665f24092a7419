"""A cap on how much of a provider's HTTP reply is read.

The SDKs read a reply body whole before parsing it, so a runaway or broken server sending 20 MB
would have all 20 MB in memory, redacted, parsed and stored. A reflection asks for a few hundred
output tokens: a reply past the cap is garbage, and reading stops there.

The cap is installed as two event hooks on the SDK's own default HTTP client (``openai`` and
``anthropic`` export it as ``DefaultAsyncHttpxClient``), so the SDK's transport, proxies from the
environment and connection limits are kept. The request hook asks for an uncompressed reply, so the
bytes counted are the bytes parsed; the response hook refuses a declared ``Content-Length`` over the
cap at once and otherwise wraps the body stream so reading stops at the first byte past the cap.
Either way the error is :class:`~lessonbank.errors.LLMReplyTooLargeError`, raised from inside the
SDK call (the Anthropic SDK wraps it in its connection error; :func:`oversized` finds it again).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import cache
from typing import Any

from lessonbank.errors import ConfigError, LLMReplyTooLargeError

Hook = Callable[[Any], Awaitable[None]]


def check_cap(max_bytes: object) -> int:
    """``max_bytes`` if it is a whole number of bytes ≥ 1, else a ConfigError saying so."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ConfigError(f"max_reply_bytes must be a whole number of bytes ≥ 1, got {max_bytes!r}")
    return max_bytes


def capped_client(factory: Callable[..., Any], max_bytes: int, *, model: str, provider: str) -> Any:
    """An HTTP client made by ``factory`` (the SDK's default client class) whose replies are read
    only up to ``max_bytes`` (see the module docstring). Closed with the SDK client that uses it."""

    def too_large(size: str) -> LLMReplyTooLargeError:
        return LLMReplyTooLargeError(
            f"{model} sent a reply of {size}, over the {max_bytes:,}-byte limit "
            "(LESSONBANK_LLM_MAX_REPLY_BYTES); nothing of it was used",
            provider=provider,
        )

    async def plain(request: Any) -> None:
        request.headers["Accept-Encoding"] = "identity"

    async def cap(response: Any) -> None:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise too_large(f"{int(declared):,} bytes")
        library = type(response).__module__.partition(".")[0]
        response.stream = _stream_class(library)(response.stream, max_bytes, too_large)

    return factory(event_hooks={"request": [plain], "response": [cap]})


def oversized(exc: BaseException) -> LLMReplyTooLargeError | None:
    """The cap's error behind ``exc`` (an SDK error raised from it), if that is what it is."""
    seen: BaseException | None = exc
    for _ in range(5):  # a short chain: the SDK wraps once
        if seen is None:
            return None
        if isinstance(seen, LLMReplyTooLargeError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


@cache
def _stream_class(library_name: str) -> type:
    """A body stream counting bytes, subclassing the ``AsyncByteStream`` of the HTTP library the
    response comes from (``httpx`` or its successor ``httpx2``: the SDK version decides which)."""
    library = importlib.import_module(library_name)

    class CappedStream(library.AsyncByteStream):  # type: ignore[misc, name-defined]
        def __init__(
            self, inner: Any, max_bytes: int, too_large: Callable[[str], LLMReplyTooLargeError]
        ) -> None:
            self.inner = inner
            self.max_bytes = max_bytes
            self.too_large = too_large

        async def __aiter__(self) -> AsyncIterator[bytes]:
            read = 0
            async for chunk in self.inner:
                read += len(chunk)
                if read > self.max_bytes:
                    # The caller closes the response (and so the connection) on the way out.
                    raise self.too_large(f"more than {self.max_bytes:,} bytes")
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    return CappedStream
