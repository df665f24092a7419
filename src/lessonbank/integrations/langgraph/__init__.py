"""LangGraph: a store whose items are lessons, and the nodes that bring lessons into a graph's runs.

Needs ``pip install 'lessonbank[langgraph]'``; ``import lessonbank`` never loads it.

- :class:`LessonBankStore`: ``graph.compile(store=LessonBankStore(bank))``, LangGraph's
  ``BaseStore`` (get, put, delete, search with filters and a query ranked by lessonbank's recall,
  list namespaces, TTL) over one bank namespace.
- :func:`context_node` / :func:`record_node`: before the model node, the context block and the ids
  of the lessons in it; after it, the run recorded as an episode crediting those lessons.
"""

from __future__ import annotations

from lessonbank.errors import ConfigError

try:
    import langgraph.store.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ConfigError(
        "the LangGraph integration needs langgraph: pip install 'lessonbank[langgraph]'"
    ) from exc

from lessonbank.integrations.langgraph.nodes import context_node, record_node
from lessonbank.integrations.langgraph.store import LessonBankStore

__all__ = ["LessonBankStore", "context_node", "record_node"]
