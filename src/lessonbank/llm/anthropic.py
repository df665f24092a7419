"""Anthropic's Messages API through the official ``anthropic`` SDK (``pip install 'lessonbank[anthropic]'``).

The SDK is an optional extra, so it is imported inside functions: importing this module never
fails, and constructing :class:`AnthropicChat` without the SDK says how to install it.

As with :class:`~lessonbank.llm.openai.OpenAIChat`, the SDK client lives for one call only, so it
never outlives the event loop its connections belong to, and what is read of a reply is capped
(``max_reply_bytes``, see :mod:`lessonbank.llm.limits`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from lessonbank.errors import ConfigError, LLMTransientError
from lessonbank.llm.base import Completion, Message, Usage, resolve_api_key
from lessonbank.llm.limits import capped_client, check_cap, oversized
from lessonbank.llm.openai import not_a_reply, status_error
from lessonbank.redact import redact
from lessonbank.settings import DEFAULT_LLM_MAX_REPLY_BYTES

if TYPE_CHECKING:
    from anthropic.types import MessageParam

# The Messages API requires max_tokens; this is enough for a reflection or a lesson list.
DEFAULT_MAX_TOKENS = 1024


class AnthropicChat:
    """Claude through ``anthropic.AsyncAnthropic``, with SDK retries off (RetryingLLM retries).

    System messages become the ``system`` parameter, as the Messages API has no system role.
    ``temperature`` is accepted for the protocol's sake but not sent: SDK 2.x dropped the
    parameter and the API version it speaks rejects sampling parameters with HTTP 400.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_reply_bytes: int = DEFAULT_LLM_MAX_REPLY_BYTES,
    ) -> None:
        try:
            importlib.import_module("anthropic")
        except ImportError as exc:
            raise ConfigError(
                "the anthropic provider needs the anthropic SDK: pip install 'lessonbank[anthropic]'"
            ) from exc
        self._model = model
        self._given_key = api_key
        self._base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        self._timeout_s = timeout_s
        self._max_reply_bytes = check_cap(max_reply_bytes)

    @property
    def _api_key(self) -> str:
        return resolve_api_key(self._given_key, "ANTHROPIC_API_KEY", provider="Anthropic", model=self._model)

    @property
    def model(self) -> str:
        return f"anthropic:{self._model}"

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        import anthropic
        from anthropic.types import TextBlock

        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        wire = cast(
            "list[MessageParam]",
            [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"],
        )
        options: dict[str, Any] = {"system": system} if system else {}
        api_key = self._api_key
        try:
            http = capped_client(
                anthropic.DefaultAsyncHttpxClient,
                self._max_reply_bytes,
                model=self.model,
                provider="anthropic",
            )
            async with anthropic.AsyncAnthropic(
                api_key=api_key,
                base_url=self._base_url,
                timeout=self._timeout_s,
                max_retries=0,
                http_client=http,
            ) as client:
                response = await client.messages.create(
                    model=self._model,
                    messages=wire,
                    max_tokens=DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
                    **options,
                )
        except anthropic.APITimeoutError as exc:
            raise LLMTransientError(
                f"{self.model} did not answer within {self._timeout_s:g}s", provider="anthropic"
            ) from exc
        except anthropic.APIConnectionError as exc:
            if (too_large := oversized(exc)) is not None:  # the SDK wraps the cap's error
                raise too_large from None
            endpoint = redact(self._base_url) if self._base_url else "the default Anthropic endpoint"
            raise LLMTransientError(
                f"could not reach {self.model} at {endpoint}: {exc.__cause__ or exc}", provider="anthropic"
            ) from exc
        except anthropic.APIStatusError as exc:
            # 529 (overloaded) is >= 500, so it comes back transient like any other 5xx.
            raise status_error(self.model, "anthropic", exc.status_code, exc.body, api_key) from None

        except (anthropic.APIResponseValidationError, ValueError) as exc:  # HTML or garbage for JSON
            raise not_a_reply(self.model, "anthropic", exc) from None
        try:
            text = "".join(block.text for block in response.content if isinstance(block, TextBlock))
            return Completion(
                text=text,
                usage=Usage(response.usage.input_tokens, response.usage.output_tokens),
                model=self.model,
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise not_a_reply(self.model, "anthropic", exc) from None
