"""Anthropic's Messages API through the official ``anthropic`` SDK (``pip install 'lessonbank[anthropic]'``).

The SDK is an optional extra, so it is imported when a model is made: importing this module never
fails, and constructing :class:`AnthropicChat` without the SDK says how to install it. The client's
life, the reply cap and the error mapping are :class:`~lessonbank.llm.sdk.SdkChat`'s, as for
:class:`~lessonbank.llm.openai.OpenAIChat`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from lessonbank.llm.base import Completion, CompletionRequest, Usage
from lessonbank.llm.sdk import SdkChat
from lessonbank.settings import DEFAULT_LLM_MAX_REPLY_BYTES

if TYPE_CHECKING:
    from anthropic.types import Message as AnthropicMessage
    from anthropic.types import MessageParam

# The Messages API requires max_tokens; this is enough for a reflection or a lesson list.
DEFAULT_MAX_TOKENS = 1024


class AnthropicChat(SdkChat):
    """Claude through ``anthropic.AsyncAnthropic``.

    System messages become the ``system`` parameter, as the Messages API has no system role.
    ``temperature`` is accepted for the protocol's sake but not sent: SDK 2.x dropped the
    parameter and the API version it speaks rejects sampling parameters with HTTP 400.
    """

    sdk = "anthropic"
    client_class = "AsyncAnthropic"
    vendor = "Anthropic"
    env_prefix = "ANTHROPIC"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_reply_bytes: int = DEFAULT_LLM_MAX_REPLY_BYTES,
    ) -> None:
        super().__init__(
            model,
            provider="anthropic",
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            max_reply_bytes=max_reply_bytes,
        )

    async def _send(self, client: Any, request: CompletionRequest) -> AnthropicMessage:
        messages = request.messages
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        wire = cast(
            "list[MessageParam]",
            [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"],
        )
        options: dict[str, Any] = {"system": system} if system else {}
        max_tokens = DEFAULT_MAX_TOKENS if request.max_tokens is None else request.max_tokens
        reply = await client.messages.create(
            model=self._model, messages=wire, max_tokens=max_tokens, **options
        )
        return cast("AnthropicMessage", reply)

    def _read(self, response: AnthropicMessage) -> Completion:
        from anthropic.types import TextBlock

        text = "".join(block.text for block in response.content if isinstance(block, TextBlock))
        return Completion(
            text=text,
            usage=Usage(response.usage.input_tokens, response.usage.output_tokens),
            model=self.model,
        )
