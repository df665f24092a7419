"""OpenAI-compatible chat models (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter).

One class covers every server that speaks ``POST /v1/chat/completions``; ``provider`` only
labels the model string and decides whether a real API key is required.

The SDK client is created per call and closed before returning: a client cached across calls
binds its connection pool to the first event loop, so the next ``asyncio.run`` fails with
"Event loop is closed" and the old sockets leak as ResourceWarnings. A fresh connection per
call costs a handshake, which is small next to an LLM round trip.

What is read of a reply is capped (``max_reply_bytes``, see :mod:`lessonbank.llm.limits`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import openai

from lessonbank.errors import LLMError, LLMTransientError
from lessonbank.llm.base import Completion, Message, Usage, resolve_api_key
from lessonbank.llm.limits import capped_client, check_cap, oversized
from lessonbank.redact import redact
from lessonbank.settings import DEFAULT_LLM_MAX_REPLY_BYTES

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

# 408 and 409 are what the SDKs themselves retry besides 429 and 5xx: a request that timed out
# server-side or lost a lock race may well succeed next time.
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
_MAX_DETAIL_CHARS = 300
# Shorter keys are placeholders such as "ollama"; scrubbing them would mangle ordinary words.
_MIN_SECRET_CHARS = 8


class OpenAIChat:
    """Chat model on the official ``openai`` SDK.

    SDK retries are off (``max_retries=0``): :class:`~lessonbank.llm.retry.RetryingLLM` retries
    once for every provider, and two nested retry loops would multiply the attempts.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        provider: str = "openai",
        max_reply_bytes: int = DEFAULT_LLM_MAX_REPLY_BYTES,
    ) -> None:
        self._model = model
        self._provider = provider
        self._timeout_s = timeout_s
        self._max_reply_bytes = check_cap(max_reply_bytes)
        self._base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        # Local servers ignore the key, but the SDK insists on one. OPENAI_API_KEY is read only for
        # provider "openai", so a real OpenAI key is never sent to some other server.
        self._given_key = api_key if provider == "openai" else (api_key or provider)

    @property
    def _api_key(self) -> str:
        return resolve_api_key(self._given_key, "OPENAI_API_KEY", provider="OpenAI", model=self._model)

    @property
    def model(self) -> str:
        return f"{self._provider}:{self._model}"

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        # Optional parameters go in only when set: local servers and reasoning models reject some
        # of them, and the server's defaults are the right ones when the caller has no preference.
        options: dict[str, Any] = {}
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        if temperature is not None:
            options["temperature"] = temperature
        wire = cast(
            "list[ChatCompletionMessageParam]",
            [{"role": m["role"], "content": m["content"]} for m in messages],
        )
        api_key = self._api_key
        try:
            http = capped_client(
                openai.DefaultAsyncHttpxClient,
                self._max_reply_bytes,
                model=self.model,
                provider=self._provider,
            )
            async with openai.AsyncOpenAI(
                api_key=api_key,
                base_url=self._base_url,
                timeout=self._timeout_s,
                max_retries=0,
                http_client=http,
            ) as client:
                response = await client.chat.completions.create(model=self._model, messages=wire, **options)
        except openai.APITimeoutError as exc:
            raise LLMTransientError(
                f"{self.model} did not answer within {self._timeout_s:g}s", provider=self._provider
            ) from exc
        except openai.APIConnectionError as exc:
            if (too_large := oversized(exc)) is not None:
                raise too_large from None
            raise LLMTransientError(
                f"could not reach {self.model} at {self._endpoint()}: {exc.__cause__ or exc}",
                provider=self._provider,
            ) from exc
        except openai.APIStatusError as exc:
            raise status_error(self.model, self._provider, exc.status_code, exc.body, api_key) from None

        except (openai.APIResponseValidationError, ValueError) as exc:  # HTML or garbage for JSON
            raise not_a_reply(self.model, self._provider, exc) from None
        try:
            text = response.choices[0].message.content if response.choices else None
            usage = response.usage
            return Completion(
                text=text or "",
                usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage(),
                model=self.model,
            )
        except (AttributeError, TypeError, ValueError, IndexError) as exc:
            raise not_a_reply(self.model, self._provider, exc) from None

    def _endpoint(self) -> str:
        return redact(self._base_url) if self._base_url else "the default OpenAI endpoint"


def not_a_reply(model: str, provider: str, exc: BaseException) -> LLMTransientError:
    """A 200 reply that is not the provider's JSON (an HTML error page from a proxy, garbage).

    Shared with the Anthropic provider; transient, since such pages usually come from a gateway in trouble.
    """
    detail = redact(f"{type(exc).__name__}: {exc}")
    if len(detail) > _MAX_DETAIL_CHARS:
        detail = detail[:_MAX_DETAIL_CHARS] + "…"
    return LLMTransientError(
        f"{model} sent something that is not a valid reply ({detail})", provider=provider
    )


def status_error(model: str, provider: str, status: int, body: object, api_key: str) -> LLMError:
    """Turn an HTTP error reply into an LLMError that says what to check.

    Shared with the Anthropic provider. The provider's own message is kept because it is usually
    the most specific hint, with the API key scrubbed out: some servers echo the key they rejected.
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
