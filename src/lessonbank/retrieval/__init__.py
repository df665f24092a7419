"""Retrieval: a query in, ranked lessons out — lexical (BM25), vector (embeddings), hybrid fusion, HyDE.

Embedders (``lessonbank.retrieval.embedders``) need the ``embeddings`` extra to compute vectors;
without one, recall stays lexical. Importing this package never imports numpy or the openai SDK.
"""

from typing import TYPE_CHECKING, Any

from lessonbank.retrieval import embedders
from lessonbank.retrieval.embedders import Embedder, HashEmbedder, make_embedder
from lessonbank.retrieval.hybrid import RECALL_MODES, Retriever, vector_text
from lessonbank.retrieval.hyde import HyDE
from lessonbank.retrieval.lexical import recall_lexical
from lessonbank.retrieval.scoring import blend, temporal_score, utility

if TYPE_CHECKING:
    from lessonbank.retrieval.embedders.openai import OpenAIEmbedder

__all__ = [
    "RECALL_MODES",
    "Embedder",
    "HashEmbedder",
    "HyDE",
    "OpenAIEmbedder",
    "Retriever",
    "blend",
    "make_embedder",
    "recall_lexical",
    "temporal_score",
    "utility",
    "vector_text",
]


def __getattr__(name: str) -> Any:
    # OpenAIEmbedder needs the openai SDK: the embedders package loads it when first asked for
    if name == "OpenAIEmbedder":
        return embedders.OpenAIEmbedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
