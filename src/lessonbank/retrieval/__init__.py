"""Retrieval: a query in, ranked lessons out. Lexical (BM25 over FTS) in this version."""

from lessonbank.retrieval.lexical import recall_lexical
from lessonbank.retrieval.scoring import blend, temporal_score

__all__ = ["blend", "recall_lexical", "temporal_score"]
