"""Embedders: text in, unit vectors out, behind one small protocol.

Built-in implementations (pick one with :func:`make_embedder`):

=================================  ==========================  ===============================================
spec                               class                       what it is
=================================  ==========================  ===============================================
``"hash"``, ``"hash:256"``         :class:`HashEmbedder`       feature hashing of stems and trigrams; tests
``"minilm"``                       ``MiniLMEmbedder``          all-MiniLM-L6-v2, forward pass in NumPy
``"static"``                       ``StaticEmbedder``          a static distillation of MiniLM, built locally
``"openai:MODEL[@BASE_URL]"``      :class:`OpenAIEmbedder`     any OpenAI-compatible ``/v1/embeddings``
``"auto"``                         MiniLM when installed       else no embedder (recall stays lexical)
=================================  ==========================  ===============================================

Invariants every embedder keeps:

- ``name`` identifies the vector space. It is stored next to each vector and changes whenever the
  vectors for the same text would change (model, dimensions, recipe), so stale vectors are recomputed
  instead of being compared with new ones.
- ``embed_documents`` returns ``(n, dim)`` float32 rows and ``embed_query`` a ``(dim,)`` float32 vector,
  each of L2 norm 1 (an empty text may give the zero vector). Vectors are deterministic for a given
  ``name``.
- Nothing downloads at run time. NumPy is imported lazily, so ``import lessonbank`` stays light.

Optional attributes the retriever reads when present: ``lexical_weight`` (BM25's share in hybrid
fusion, measured per model) and ``releases_gil`` (True when a query embedding runs in native code or
waits on the network, so hybrid recall embeds it on another thread while the keyword search runs).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import importlib.util
import logging
import math
import os
import random
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import openai

from lessonbank.errors import ConfigError, LLMError, LLMTransientError
from lessonbank.llm.base import resolve_api_key
from lessonbank.llm.openai import status_error
from lessonbank.stores.stem import stem
from lessonbank.text import STOPWORDS, words

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

log = logging.getLogger("lessonbank.retrieval")

EMBEDDINGS_EXTRA = "pip install 'lessonbank[embeddings]'"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors; see the module docstring for the invariants."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors: ...

    def embed_query(self, text: str) -> Vectors: ...


# --------------------------------------------------------------------------- helpers shared by embedders


def require_numpy() -> None:
    """Raise a ConfigError naming the extra to install when NumPy is missing (constructors call it)."""
    if importlib.util.find_spec("numpy") is None:  # pragma: no cover - numpy is in the dev group
        raise ConfigError(f"embeddings need NumPy: {EMBEDDINGS_EXTRA}")


def check_texts(texts: object) -> list[str]:
    """``texts`` as a list of str; a bare string or non-string items are the caller's mistake."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(
            "embed_documents() takes a sequence of strings, not a single string: wrap it in a list"
        )
    if not isinstance(texts, Sequence):
        raise TypeError(f"embed_documents() takes a sequence of strings, got {type(texts).__name__}")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"embed_documents() item {index} is {type(text).__name__}, expected str")
    return list(texts)


def check_text(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"embed_query() takes a string, got {type(text).__name__}")
    return text


def normalize_rows(matrix: Vectors) -> Vectors:
    """Rows scaled to unit L2 norm in place; all-zero rows stay zero."""
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix


class QueryCache:
    """A small LRU of query vectors: an agent retrying a task asks for the same query again and again,
    and a model forward pass (tens of ms) or an HTTP round trip is worth skipping. Vectors come back
    read-only so a caller cannot change what the next caller gets."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._items: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def get(self, text: str, compute: Callable[[str], Vectors]) -> Vectors:
        if self.size <= 0:
            return compute(text)
        with self._lock:
            vector = self._items.get(text)
            if vector is not None:
                self._items.move_to_end(text)
                return vector
        vector = compute(text)
        vector.flags.writeable = False
        with self._lock:
            self._items[text] = vector
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return vector


# --------------------------------------------------------------------------- hash embedder


# Long texts are cut before hashing: a lesson or a query never needs more, and a 2 MB field must
# not cost seconds. The cut is part of the vector, so it is part of the name's contract.
_HASH_MAX_CHARS = 20_000
# Trigrams carry spelling closeness (typos, inflections the stemmer misses); word stems carry
# meaning. Stems weigh more so that sharing a word beats sharing a few letters.
_TRIGRAM_WEIGHT = 0.35


@lru_cache(maxsize=200_000)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """Stable bucket and sign of a feature: blake2b, never Python's salted ``hash()``."""
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return digest % dim, 1.0 if (digest >> 63) & 1 else -1.0


class HashEmbedder:
    """Deterministic embedder without a model: signed feature hashing of stems and character trigrams.

    Meant for tests and for trying vector recall without installing a model: similar wording gives
    a clearly higher cosine than unrelated text, but it knows no synonyms. ``__test__ = False`` keeps
    pytest from collecting it.
    """

    __test__ = False

    releases_gil = False  # pure Python: another thread would only wait for the GIL

    def __init__(self, dim: int = 256) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise ValueError(f"HashEmbedder dim must be an integer >= 8, got {dim!r}")
        require_numpy()
        self._dim = dim

    @property
    def name(self) -> str:
        return f"hash-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self._dim})"

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        items = check_texts(texts)
        out = np.zeros((len(items), self._dim), dtype=np.float32)
        for row, text in enumerate(items):
            self._fill(out[row], text)
        return normalize_rows(out)

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self.embed_documents([check_text(text)])[0]
        return vector

    def _fill(self, row: Vectors, text: str) -> None:
        tokens = [w for w in words(text[:_HASH_MAX_CHARS]) if w not in STOPWORDS]
        for token in tokens:
            index, sign = _bucket("w:" + stem(token), self._dim)
            row[index] += sign
            padded = f"<{token}>"
            for start in range(len(padded) - 2):
                index, sign = _bucket("t:" + padded[start : start + 3], self._dim)
                row[index] += sign * _TRIGRAM_WEIGHT


# --------------------------------------------------------------------------- OpenAI-compatible endpoint

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
        for attempt in range(1, self.attempts + 1):
            try:
                return self._request(batch)
            except LLMTransientError as exc:
                if attempt == self.attempts:
                    raise
                delay = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1)) * random.uniform(
                    0.8, 1.2
                )
                log.warning(
                    "%s failed (%s); retry %d/%d in %.1fs", self.name, exc, attempt, self.attempts - 1, delay
                )
                time.sleep(delay)
        raise AssertionError("unreachable")

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


# --------------------------------------------------------------------------- spec resolution


def make_embedder(spec: str | Embedder | None) -> Embedder | None:
    """Resolve an embedder spec; ``None``, ``""`` and ``"none"`` mean no embedder (lexical recall).

    ``"hash"`` / ``"hash:DIM"``, ``"minilm"``, ``"static"``, ``"openai:MODEL"`` or
    ``"openai:MODEL@http://host:port/v1"``, ``"auto"`` (MiniLM when its packages are installed,
    else None). An :class:`Embedder` instance is returned as it is.
    """
    if spec is None:
        return None
    if not isinstance(spec, str):
        if isinstance(spec, Embedder):
            return spec
        raise TypeError(f"embedder must be a spec string or an Embedder, got {type(spec).__name__}")
    text = spec.strip()
    lowered = text.lower()
    if lowered in ("", "none"):
        return None
    if lowered == "hash" or lowered.startswith("hash:"):
        size = lowered.partition(":")[2] or "256"
        if not size.isdigit():
            raise ConfigError(f"bad embedder spec {spec!r}: use 'hash' or 'hash:DIM' with DIM a number")
        return HashEmbedder(int(size))
    if lowered == "minilm":
        from lessonbank.retrieval.minilm import MiniLMEmbedder

        embedder = MiniLMEmbedder()
        embedder.check_installed()
        return embedder
    if lowered == "static":
        from lessonbank.retrieval.minilm import StaticEmbedder

        static = StaticEmbedder()
        static.check_installed()
        return static
    if lowered == "auto":
        from lessonbank.retrieval.minilm import MiniLMEmbedder, minilm_available

        return MiniLMEmbedder() if minilm_available() else None
    if lowered.startswith("openai:"):
        model, base_url = _split_base_url(text[len("openai:") :])
        if not model:
            raise ConfigError(
                f"bad embedder spec {spec!r}: use 'openai:MODEL' or 'openai:MODEL@http://host:port/v1'"
            )
        return OpenAIEmbedder(model, base_url=base_url)
    raise ConfigError(
        f"unknown embedder {spec!r}: use 'none', 'auto', 'hash', 'hash:DIM', 'minilm', 'static', "
        "'openai:MODEL' or 'openai:MODEL@http://host:port/v1'"
    )


def _split_base_url(rest: str) -> tuple[str, str | None]:
    for marker in ("@http://", "@https://"):
        at = rest.find(marker)
        if at >= 0:
            return rest[:at].strip(), rest[at + 1 :].strip()
    return rest.strip(), None


def cosine(a: Vectors, b: Vectors) -> float:
    """Cosine of two vectors (0.0 when either is zero)."""
    import numpy as np

    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b)) / denom if denom > 0 and math.isfinite(denom) else 0.0
