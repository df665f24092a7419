"""Exact lexical recall: one namespace's term vectors as an in-process inverted index (numpy).

Every query word counts: nothing is dropped as too common, and no bound on work changes the
answer. A recall ranks with BM25 exactly as :mod:`lessonbank.stores.lexical` defines it (FTS5's
formula with its ``BM25_K1`` and ``BM25_B``, IDF floored, field weights in the term frequencies), from
the namespace's own figures at that moment: its lesson count, mean length and each word's document
frequency. It reads the postings of the rare words and looks the common words up only for the
lessons that can still reach the top (:mod:`lessonbank.retrieval.pruning`, MaxScore with per-word
bounds and one-byte impact codes kept per base, a threshold from exact scores;
:mod:`lessonbank.retrieval.lexical_words` gathers the query's words); ``search(..., exhaustive=True)``
scores every posting instead (vectorised, as in bm25s), the reference the pruned ranking equals to
the last bit.

A recall's scope (kinds, tags, agent, task type, goal: each lesson's term vector names its own)
narrows the lessons BM25's figures are taken over, so a recall filtered to one agent ranks as a
bank of that agent's lessons would. The other filters (status, expiry) are applied after
ranking, walking the ranking in growing batches until ``limit`` lessons pass: a filtered recall
returns the true top ``limit`` of the lessons that pass, however few they are.

Keeping in step: the store writes a lesson's term vector in the lesson's own transaction, as a
vector of ``LEXICAL_SPACE``; the index follows them by the vectors' change sequence (as
:class:`~lessonbank.retrieval.vector.VectorIndex` does), on every search. Rows written since the
index was built go to a small delta (Python postings) and a rewritten lesson's old slot is marked
dead; past ``DELTA_MIN`` slots or an eighth of the index, the base is rebuilt from the live
slots. When the store holds fewer term vectors than the index (lessons deleted: deletes have no
sequence number), one lookup finds which; any other difference reloads the index in full.

Snapshots (:mod:`lessonbank.retrieval.snapshot`): once a sync has built the base afresh (a full
load or a rebuild) over at least ``SNAPSHOT_MIN`` lessons, the index is written beside a SQLite bank
or in the cache folder of a server store's, with the sequence it reflects. A new process's first sync reads that snapshot and
follows the changes after its sequence as above, instead of reading every row; when those changes
reach ``SNAPSHOT_REFRESH`` rows or deleted lessons, it compacts and writes a newer snapshot. A
snapshot that cannot be trusted is ignored (logged) and the index loads in full. Its postings are
checked a block at a time: a search names its words and scope to the sync, which checks their
blocks before anything reads them (a rebuild or a new snapshot checks every block first); a block
that does not match reloads the index in full before the search goes on. Its lesson ids stay as
the file holds them (:class:`~lessonbank.retrieval.snapshot.SnapshotIds`) until the index is rebuilt.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from lessonbank.ports import Candidate, LessonQuery, Store, VectorChanges, vector_pages
from lessonbank.retrieval.lexical_words import PrunedWords
from lessonbank.retrieval.snapshot import IndexState, SnapshotIds, snapshot_of
from lessonbank.retrieval.snapshot_blocks import CheckedPostings
from lessonbank.stores.lexical import (
    BM25_B,
    BM25_K1,
    LEXICAL_SPACE,
    TERM_RECORD,
    idf,
    query_terms,
    scope_hash,
    term_hash,
)

if TYPE_CHECKING:
    import numpy as np

    from lessonbank.retrieval.word_bounds import WordBounds

log = logging.getLogger("lessonbank.retrieval")

DELTA_MIN = 4_096  # slots written since the base was built, before it is rebuilt
DELTA_SHARE = 8  # ... or this share of the index, whichever is larger
GIVE_BACK_FROM = 10_000  # rows read by a sync past which freed memory is handed back
LOAD_PAGE = 20_000  # rows a full load reads at a time (~10 MB of term vectors at ~500 bytes each)
FIRST_BATCH = 2  # the first filter batch is this many times the limit; each next one doubles
SNAPSHOT_MIN = 2_000  # lessons a freshly built index holds before it is worth a snapshot
SNAPSHOT_REFRESH = 1_024  # rows or deletes applied over a snapshot before a newer one is written
SEARCHED_MAX = 8_192  # rows applied at once past which a snapshot's ids are read into a map
PRUNE_FROM = 20_000  # postings of a query's words from which pruning pays for its own work ...
PRUNE_PER_WORD = 1_024  # ... and per word (its cost is per word, what it skips per posting)
PRUNED_MAX = 4_096  # ranks a pruned search is asked for at most; deeper, one exhaustive ranking is cheaper


class LexicalIndex(PrunedWords, CheckedPostings):
    """BM25 over the term vectors of one namespace; thread-safe."""

    def __init__(self, store: Store, namespace: str) -> None:
        import numpy as np

        from lessonbank.retrieval import pruning  # numpy too: imported where its absence is caught

        self._pruning = pruning
        self._scratch = pruning.Scratch()  # used under the lock only
        self.store = store
        self.namespace = namespace
        self._np = np
        self._lock = threading.Lock()
        self._seq = 0
        self._miscount = 0  # rows held minus the store's count at the last full load (0 unless it drifted)
        self._snapshot = snapshot_of(store, namespace)
        self._builds = 0  # bases built from rows (full loads and rebuilds), to know when to snapshot
        self._clear()

    def _clear(self) -> None:
        np = self._np
        self._ids: list[str] | SnapshotIds = []  # slot → lesson id (as a snapshot has them, or a list)
        self._ignored: set[str] = set()  # lessons whose term vector is malformed
        self._slot_of: MutableMapping[str, int] = {}
        self._length = np.zeros(0, dtype=np.float64)  # per slot, grown by doubling
        self._alive = np.zeros(0, dtype=bool)
        self._live = 0
        self._total_length = 0.0
        # The base: postings of slots < _base_slots, sorted by term, one slice per term.
        self._terms = np.zeros(0, dtype=np.uint64)
        self._starts = np.zeros(1, dtype=np.int64)
        self._docs = np.zeros(0, dtype=np.int32)
        self._tf = np.zeros(0, dtype=np.float32)
        self._base_slots = 0
        self._base_dead = 0
        # The delta: postings of slots written since, by term hash.
        self._delta: dict[int, list[tuple[int, float]]] = {}
        # Blocks of the base's postings taken from a snapshot and not yet checked against their
        # checksums (None: all trusted), with those checksums: a search checks its words' blocks.
        self._unchecked: Any = None
        self._sums: Any = None
        self._norm_cache: tuple[tuple[int, float, int], Any] | None = None
        self._bounds: WordBounds | None = None  # per base word (_term_bounds)
        self._dead: tuple[int, Any] | None = None  # the base's dead slots, sorted, at that count of them

    def __len__(self) -> int:
        return self._live

    @property
    def loaded(self) -> bool:
        """Whether the index has read the store (a search then reads only the changes)."""
        return self._seq > 0

    def memory_bytes(self) -> int:
        """What the index holds in memory (arrays and an estimate of its Python parts)."""
        arrays = (self._terms, self._starts, self._docs, self._tf, self._length, self._alive)
        delta = sum(len(postings) for postings in self._delta.values())
        bounds = self._bounds.nbytes() if self._bounds is not None else 0  # codes of the words queried
        return sum(int(a.nbytes) for a in arrays) + bounds + 120 * len(self._ids) + 80 * delta

    # ------------------------------------------------------------------ keeping in step

    def sync(self) -> None:
        with self._lock:
            self._sync()

    def _sync(self, terms: Sequence[str] = (), scope: LessonQuery | None = None) -> None:
        """Follow the store; a search names its words and scope, whose postings are then checked
        against the snapshot they came from (a damaged block: the index reloads in full first)."""
        read = self._read_changes()
        if self._unchecked is not None and (terms or scope is not None):
            read += self._check_words(terms, scope) or 0
        if read >= GIVE_BACK_FROM:
            give_back_memory()  # the rows read are gone; the index holds its own arrays

    def _read_changes(self) -> int:
        """Apply what changed in the store; how many rows that read."""
        restored = self._seq == 0 and self._restore()
        builds = self._builds
        if self._seq == 0:  # nothing held yet: every row, a page at a time
            read, changes = self._load()
        else:
            changes = self.store.vector_changes(self.namespace, LEXICAL_SPACE, self._seq)
            read = len(changes.rows)
            self._apply(changes.rows)
        self._seq = max(self._seq, changes.seq)
        expected = changes.count + self._miscount
        if self._live + len(self._ignored) > expected:
            self._forget_deleted()
        if self._live + len(self._ignored) != expected:
            read += self._reload()
        changed = self._builds != builds or (
            restored and max(len(changes.rows), self._base_dead) >= SNAPSHOT_REFRESH
        )
        if changed and self._snapshot is not None and self._live >= SNAPSHOT_MIN:
            self._save()
        return read

    def _reload(self) -> int:
        """Load every row afresh; how many that read."""
        read, last = self._load()
        self._seq = last.seq
        self._miscount = miscount(self._live + len(self._ignored), last.count, self.namespace, "term vectors")
        return read

    def _refuse_snapshot(self, reason: str) -> int:
        """Refuse the snapshot (logged), reload the index in full and write a good snapshot; the
        rows that read."""
        assert self._snapshot is not None
        self._snapshot.refuse(reason)
        read = self._reload()
        if self._live >= SNAPSHOT_MIN:
            self._save()
        return read

    def _restore(self) -> bool:
        """Take the index from the bank's snapshot, if there is one to trust; whether it did."""
        np = self._np
        state = self._snapshot.read(self.store) if self._snapshot is not None else None
        if state is None:
            return False
        self._clear()
        slots = len(state.ids)
        self._ids = state.ids if isinstance(state.ids, SnapshotIds) else list(state.ids)
        self._slot_of = (  # (not `or`: a map's truth would read every id)
            state.slot_of if state.slot_of is not None else {i: slot for slot, i in enumerate(self._ids)}
        )
        self._ignored = state.ignored
        self._length = state.length
        self._alive = np.ones(slots, dtype=bool)
        self._live = slots
        self._total_length = float(state.length.sum())  # whole numbers: exact in any order
        self._terms, self._starts, self._docs, self._tf = state.terms, state.starts, state.docs, state.tf
        self._restore_figures(state.figures)
        self._base_slots = slots
        self._seq = state.seq
        self._miscount = state.miscount
        if state.blocks is not None and len(state.blocks):
            self._unchecked, self._sums = np.ones(len(state.blocks), dtype=bool), state.blocks
        return True

    def _save(self) -> None:
        """Write the snapshot of the index as it stands (compacted first if it holds a delta)."""
        assert self._snapshot is not None
        if self._check_blocks(None) is not None:  # a damaged block is never written into a new one
            return  # the reload wrote one
        if self._delta or self._base_dead or len(self._ids) != self._live:
            self._rebuild()
        slots = len(self._ids)
        self._snapshot.write(
            IndexState(
                seq=self._seq,
                miscount=self._miscount,
                ids=self._ids,
                ignored=self._ignored,
                length=self._length[:slots],
                terms=self._terms,
                starts=self._starts,
                docs=self._docs,
                tf=self._tf,
                figures=self._word_figures(),
            ),
            self.store,
        )

    def _forget_deleted(self) -> None:
        """Kill the slots of lessons deleted since (deletes have no sequence number): one lookup of
        which lessons still have a term vector, much cheaper than loading them all again."""
        held = [lesson_id for lesson_id, slot in self._slot_of.items() if self._alive[slot]]
        present = self.store.vector_hashes(self.namespace, LEXICAL_SPACE, [*held, *self._ignored])
        for lesson_id in held:
            if lesson_id not in present:
                self._kill(self._slot_of.pop(lesson_id))
        self._ignored &= present.keys()

    def _load(self) -> tuple[int, VectorChanges]:
        """Build the base from scratch out of every row, read a page at a time (the first sync, or
        a reload); how many rows that read, and the last page (its sequence and count)."""
        from lessonbank.retrieval.lexical_load import PagedBase

        self._clear()
        pages = PagedBase(self._well_formed, give_back_memory)
        read, page = 0, VectorChanges(rows=[], seq=0, count=0)
        for page in vector_pages(self.store, self.namespace, LEXICAL_SPACE, LOAD_PAGE):
            read += len(page.rows)
            pages.add(page.rows)
            page = replace(page, rows=[])  # its rows are postings now
        if len(pages):
            base = pages.finish()
            del pages
            self._ids, self._slot_of = base.ids, base.slot_of
            self._length = base.length
            self._alive = self._np.ones(len(base.ids), dtype=bool)
            self._live = len(base.ids)
            self._total_length = float(base.length.sum())
            self._take_base(base.terms, base.starts, base.docs, base.tf, len(base.ids))
        return read, page

    def _well_formed(self, lesson_id: str, vector: bytes) -> bool:
        """A term vector is whole records, its length record first; another row (a damaged file,
        another writer's format) is skipped and logged, counted as seen so it forces no reload."""
        if vector and not len(vector) % TERM_RECORD.size and TERM_RECORD.unpack_from(vector)[0] == 0:
            self._ignored.discard(lesson_id)
            return True
        if lesson_id not in self._ignored:
            log.warning(
                "lesson %s: its term vector is malformed (%d bytes); lexical recall skips it",
                lesson_id,
                len(vector),
            )
        self._ignored.add(lesson_id)
        return False

    def _build(self, terms: np.ndarray, slots: np.ndarray, tf: np.ndarray, base_slots: int) -> None:
        """The base out of postings sorted by term, slots ascending within a term."""
        np = self._np
        if len(terms):
            change = np.flatnonzero(terms[1:] != terms[:-1]) + 1
            starts = np.concatenate(([0], change, [len(terms)])).astype(np.int64)
            unique = terms[starts[:-1]]
        else:
            starts, unique = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint64)
        self._take_base(unique, starts, slots, tf, base_slots)

    def _take_base(self, terms: Any, starts: Any, docs: Any, tf: Any, base_slots: int) -> None:
        """Hold ``terms`` (each once, ascending) and their postings (``starts``) as the base."""
        np = self._np
        self._terms, self._starts = terms, starts
        # Kept at 4 bytes each (slots are < 2^31; a weighted frequency is a sum of field weights,
        # exact in float32): half the memory of intp and float64, cast per query for the scoring.
        self._docs = np.ascontiguousarray(docs, dtype=np.int32)
        self._tf = np.ascontiguousarray(tf, dtype=np.float32)
        self._base_slots = base_slots
        self._base_dead = 0
        self._delta = {}
        self._norm_cache = None
        self._dead = None
        self._unchecked = self._sums = None  # postings built here need no checking
        self._bound_every_word()
        self._builds += 1

    def _apply(self, rows: Sequence[tuple[str, bytes]]) -> None:
        """Add rows written since the last sync to the delta (a rewritten lesson's old slot dies)."""
        from lessonbank.retrieval.lexical_load import newest  # numpy too: loaded by then

        if len(rows) > SEARCHED_MAX and not isinstance(self._slot_of, dict):
            self._slot_of = dict(self._slot_of)  # one map of every id beats this many searches
        for lesson_id, vector in newest(rows):
            old = self._slot_of.get(lesson_id)
            if old is not None:
                self._kill(old)
            if not self._well_formed(lesson_id, vector):
                continue
            slot = self._grow(lesson_id)
            for term, tf, length in TERM_RECORD.iter_unpack(vector):
                if term == 0:
                    self._length[slot] = length
                    self._total_length += length
                else:
                    self._delta.setdefault(term, []).append((slot, tf))
        delta_slots = len(self._ids) - self._base_slots
        if delta_slots > max(DELTA_MIN, len(self._ids) // DELTA_SHARE) or (
            self._base_dead > max(DELTA_MIN, self._base_slots // DELTA_SHARE)
        ):
            self._rebuild()

    def _grow(self, lesson_id: str) -> int:
        np = self._np
        slot = len(self._ids)
        if slot >= len(self._length):
            size = max(1024, 2 * len(self._length))
            self._length = np.concatenate((self._length, np.zeros(size - len(self._length))))
            self._alive = np.concatenate((self._alive, np.zeros(size - len(self._alive), dtype=bool)))
        self._ids.append(lesson_id)
        self._slot_of[lesson_id] = slot
        self._norm_cache = None
        self._alive[slot] = True
        self._live += 1
        return slot

    def _kill(self, slot: int) -> None:
        if not self._alive[slot]:
            return
        self._norm_cache = None
        self._alive[slot] = False
        self._live -= 1
        self._total_length -= float(self._length[slot])
        if slot < self._base_slots:
            self._base_dead += 1

    def _rebuild(self) -> None:
        """One base out of the live slots of the base and the delta, slots renumbered densely."""
        if self._check_blocks(None) is not None:  # a damaged block: reloaded in full instead
            return
        np = self._np
        slots = len(self._ids)
        alive = self._alive[:slots]
        renumber = np.cumsum(alive, dtype=np.int64) - 1
        base_keep = alive[self._docs]
        base_terms = np.repeat(self._terms, np.diff(self._starts))[base_keep]
        delta = [
            (term, slot, tf) for term, postings in self._delta.items() for slot, tf in postings if alive[slot]
        ]
        delta_terms = np.fromiter((d[0] for d in delta), np.uint64, len(delta))
        delta_slots = np.fromiter((d[1] for d in delta), np.int64, len(delta))
        delta_tf = np.fromiter((d[2] for d in delta), np.float64, len(delta))
        terms = np.concatenate((base_terms, delta_terms))
        new_slots = renumber[np.concatenate((self._docs[base_keep].astype(np.int64), delta_slots))]
        tf = np.concatenate((self._tf[base_keep], delta_tf))
        # Slot order within a term must stay ascending: sort by (term, slot).
        order = np.lexsort((new_slots, terms))
        self._ids = [lesson_id for lesson_id, keep in zip(self._ids, alive.tolist(), strict=True) if keep]
        self._slot_of = {lesson_id: slot for slot, lesson_id in enumerate(self._ids)}
        self._length = self._length[:slots][alive].copy()
        self._alive = np.ones(len(self._ids), dtype=bool)
        self._build(terms[order], new_slots[order], tf[order], len(self._ids))

    # ------------------------------------------------------------------ search

    def search(
        self,
        terms: Sequence[str],
        limit: int,
        passing: Callable[[list[str]], list[Candidate]],
        scope: LessonQuery | None = None,
        *,
        exhaustive: bool = False,
    ) -> list[Candidate]:
        """The ``limit`` best lessons by BM25 among those ``passing`` lets through, best first.

        ``passing`` takes lesson ids (best first) and returns the candidates of those that pass
        the recall's filters, in that order (``Store.candidates``). ``scope``'s kinds, tags, agent,
        task type and goal narrow the lessons BM25's figures are taken over (every status counts),
        so a filtered recall ranks as a bank holding only those lessons would.

        The ranking skips most postings (:mod:`lessonbank.retrieval.pruning`); ``exhaustive``
        scores every one instead, the reference it must equal (same lessons, scores and order).
        """
        if limit <= 0:
            return []
        batches = self._exhaustive(terms, limit, scope) if exhaustive else self._pruned(terms, limit, scope)
        out: list[Candidate] = []
        for relevance in batches:
            for found in passing(list(relevance)):
                out.append(replace(found, relevance=relevance[found.lesson_id]))
                if len(out) == limit:
                    return out
        return out

    def _exhaustive(
        self, terms: Sequence[str], limit: int, scope: LessonQuery | None
    ) -> Iterator[dict[str, float]]:
        """Every posting scored, then ranked in batches (lesson id → score, best first)."""
        with self._lock:
            self._sync(terms, scope)
            slots, scores = self._score(terms, self._scope_mask(scope))
            ids = self._ids  # a rebuild replaces the list; appends keep every slot in place
        batches = self._pruning.ranked_batches(slots, scores, FIRST_BATCH * limit)  # sorted outside the lock
        for batch_slots, batch_scores in batches:
            yield {ids[int(s)]: float(v) for s, v in zip(batch_slots, batch_scores, strict=True)}

    def _pruned(
        self, terms: Sequence[str], limit: int, scope: LessonQuery | None
    ) -> Iterator[dict[str, float]]:
        """The exact head of the ranking, deeper each time the filters turn too many away: the
        first ``FIRST_BATCH × limit`` ranks, then four times as many, ...; past ``PRUNED_MAX`` ranks
        the rest comes from one exhaustive ranking."""
        want, given = FIRST_BATCH * limit, 0
        yielded: set[str] = set()
        with self._lock:
            self._sync(terms, scope)
        while True:
            with self._lock:  # later batches rank the index as it is then (a rebuild renumbers slots)
                if want > PRUNED_MAX:  # the whole ranking: this batch is the last
                    slots, scores = self._score(terms, self._scope_mask(scope))
                    order = self._np.lexsort((slots, -scores))
                    slots, scores, want = slots[order], scores[order], len(slots) + 1
                else:
                    slots, scores = self._top(terms, want, scope)
                ids = self._ids
            batch = {ids[s]: v for s, v in zip(slots[given:].tolist(), scores[given:].tolist(), strict=True)}
            for lesson_id in yielded & batch.keys():
                del batch[lesson_id]
            yielded |= batch.keys()
            yield batch
            if len(slots) < want:
                return
            want, given = want * 4, len(slots)

    def _top(self, terms: Sequence[str], want: int, scope: LessonQuery | None) -> tuple[Any, Any]:
        """The ``want`` best slots and their scores, best first, by pruned search."""
        mask = self._scope_mask(scope)
        wanted = query_terms(terms)
        if mask is None:
            docs, total_length = self._live, self._total_length
        else:
            docs, total_length = int(mask.sum()), float(self._length[: len(self._ids)][mask].sum())
        if not wanted or not docs:
            return self._np.zeros(0, dtype=self._np.int64), self._np.zeros(0)
        hashes = list(dict.fromkeys(term_hash(word) for word in wanted))
        held = self._pruning.posting_count(self._terms, self._starts, hashes)
        held += sum(len(self._delta.get(term, ())) for term in hashes)
        if held < max(PRUNE_FROM, PRUNE_PER_WORD * len(hashes)):  # pruning's own work costs more
            return self._pruning.head(*self._score(terms, mask), want)
        norm = self._norm(docs, total_length, mask)
        per_token = BM25_K1 * BM25_B * docs / (total_length or 1.0)  # as in the norm
        words = self._words(hashes, mask, docs, norm, per_token)
        keep = mask if mask is not None else (self._alive if self._base_dead else None)
        return self._pruning.top_slots(words, norm, keep, want, self._scratch)

    def _postings(self, terms: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per term: every live slot holding it and its weighted frequency, base and delta."""
        np = self._np
        wanted = np.fromiter(terms, np.uint64, len(terms))  # a Python int would turn the search to floats
        where = np.searchsorted(self._terms, wanted).tolist()
        out = []
        for term, at in zip(wanted.tolist(), where, strict=True):
            docs, tf = self._docs[:0], self._tf[:0]
            if at < len(self._terms) and int(self._terms[at]) == term:
                start, end = int(self._starts[at]), int(self._starts[at + 1])
                docs, tf = self._docs[start:end], self._tf[start:end]
                if self._base_dead:
                    keep = self._alive[docs]
                    docs, tf = docs[keep], tf[keep]
            delta = [(slot, value) for slot, value in self._delta.get(term, ()) if self._alive[slot]]
            if delta:
                docs = np.concatenate((docs, np.fromiter((d[0] for d in delta), np.int32, len(delta))))
                tf = np.concatenate((tf, np.fromiter((d[1] for d in delta), np.float32, len(delta))))
            out.append((docs, tf))
        return out

    def _scope_mask(self, scope: LessonQuery | None) -> Any:
        """The live slots inside ``scope``'s kinds, tags, agent, task type and goal, as a boolean
        array (None: every one)."""
        if scope is None:
            return None
        np = self._np
        wanted: list[list[int]] = []  # every group must match; within a group, any value
        if scope.kinds is not None:
            wanted.append([scope_hash("kind", kind) for kind in scope.kinds])
        wanted += [[scope_hash("tag", tag)] for tag in scope.tags]
        for name in ("agent", "task_type", "goal_id"):
            value = getattr(scope, name)
            if value is not None:
                wanted.append([scope_hash(name, value)])
        if not wanted:
            return None
        mask = self._alive[: len(self._ids)].copy()
        for group in wanted:
            inside = np.zeros(len(self._ids), dtype=bool)
            for docs, _ in self._postings(group):
                inside[docs] = True
            mask &= inside
        return mask

    def _score(self, terms: Sequence[str], mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        np = self._np
        wanted = query_terms(terms)
        if mask is None:
            docs, total_length = self._live, self._total_length
        else:
            docs, total_length = int(mask.sum()), float(self._length[: len(self._ids)][mask].sum())
        if not wanted or not docs:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        # All postings of the query's words in one pass: BM25 per posting, summed per slot.
        slots, frequencies, weights = [], [], []
        for held, tf in self._postings(list(dict.fromkeys(term_hash(word) for word in wanted))):
            if mask is not None:
                keep = mask[held]
                held, tf = held[keep], tf[keep]
            if len(held):
                slots.append(held)
                frequencies.append(tf)
                weights.append(idf(docs, len(held)) * (BM25_K1 + 1.0))
        if not slots:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        held = np.concatenate(slots).astype(np.intp)  # what indexing and bincount take
        tf = np.concatenate(frequencies).astype(np.float64)
        # weight · tf / (tf + norm), in place: a 64-word query over 100k lessons is ~800k postings,
        # and each temporary array of that size costs as much as the arithmetic.
        contribution = np.take(self._norm(docs, total_length, mask), held)
        np.add(contribution, tf, out=contribution)
        np.divide(tf, contribution, out=contribution)
        np.multiply(
            contribution, np.repeat(np.array(weights), [len(part) for part in slots]), out=contribution
        )
        acc = np.bincount(held, weights=contribution, minlength=len(self._ids))
        found = np.flatnonzero(acc)
        return found, acc[found]

    def _norm(self, docs: int, total_length: float, mask: Any) -> Any:
        """BM25's length normalisation of every slot, k1·(1 − b + b·length/avg): kept while the
        figures it was taken with hold (a query scoped to a slice computes its own)."""
        key = (docs, total_length, len(self._ids))
        if mask is None and self._norm_cache is not None and self._norm_cache[0] == key:
            return self._norm_cache[1]
        per_token = BM25_K1 * BM25_B * docs / (total_length or 1.0)
        norm = BM25_K1 * (1.0 - BM25_B) + per_token * self._length[: len(self._ids)]
        if mask is None:
            self._norm_cache = (key, norm)
        return norm


def give_back_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc only; elsewhere nothing): a full load
    reads every row as a Python bytes object, and once those are freed the process would otherwise
    keep their pages, a few hundred MB at a million lessons, for nothing."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def miscount(held: int, counted: int, namespace: str, what: str) -> int:
    """How many more rows a full load found than the store counts (logged when not 0): an index
    compares later counts with that difference, so a count that drifted costs one reload, not one
    on every search."""
    if held != counted:
        log.warning(
            "namespace %s: the store counts %d %s but holds %d; the index follows what it holds",
            namespace,
            counted,
            what,
            held,
        )
    return held - counted
