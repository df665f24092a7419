"""HyDE: the reflection LLM writes the lesson it would expect to find, and that joins the query.

A task ("split pkg/auth/manager.go into smaller files") and the lesson that helps it ("when
editing large Go files use Edit, not a full rewrite") often share few words. A short
hypothetical answer written in the lesson's own register bridges that gap for both the
keyword and the vector search. Off by default (it costs one LLM call per new query); a
bounded cache makes a repeated query free, and any LLM failure falls back to the plain query.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from lessonbank.llm.base import LLM, run_sync
from lessonbank.redact import redact

log = logging.getLogger("lessonbank.retrieval")

HYDE_MAX_TOKENS = 120
HYDE_MAX_QUERY_CHARS = 2_000
HYDE_MAX_CHARS = 800
CACHE_SIZE = 1_024

HYDE_SYSTEM = (
    "You write the lesson an experienced engineer would have learned before doing a task. "
    "Answer with 1-3 plain sentences: the situation, the usual mistake, and what to do instead. "
    "No preamble, no markdown."
)


class HyDE:
    """Hypothetical lessons for queries, one LLM call per distinct query, cached."""

    def __init__(
        self,
        llm: LLM,
        *,
        cache_size: int = CACHE_SIZE,
        max_tokens: int = HYDE_MAX_TOKENS,
    ) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self.cache_size = cache_size
        self._cache: OrderedDict[str, str | None] = OrderedDict()
        self._lock = threading.Lock()
        self.calls = 0
        self.hits = 0

    def expand(self, query: str) -> str | None:
        """The hypothetical lesson for ``query``, or None if the LLM failed or said nothing.

        An answer (an empty one included) is cached; a failure is not, so the next call tries again.
        """
        key = " ".join(query.split())[:HYDE_MAX_QUERY_CHARS]
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self.hits += 1
                return self._cache[key]
        try:
            answer = self._ask(key)
        except Exception as exc:  # a failed expansion only costs the extra query, never the recall
            # Not cached: a transient failure must not turn HyDE off for this query for good.
            log.warning(
                "HyDE: no hypothetical answer (%s: %s); recalling with the query alone",
                type(exc).__name__,
                exc,
            )
            return None
        with self._lock:
            self._cache[key] = answer
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return answer

    def _ask(self, query: str) -> str | None:
        with self._lock:
            self.calls += 1
        completion = run_sync(
            self.llm.complete(
                [
                    {"role": "system", "content": HYDE_SYSTEM},
                    {"role": "user", "content": f"Task: {redact(query)}"},
                ],
                max_tokens=self.max_tokens,
                temperature=0.0,
            )
        )
        text = " ".join(completion.text.split())[:HYDE_MAX_CHARS]
        return text or None
