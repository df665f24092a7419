"""A restored lexical index's postings, checked a block at a time against its snapshot's checksums.

Part of :class:`~lessonbank.retrieval.lexical_index.LexicalIndex` (a base class of it), kept apart so
each module stays readable. A search names its words and scope; the blocks holding their postings are
checked before anything reads them, each once (a rebuild or a new snapshot checks every block first).
A block that does not match refuses the snapshot and reloads the index in full before the search goes
on: a damaged file costs time, never an answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lessonbank.retrieval.lexical_words import IndexArrays
from lessonbank.retrieval.snapshot import block_sums, blocks_holding
from lessonbank.stores.lexical import query_terms, scope_hash, term_hash

if TYPE_CHECKING:
    from lessonbank.ports import LessonQuery
    from lessonbank.retrieval.word_bounds import WordBounds


class CheckedPostings(IndexArrays):
    """Block checks over the index's arrays; ``_unchecked`` is None once every block is checked."""

    if TYPE_CHECKING:  # the rest of the index's state it reads (see LexicalIndex._clear)
        _unchecked: Any
        _sums: Any
        _bounds: WordBounds | None

        def _refuse_snapshot(self, reason: str) -> int: ...

    def _check_words(self, terms: Sequence[str], scope: LessonQuery | None) -> int | None:
        """Check the blocks of postings a search of ``terms`` in ``scope`` reads (see
        :meth:`_check_blocks`)."""
        np = self._np
        hashes = [term_hash(word) for word in query_terms(terms)]
        if scope is not None:
            hashes += [scope_hash("kind", kind) for kind in scope.kinds or ()]
            hashes += [scope_hash("tag", tag) for tag in scope.tags]
            hashes += [
                scope_hash(name, getattr(scope, name))
                for name in ("agent", "task_type", "goal_id")
                if getattr(scope, name) is not None
            ]
        # Sorted and each once (np.unique would import numpy.ma: ~25 ms of a new process's first recall).
        wanted = np.array(sorted(set(hashes)), dtype=np.uint64)
        at = np.searchsorted(self._terms, wanted)
        inside = at < len(self._terms)
        at, wanted = at[inside], wanted[inside]
        blocks = {
            block
            for i in at[self._terms[at] == wanted].tolist()
            for block in blocks_holding(int(self._starts[i]), int(self._starts[i + 1]))
        }
        return self._check_blocks(sorted(blocks))

    def _check_blocks(self, blocks: Sequence[int] | None) -> int | None:
        """Check ``blocks`` of postings (None: every one) against the snapshot's checksums, each
        once; None when they match. When one does not, the snapshot is refused (logged) and the
        index reloads in full (and writes a good snapshot): then the rows that read."""
        np = self._np
        if self._unchecked is None:
            return None
        todo = (
            np.flatnonzero(self._unchecked) if blocks is None else [b for b in blocks if self._unchecked[b]]
        )
        assert (
            self._bounds is not None and self._bounds.coded is not None
        )  # the snapshot's, with its postings
        for block in todo:
            block = int(block)
            sums = block_sums(self._docs, self._tf, self._bounds.coded, block, block + 1)
            if int(sums[0]) != int(self._sums[block]):
                return self._refuse_snapshot(f"block {block} of its postings does not match its checksum")
            self._unchecked[block] = False
        if blocks is None or not self._unchecked.any():
            self._unchecked = self._sums = None
        return None
