"""The :class:`Embedder` protocol and the helpers every embedder shares.

Built-in implementations (pick one with :func:`lessonbank.retrieval.embedders.make_embedder`):

=================================  ==========================  ===============================================
spec                               class                       what it is
=================================  ==========================  ===============================================
``"hash"``, ``"hash:256"``         :class:`HashEmbedder`       feature hashing of stems and trigrams; tests
``"minilm"``                       ``MiniLMEmbedder``          all-MiniLM-L6-v2 on onnxruntime, else NumPy
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

import importlib.util
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lessonbank.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

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


def cosine(a: Vectors, b: Vectors) -> float:
    """Cosine of two vectors (0.0 when either is zero)."""
    import numpy as np

    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b)) / denom if denom > 0 and math.isfinite(denom) else 0.0
