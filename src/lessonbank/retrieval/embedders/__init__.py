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

from typing import TYPE_CHECKING

from lessonbank.errors import ConfigError
from lessonbank.lazy_names import lazy_names
from lessonbank.retrieval.embedders.base import Embedder, cosine
from lessonbank.retrieval.embedders.hash import HashEmbedder

if TYPE_CHECKING:
    from lessonbank.retrieval.embedders.minilm import MiniLMEmbedder, minilm_available
    from lessonbank.retrieval.embedders.openai import OpenAIEmbedder
    from lessonbank.retrieval.embedders.static import StaticEmbedder

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


# Each model's module loads when first asked for, not with the package: the openai SDK for
# OpenAIEmbedder, and a lexical recall (no embedder) loads neither MiniLM's nor the static model's code.
__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "MiniLMEmbedder": f"{__name__}.minilm",
        "minilm_available": f"{__name__}.minilm",
        "OpenAIEmbedder": f"{__name__}.openai",
        "StaticEmbedder": f"{__name__}.static",
    },
    globals(),
)


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
    if lowered in ("minilm", "auto"):
        from lessonbank.retrieval.embedders.minilm import MiniLMEmbedder, minilm_available

        if lowered == "auto":
            return MiniLMEmbedder() if minilm_available() else None
        embedder = MiniLMEmbedder()
        embedder.check_installed()
        return embedder
    if lowered == "static":
        from lessonbank.retrieval.embedders.static import StaticEmbedder

        static = StaticEmbedder()
        static.check_installed()
        return static
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
