"""``OpenAIEmbedder``: any server speaking ``POST /v1/embeddings`` (OpenAI, Ollama, vLLM, llama.cpp, LM Studio).

Identity: the name is ``openai:MODEL`` (``:Nd`` with ``dimensions``); the server's URL is not part of
it, since the same model behind another URL gives the same vectors.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import openai

from lessonbank.errors import ConfigError, LLMError, LLMTransientError
from lessonbank.llm.base import resolve_api_key
from lessonbank.llm.sdk import status_error
from lessonbank.retrieval.embedders.base import (
    QueryCache,
    check_text,
    check_texts,
    normalize_rows,
    require_numpy,
)
from lessonbank.retry import Backoff, retry_call

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

log = logging.getLogger("lessonbank.retrieval")

_KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
# A query is one short input; documents go in batches well under the API's 2,048-input cap.
_DEFAULT_BATCH = 128


class OpenAIEmbedder:
    """Any server speaking ``POST /v1/embeddings``: OpenAI, Ollama, vLLM, llama.cpp, LM Studio.

    ``base_url`` defaults to ``OPENAI_BASE_URL`` (else OpenAI itself) and ``api_key`` to
    ``OPENAI_API_KEY``; a custom server that ignores keys gets a placeholder. Vectors are requested
    as base64 float32 (what the SDK asks for by default, 4x smaller than JSON floats) and decoded
    here; servers that answer with plain float lists work too. Transient failures (429, 5xx,
    timeouts) are retried with exponential backoff; everything else raises :class:`LLMError` at
    once. ``dim`` is known up front for OpenAI's models or when ``dimensions`` is given; otherwise the
    first call (or reading ``dim``) asks the server. The HTTP client is kept between calls and closed
    by :meth:`close` (or when the embedder is garbage-collected).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = _DEFAULT_BATCH,
        timeout_s: float = 30.0,
        attempts: int = 3,
        base_delay_s: float = 0.5,
        max_delay_s: float = 8.0,
        query_cache_size: int = 1024,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("OpenAIEmbedder needs a model name, e.g. 'text-embedding-3-small'")
        if dimensions is not None and (isinstance(dimensions, bool) or dimensions < 1):
            raise ValueError(f"dimensions must be a positive integer, got {dimensions!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        require_numpy()
        self.model = model.strip()
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self._given_key = api_key
        self._dim: int | None = dimensions or (_KNOWN_DIMS.get(self.model) if self.base_url is None else None)
        self._client: openai.OpenAI | None = None
        self._lock = threading.Lock()
        self.query_cache = QueryCache(query_cache_size)

    releases_gil = True  # the request waits on the network

    @property
    def name(self) -> str:
        # The server is not part of the name: the same model behind another URL gives the same vectors.
        return f"openai:{self.model}" + (f":{self.dimensions}d" if self.dimensions else "")

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed_documents(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.model!r}, base_url={self.base_url!r}, dimensions={self.dimensions!r})"

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        items = check_texts(texts)
        # The endpoint rejects empty inputs; an empty text has no meaning to embed, so it gets zeros.
        todo = [i for i, text in enumerate(items) if text.strip()]
        parts: list[Vectors] = []
        for start in range(0, len(todo), self.batch_size):
            batch = [items[i] for i in todo[start : start + self.batch_size]]
            parts.append(self._embed_batch(batch))
        # With nothing to send, dim may still be unknown: reading it asks the server once.
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if todo:
            out[todo] = np.concatenate(parts)
        return normalize_rows(out)

    def embed_query(self, text: str) -> Vectors:
        return self.query_cache.get(check_text(text), self._embed_one)

    def _embed_one(self, text: str) -> Vectors:
        vector: Vectors = self.embed_documents([text])[0]
        return vector

    # -- wire

    def _api_key(self) -> str:
        if self._given_key:
            return self._given_key
        key = os.environ.get("OPENAI_API_KEY", "").strip()
        if key:
            return key
        if self.base_url:
            return "unused"  # local servers ignore the key, but the SDK insists on one
        return resolve_api_key(None, "OPENAI_API_KEY", provider="OpenAI", model=self.model)

    def _get_client(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                # SDK retries off: this class retries, and two nested loops would multiply attempts.
                self._client = openai.OpenAI(
                    api_key=self._api_key(), base_url=self.base_url, timeout=self.timeout_s, max_retries=0
                )
                weakref.finalize(self, self._client.close)
            return self._client

    def _embed_batch(self, batch: list[str]) -> Vectors:
        def retrying(exc: BaseException, retry: int, delay: float) -> None:
            log.warning(
                "%s failed (%s); retry %d/%d in %.1fs", self.name, exc, retry, self.attempts - 1, delay
            )

        return retry_call(
            lambda: self._request(batch),
            transient=(LLMTransientError,),
            backoff=Backoff(self.base_delay_s, self.max_delay_s),
            attempts=self.attempts,
            on_retry=retrying,
        )

    def _request(self, batch: list[str]) -> Vectors:
        client = self._get_client()
        options: dict[str, Any] = {}
        if self.dimensions is not None:
            options["dimensions"] = self.dimensions
        try:
            # The raw JSON is read instead of the SDK's parsed model: the SDK does not validate
            # payloads, and a malformed one must become a clear error here, not a crash later.
            raw = client.embeddings.with_raw_response.create(
                model=self.model, input=batch, encoding_format="base64", **options
            )
            payload = raw.http_response.json()
        except openai.APITimeoutError as exc:
            raise LLMTransientError(
                f"{self.name} did not answer within {self.timeout_s:g}s", provider="openai"
            ) from exc
        except openai.APIConnectionError as exc:
            raise LLMTransientError(
                f"could not reach {self.name} at {self.base_url or 'the default OpenAI endpoint'}: "
                f"{exc.__cause__ or exc}",
                provider="openai",
            ) from exc
        except openai.APIStatusError as exc:
            raise status_error(self.name, "openai", exc.status_code, exc.body, self._api_key()) from None
        except ValueError as exc:  # the body is not JSON
            raise LLMError(
                f"{self.name} answered with a body that is not JSON: {exc}", provider="openai"
            ) from exc
        return self._decode(payload, len(batch))

    def _decode(self, payload: object, expected: int) -> Vectors:
        import numpy as np

        def malformed(why: str) -> LLMError:
            return LLMError(f"{self.name} returned a malformed embeddings response: {why}", provider="openai")

        if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
            raise malformed("no 'data' list")
        data = payload["data"]
        if len(data) != expected:
            raise malformed(f"{len(data)} embeddings for {expected} inputs")
        rows: list[Any] = [None] * expected
        for position, item in enumerate(data):
            if not isinstance(item, dict) or "embedding" not in item:
                raise malformed(f"item {position} has no 'embedding'")
            index = item.get("index", position)
            if not isinstance(index, int) or not 0 <= index < expected or rows[index] is not None:
                raise malformed(f"item {position} has a bad or repeated index {index!r}")
            rows[index] = self._vector(item["embedding"], malformed)
        dims = {len(row) for row in rows}
        if len(dims) != 1 or 0 in dims:
            raise malformed(f"vectors of different or zero lengths {sorted(dims)}")
        dim = dims.pop()
        if self._dim is None:
            self._dim = dim
        elif dim != self._dim:
            wanted = "requested" if self.dimensions else "expected"
            raise LLMError(
                f"{self.name} returned {dim}-dimensional vectors, {wanted} {self._dim}: check the model name"
                + (" and whether the server supports 'dimensions'" if self.dimensions else ""),
                provider="openai",
            )
        matrix = np.stack(rows).astype(np.float32, copy=False)
        if not np.isfinite(matrix).all():
            raise malformed("vectors hold NaN or infinite values")
        return matrix

    @staticmethod
    def _vector(value: object, malformed: Any) -> Any:
        import numpy as np

        if isinstance(value, str):
            try:
                raw = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise malformed(f"bad base64 ({exc})") from exc
            if len(raw) % 4:
                raise malformed(f"base64 payload of {len(raw)} bytes is not float32")
            return np.frombuffer(raw, dtype="<f4")
        if isinstance(value, list) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in value
        ):
            return np.asarray(value, dtype=np.float32)
        raise malformed(f"an embedding is {type(value).__name__}, expected a list of numbers or base64")
