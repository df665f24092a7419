"""What the providers on an official SDK share (``openai``, ``anthropic``).

Both SDKs come from the same generator: the same client options, the same default HTTP client
class and the same error classes. :class:`SdkChat` therefore opens the client, caps the reply and
turns SDK errors into :class:`~lessonbank.errors.LLMError` once; a provider says only how to send a
request and how to read the reply.

The SDK client lives for one call only: a client cached across calls binds its connection pool to
the first event loop, so the next ``asyncio.run`` fails with "Event loop is closed" and the old
sockets leak as ResourceWarnings. A fresh connection per call costs a handshake, which is small
next to an LLM round trip. SDK retries are off (``max_retries=0``):
:class:`~lessonbank.llm.retry.RetryingLLM` retries once for every provider, and two nested retry
loops would multiply the attempts. What is read of a reply is capped (``max_reply_bytes``, see
:mod:`lessonbank.llm.limits`).
"""

from __future__ import annotations

import importlib
import os
from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from lessonbank.errors import ConfigError, LLMError, LLMTransientError
from lessonbank.llm.base import ChatModel, Completion, CompletionRequest, resolve_api_key
from lessonbank.llm.limits import capped_client, check_cap, oversized
from lessonbank.redact import redact
from lessonbank.settings import DEFAULT_LLM_MAX_REPLY_BYTES

# 408 and 409 are what the SDKs themselves retry besides 429 and 5xx: a request that timed out
# server-side or lost a lock race may well succeed next time.
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
_MAX_DETAIL_CHARS = 300
# Shorter keys are placeholders such as "ollama"; scrubbing them would mangle ordinary words.
_MIN_SECRET_CHARS = 8


class SdkChat(ChatModel):
    """A chat model behind an official SDK named ``sdk`` (the module and the install extra).

    ``vendor`` names the company in messages, and ``env_prefix`` the environment variables read:
    ``<prefix>_API_KEY`` when no key is given, ``<prefix>_BASE_URL`` when no base URL is.
    """

    sdk: ClassVar[str]
    client_class: ClassVar[str]
    vendor: ClassVar[str]
    env_prefix: ClassVar[str]

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float,
        max_reply_bytes: int = DEFAULT_LLM_MAX_REPLY_BYTES,
    ) -> None:
        try:
            self._sdk: Any = importlib.import_module(self.sdk)
        except ImportError as exc:
            raise ConfigError(
                f"the {self.sdk} provider needs the {self.sdk} SDK: pip install 'lessonbank[{self.sdk}]'"
            ) from exc
        self._model = model
        self._provider = provider
        self._timeout_s = timeout_s
        self._max_reply_bytes = check_cap(max_reply_bytes)
        self._base_url = base_url or os.environ.get(f"{self.env_prefix}_BASE_URL") or None
        self._given_key = api_key

    @property
    def _api_key(self) -> str:
        return resolve_api_key(
            self._given_key, f"{self.env_prefix}_API_KEY", provider=self.vendor, model=self._model
        )

    @property
    def model(self) -> str:
        return f"{self._provider}:{self._model}"

    @abstractmethod
    async def _send(self, client: Any, request: CompletionRequest) -> Any:
        """Make ``request`` with the open SDK ``client``; return the SDK's reply object."""

    @abstractmethod
    def _read(self, response: Any) -> Completion:
        """The reply text and usage out of ``response``; AttributeError and the like when it is not one."""

    async def request(self, request: CompletionRequest) -> Completion:
        sdk = self._sdk
        api_key = self._api_key
        try:
            http = capped_client(
                sdk.DefaultAsyncHttpxClient, self._max_reply_bytes, model=self.model, provider=self._provider
            )
            async with getattr(sdk, self.client_class)(
                api_key=api_key,
                base_url=self._base_url,
                timeout=self._timeout_s,
                max_retries=0,
                http_client=http,
            ) as client:
                response = await self._send(client, request)
        except sdk.APITimeoutError as exc:
            raise LLMTransientError(
                f"{self.model} did not answer within {self._timeout_s:g}s", provider=self._provider
            ) from exc
        except sdk.APIConnectionError as exc:
            if (too_large := oversized(exc)) is not None:  # an SDK may wrap the cap's error
                raise too_large from None
            raise LLMTransientError(
                f"could not reach {self.model} at {self._endpoint()}: {exc.__cause__ or exc}",
                provider=self._provider,
            ) from exc
        except sdk.APIStatusError as exc:
            # 529 (Anthropic's overloaded) is >= 500, so it comes back transient like any other 5xx.
            raise status_error(self.model, self._provider, exc.status_code, exc.body, api_key) from None
        except (sdk.APIResponseValidationError, ValueError) as exc:  # HTML or garbage for JSON
            raise not_a_reply(self.model, self._provider, exc) from None
        try:
            return self._read(response)
        except (AttributeError, TypeError, ValueError, IndexError) as exc:
            raise not_a_reply(self.model, self._provider, exc) from None

    def _endpoint(self) -> str:
        return redact(self._base_url) if self._base_url else f"the default {self.vendor} endpoint"


def not_a_reply(model: str, provider: str, exc: BaseException) -> LLMTransientError:
    """A 200 reply that is not the provider's JSON (an HTML error page from a proxy, garbage).

    Transient, since such pages usually come from a gateway in trouble.
    """
    detail = redact(f"{type(exc).__name__}: {exc}")
    if len(detail) > _MAX_DETAIL_CHARS:
        detail = detail[:_MAX_DETAIL_CHARS] + "…"
    return LLMTransientError(
        f"{model} sent something that is not a valid reply ({detail})", provider=provider
    )


def status_error(model: str, provider: str, status: int, body: object, api_key: str) -> LLMError:
    """Turn an HTTP error reply into an LLMError that says what to check.

    Shared with the OpenAI embedder. The provider's own message is kept because it is usually the
    most specific hint, with the API key scrubbed out: some servers echo the key they rejected.
    """
    detail = redact(_error_detail(body))
    if len(api_key) >= _MIN_SECRET_CHARS:
        detail = detail.replace(api_key, "***")
    if len(detail) > _MAX_DETAIL_CHARS:
        detail = detail[:_MAX_DETAIL_CHARS] + "…"
    message = f"{model} failed with HTTP {status}" + (f": {detail}" if detail else "")
    if status in _TRANSIENT_STATUSES or status >= 500:
        return LLMTransientError(message, provider=provider, status_code=status)
    hint = {
        401: "check the API key",
        403: "check that the API key may use this model",
        404: "check the model name and the base_url",
    }.get(status, "check the request parameters (max_tokens, model) against the provider's limits")
    return LLMError(f"{message} ({hint})", provider=provider, status_code=status)


def _error_detail(body: object) -> str:
    """The human-readable part of an error body: ``{"error": {"message": ...}}`` or similar."""
    while isinstance(body, Mapping) and "error" in body and not isinstance(body.get("message"), str):
        body = body["error"]
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])
    return "" if body is None else str(body)
