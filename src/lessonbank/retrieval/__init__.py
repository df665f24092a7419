"""Retrieval: a query in, ranked lessons out — lexical (BM25), vector (embeddings), hybrid fusion, HyDE.

Embedders (``lessonbank.retrieval.embedders``) need the ``embeddings`` extra; without one,
recall stays lexical and nothing here imports numpy.
"""

from lessonbank.retrieval.hybrid import RECALL_MODES, Retriever, vector_text
from lessonbank.retrieval.hyde import HyDE
from lessonbank.retrieval.lexical import recall_lexical
from lessonbank.retrieval.scoring import blend, temporal_score, utility

__all__ = [
    "RECALL_MODES",
    "HyDE",
    "Retriever",
    "blend",
    "recall_lexical",
    "temporal_score",
    "utility",
    "vector_text",
]
