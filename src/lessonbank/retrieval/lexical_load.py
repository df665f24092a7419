"""A lexical index's full load: every term vector of a namespace read a page at a time
(``lexical_index.LOAD_PAGE`` rows) and gathered into compact arrays, so that no step holds the whole bank twice.

Each page's rows become postings at once (16 bytes each: term hash, slot, weighted frequency) and
the page's bytes are let go; its postings are split into ``BUCKETS`` runs by the top bits of their
term hash. The base wants every posting sorted by term, slots ascending within a term; the buckets
are sorted one at a time into arrays allocated once and written in order (untouched pages of a fresh
array cost nothing until written), and each bucket's runs are freed once sorted. At a million lessons
(~40M postings) the load's peak is then about the postings once (~640 MB) and a bucket's sort, where
reading every row at once, joining them and sorting every posting together held the bank in several
forms at the same time (3-5 GB).

A lesson rewritten while the pages are read is met again in a later page: its earlier slot is
dropped when the load finishes (slots renumbered densely, in the order of their rows), as a single
read's newest-write-per-lesson would have it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lessonbank.stores.lexical import TERM_RECORD

BUCKET_BITS = 6  # postings are sorted in 2**BUCKET_BITS runs, by the top bits of their term hash
BUCKETS = 1 << BUCKET_BITS
RECORD = np.dtype([("term", "<u8"), ("tf", "<f4"), ("length", "<u4")])  # TERM_RECORD, as numpy reads it
assert RECORD.itemsize == TERM_RECORD.size


@dataclass
class LoadedBase:
    """What a full load built: the slots' lesson ids and lengths, and every posting sorted by term
    (slots ascending within a term), the terms once each with where each one's postings start."""

    ids: list[str]
    slot_of: dict[str, int]  # lesson id → slot
    length: Any  # float64 per slot
    terms: Any  # uint64, ascending, each once
    starts: Any  # int64, len(terms) + 1
    docs: Any  # int32 per posting
    tf: Any  # float32 per posting


class PagedBase:
    """Rows added a page at a time (``add``), then one base (``finish``)."""

    def __init__(
        self, well_formed: Callable[[str, bytes], bool], give_back: Callable[[], None] = lambda: None
    ) -> None:
        self._well_formed = well_formed  # logs and remembers a malformed row (the index's own check)
        # Hands freed heap pages back to the system: a page's runs are small arrays, which the C
        # heap keeps once freed, so without it the sorted arrays would be new memory beside them.
        self._give_back = give_back
        self._ids: list[str] = []
        self._slot_of: dict[str, int] = {}
        self._superseded: list[int] = []  # slots of lessons met again in a later page
        self._lengths: list[Any] = []
        self._runs: list[list[tuple[Any, Any, Any]]] = [[] for _ in range(BUCKETS)]
        self._postings = 0

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, rows: Sequence[tuple[str, bytes]]) -> None:
        """One page of rows (lesson id, term vector), in the store's order."""
        kept: list[tuple[str, bytes]] = []
        for lesson_id, vector in newest(rows):
            old = self._slot_of.pop(lesson_id, None)
            if old is not None:  # rewritten since an earlier page: the newer row counts, whatever it is
                self._superseded.append(old)
            if self._well_formed(lesson_id, vector):
                self._slot_of[lesson_id] = len(self._ids) + len(kept)
                kept.append((lesson_id, vector))
        if not kept:
            return
        first = len(self._ids)
        self._ids.extend(lesson_id for lesson_id, _ in kept)
        records = np.frombuffer(b"".join(vector for _, vector in kept), dtype=RECORD)
        counts = np.fromiter((len(vector) // RECORD.itemsize for _, vector in kept), np.int64, len(kept))
        slots = np.repeat(np.arange(first, first + len(kept), dtype=np.int32), counts)
        header = records["term"] == 0
        lengths = np.zeros(len(kept))
        lengths[slots[header] - first] = records["length"][header]
        self._lengths.append(lengths)
        postings = ~header
        terms, slots, tf = records["term"][postings], slots[postings], records["tf"][postings]
        # Split by bucket, keeping the page's order within each (slots ascend): a stable sort of
        # one byte per posting is a radix sort.
        bucket = (terms >> np.uint64(64 - BUCKET_BITS)).astype(np.uint8)
        order = np.argsort(bucket, kind="stable")
        cuts = np.cumsum(np.bincount(bucket, minlength=BUCKETS))[:-1]
        for run, part in zip(self._runs, np.split(order, cuts), strict=True):
            if len(part):
                run.append((terms[part], slots[part], tf[part]))
        self._postings += len(terms)

    def finish(self) -> LoadedBase:
        """The base of every row added (the pages' runs are given up as they are sorted)."""
        ids, length = self._ids, np.concatenate(self._lengths) if self._lengths else np.zeros(0)
        slot_of, self._ids, self._slot_of, self._lengths = self._slot_of, [], {}, []
        keep = None
        if self._superseded:
            keep = np.ones(len(ids), dtype=bool)
            keep[self._superseded] = False
            renumber = (np.cumsum(keep, dtype=np.int64) - 1).astype(np.int32)
            ids = [lesson_id for lesson_id, kept in zip(ids, keep.tolist(), strict=True) if kept]
            slot_of = {lesson_id: slot for slot, lesson_id in enumerate(ids)}
            length = length[keep]
        terms = np.empty(self._postings, dtype=np.uint64)
        docs = np.empty(self._postings, dtype=np.int32)
        tf = np.empty(self._postings, dtype=np.float32)
        end = 0
        for bucket in range(BUCKETS):
            run, self._runs[bucket] = self._runs[bucket], []
            if not run:
                continue
            run_terms = np.concatenate([part[0] for part in run])
            run_slots = np.concatenate([part[1] for part in run])
            run_tf = np.concatenate([part[2] for part in run])
            del run
            if keep is not None:
                live = keep[run_slots]
                run_terms, run_slots, run_tf = run_terms[live], renumber[run_slots[live]], run_tf[live]
            order = np.argsort(run_terms, kind="stable")  # pages came in slot order: slots stay ascending
            start, end = end, end + len(order)
            np.take(run_terms, order, out=terms[start:end])
            np.take(run_slots, order, out=docs[start:end])
            np.take(run_tf, order, out=tf[start:end])
            del run_terms, run_slots, run_tf, order
            self._give_back()
        terms, docs, tf = terms[:end], docs[:end], tf[:end]
        if end:
            change = np.flatnonzero(terms[1:] != terms[:-1]) + 1
            starts = np.concatenate(([0], change, [end])).astype(np.int64)
            unique = terms[starts[:-1]]
        else:
            starts, unique = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint64)
        del terms  # the base keeps each term once
        return LoadedBase(
            ids=ids, slot_of=slot_of, length=length, terms=unique, starts=starts, docs=docs, tf=tf
        )


def newest(rows: Sequence[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """The last row of each lesson, in order of those last rows."""
    last: dict[str, bytes] = {}
    for lesson_id, vector in rows:
        last.pop(lesson_id, None)
        last[lesson_id] = vector
    return list(last.items())
