"""Embedders: text in, unit vectors out, behind one small protocol (:class:`Embedder`, in ``base``).

:func:`make_embedder` is the one place a spec string becomes an embedder:

- ``base``: the :class:`Embedder` protocol, its invariants and the helpers embedders share
- ``hash``: :class:`HashEmbedder`, feature hashing, no model (tests, trying vector recall)
- ``openai``: :class:`OpenAIEmbedder`, any OpenAI-compatible ``/v1/embeddings`` endpoint
- ``minilm``: :class:`MiniLMEmbedder`, all-MiniLM-L6-v2 on onnxruntime (``bert_onnx``) or NumPy (``bert``)
- ``static``: :class:`StaticEmbedder`, a static model distilled locally from MiniLM

Importing this package imports neither NumPy, a model nor the openai SDK: they load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lessonbank.errors import ConfigError
from lessonbank.retrieval.embedders.base import Embedder, cosine
from lessonbank.retrieval.embedders.hash import HashEmbedder
from lessonbank.retrieval.embedders.minilm import MiniLMEmbedder, minilm_available
from lessonbank.retrieval.embedders.static import StaticEmbedder

if TYPE_CHECKING:
    from lessonbank.retrieval.embedders.openai import OpenAIEmbedder

__all__ = [
    "Embedder",
    "HashEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "StaticEmbedder",
    "cosine",
    "make_embedder",
    "minilm_available",
]


def __getattr__(name: str) -> Any:
    # OpenAIEmbedder needs the openai SDK: it loads when first asked for, not with the package
    if name == "OpenAIEmbedder":
        from lessonbank.retrieval.embedders.openai import OpenAIEmbedder

        return OpenAIEmbedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        embedder = MiniLMEmbedder()
        embedder.check_installed()
        return embedder
    if lowered == "static":
        static = StaticEmbedder()
        static.check_installed()
        return static
    if lowered == "auto":
        return MiniLMEmbedder() if minilm_available() else None
    if lowered.startswith("openai:"):
        model, base_url = _split_base_url(text[len("openai:") :])
        if not model:
            raise ConfigError(
                f"bad embedder spec {spec!r}: use 'openai:MODEL' or 'openai:MODEL@http://host:port/v1'"
            )
        from lessonbank.retrieval.embedders.openai import OpenAIEmbedder

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
