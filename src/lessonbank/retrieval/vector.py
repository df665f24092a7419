"""Vector search: one namespace's lesson vectors for one embedder, as an in-process matrix.

Vectors live in the store as plain float32 bytes (every backend, no server extension); this
index mirrors them in a numpy matrix and answers a query with one matrix-vector product.
At 100k lessons × 384 dimensions that is ~38 M multiply-adds, a few milliseconds on one core,
which is why a brute-force scan beats keeping an approximate index in step with three stores.

Past ``BINARY_FROM`` vectors the exact scan is bound by memory bandwidth (100k × 384 float32 is
154 MB read per query), so the search runs in two steps: the sign bits of each (mean-centred)
vector, 48 bytes for 384 dimensions, are compared with the query's by Hamming distance, and the
closest few thousand (``MIN_RESCORE``) are re-ranked by their exact cosine. The bits are kept
column-major (one contiguous array per 64 dimensions), so the distance is a handful of passes
over 100k words: 0.5 ms where a row-major layout took 4. bench/vector_scan.py measures speed and
how much of the exact top 40 the two steps return (0.98 at 100k real lesson vectors).

Past ``MAPPED_FROM`` rows the float32 matrix lives in a memory-mapped temporary file, not in
the process's own memory: the search reads the sign bits (48 bytes a vector, in memory) and only
the shortlisted rows of the matrix, so the kernel keeps the pages in use and may drop the rest. A
client holding a million 384-dimension vectors keeps ~50 MB of bits and ids resident, not 1.5 GB
(bench/vector_scan.py reports both). The shortlist grows with the index (``RESCORE_SHARE_OF_INDEX``),
so its quality holds at a million vectors.

Keeping in step: every write gets a growing sequence number in the store, so a sync reads
only the rows written since the last one. When the store holds fewer vectors than the index
(lessons deleted: deletes have no sequence number), one lookup finds which, and the last row moves
into each hole; any other difference in the count (a sequence committed out of order by another
process) reloads the index in full. Writes made through this process mark the index stale at
once; writes by other processes are seen within ``refresh_s``.

Snapshots (:mod:`lessonbank.retrieval.vector_snapshot`): once the index holds ``SNAPSHOT_MIN``
vectors and has applied ``SNAPSHOT_REFRESH`` rows (or an eighth of its size) since its last one, a
sync writes its matrix, ids and sign bits beside the lexical snapshot. A new process's first sync
maps that file (copy-on-write) and reads only the changes after its sequence; a snapshot it cannot
trust is ignored (logged), the vectors load in full, and a good snapshot is written again.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from lessonbank.ports import Store, VectorChanges, vector_pages
from lessonbank.retrieval.blas import one_blas_thread
from lessonbank.retrieval.lexical_index import (
    GIVE_BACK_FROM,
    LOAD_PAGE,
    SEARCHED_MAX,
    give_back_memory,
    miscount,
)
from lessonbank.retrieval.snapshot import SnapshotIds
from lessonbank.retrieval.vector_snapshot import RowFile, VectorState, row_sums, vector_snapshot_of

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("lessonbank.retrieval")

REFRESH_S = 1.0
BINARY_FROM = 20_000  # below this an exact scan is as fast as the two-step one
# How many rows the exact cosine re-ranks after the Hamming step. On 100k real lesson vectors
# (bench/vector_scan.py, top 40): 1,000 rows kept 0.94 of the exact top 40 (worst query 0.23),
# 4,000 keep 0.98 (worst 0.48), 8,000 0.99 (worst 0.70) for 1–2 ms more.
RESCORE_PER_RESULT = 50
MIN_RESCORE = 4_000
RESCORE_SHARE = 8  # the two steps only pay when the re-ranked rows are at most 1/8 of the index
RESCORE_SHARE_OF_INDEX = 256  # ... and re-rank at least 1/256 of the index (4,000 rows at 1M)
SLICE = 1 << 16  # rows turned into sign bits, or copied into a mapped file, at a time
MAPPED_FROM = 1 << 16  # rows of capacity from which the matrix is a memory-mapped file
_INITIAL_CAPACITY = 1024
SNAPSHOT_MIN = 2_000  # vectors an index holds before it is worth a snapshot
SNAPSHOT_REFRESH = 1_024  # rows applied since the last snapshot before a newer one is written ...
SNAPSHOT_SHARE = 8  # ... or this share of the index, whichever is larger (a write costs the whole matrix)


def as_bytes(vector: np.ndarray) -> bytes:
    """The stored form of a vector: little-endian float32."""
    import numpy as np

    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


class VectorIndex:
    """Cosine search over the vectors of (namespace, model); thread-safe."""

    def __init__(
        self,
        store: Store,
        namespace: str,
        model: str,
        dim: int,
        *,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
        mapped_from: int = MAPPED_FROM,
    ) -> None:
        import numpy as np

        self.store = store
        self.namespace = namespace
        self.model = model
        self.dim = dim
        self.refresh_s = refresh_s
        self._clock = clock
        self._np = np
        self.mapped_from = mapped_from
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._mapped = False  # the matrix is a memory-mapped temporary file
        self._ids: list[str] | SnapshotIds = []  # row → lesson id (as a snapshot has them, or a list)
        self._row_of: MutableMapping[str, int] = {}
        self._ignored: set[str] = set()  # rows of another size: counted as seen, never searched
        self._seq = 0
        self._miscount = 0  # rows held minus the store's count at the last reload (0 unless it drifted)
        self._synced_at = float("-inf")
        self._lock = threading.Lock()
        # Sign bits for the two-step search, kept up to date lazily: rows appended since, rows
        # rewritten since, and the centre (recomputed when the index has doubled since).
        self._bits: Any = None  # (words, capacity) uint64, column-major
        self._bits_rows = 0  # rows of the matrix the bits cover
        self._centre: Any = None
        self._centred_at = 0
        self._stale_bits: set[int] = set()
        self.binary = hasattr(np, "bitwise_count")  # numpy ≥ 2.0
        self._snapshot = vector_snapshot_of(store, namespace, model)
        self._since_snapshot = 0  # rows applied since the snapshot was read or written
        self._restore_tried = False  # the first sync starts from the snapshot, if it can
        # Rows taken from a snapshot and not yet checked against their checksums (None: every row
        # is trusted), with those checksums: a row is checked the first time anything reads it.
        self._unchecked: Any = None
        self._sums: Any = None
        # The snapshot file the matrix maps, read a row at a time for the rows a search reads, with
        # the rows this process has written since (those are read from the matrix).
        self._row_file: RowFile | None = None
        self._written: Any = None

    def __len__(self) -> int:
        return len(self._ids)

    def mark_stale(self) -> None:
        """This process wrote vectors: the next search syncs first."""
        self._synced_at = float("-inf")

    def sync(self, *, force: bool = False) -> None:
        with self._lock:
            if not force and self._clock() - self._synced_at < self.refresh_s:
                return
            if not self._restore_tried:
                self._restore_tried = True
                if self._snapshot is not None:
                    self._restore()
            full = self._seq == 0  # every row is read: what a snapshot would have spared
            if full:
                read, changes = self._load()
            else:
                changes = self.store.vector_changes(self.namespace, self.model, self._seq)
                read = len(changes.rows)
                self._apply(changes.rows)
            self._since_snapshot += read
            self._seq = max(self._seq, changes.seq)
            expected = changes.count + self._miscount
            del changes
            if len(self._ids) + len(self._ignored) > expected:
                self._forget_deleted()
            reload = len(self._ids) + len(self._ignored) != expected
            if reload:
                read += self._reload()
                full = True
            if read >= GIVE_BACK_FROM:
                give_back_memory()  # the rows read are gone; the matrix holds its own copy
            size = len(self._ids)
            due = max(SNAPSHOT_REFRESH, size // SNAPSHOT_SHARE)
            if self._snapshot is not None and size >= SNAPSHOT_MIN and (full or self._since_snapshot >= due):
                self._save()
            self._synced_at = self._clock()

    def _forget_deleted(self) -> None:
        """Drop the rows of lessons deleted since (deletes have no sequence number): one lookup of
        which still have a vector, much cheaper than reading every vector again. The last row moves
        into each hole, so the rows stay dense."""
        if isinstance(self._ids, SnapshotIds):
            self._ids = list(self._ids)  # rows move below
        present = self.store.vector_hashes(self.namespace, self.model, [*self._ids, *self._ignored])
        self._ignored &= present.keys()
        for lesson_id in [lesson_id for lesson_id in self._ids if lesson_id not in present]:
            row, last = self._row_of.pop(lesson_id), len(self._ids) - 1
            if row != last:
                moved = self._ids[last]
                self._matrix[row] = self._matrix[last]
                self._wrote(row)
                self._ids[row], self._row_of[moved] = moved, row
                self._stale_bits.add(row)
                if self._unchecked is not None and row < len(self._unchecked):
                    moved_unchecked = last < len(self._unchecked) and bool(self._unchecked[last])
                    self._unchecked[row] = moved_unchecked
                    if moved_unchecked:
                        self._sums[row] = self._sums[last]
            self._ids.pop()
        size = len(self._ids)
        self._bits_rows = min(self._bits_rows, size)
        self._stale_bits = {row for row in self._stale_bits if row < size}

    def _restore(self) -> None:
        """Start from the bank's snapshot, if there is one to trust."""
        assert self._snapshot is not None
        state = self._snapshot.read(self.store, self.dim, self.mapped_from)
        if state is None:
            return
        rows = len(state.ids)
        self._matrix, self._mapped = state.matrix, state.matrix.shape[0] >= self.mapped_from
        self._ids = state.ids if isinstance(state.ids, SnapshotIds) else list(state.ids)
        self._ignored = state.ignored
        self._row_of = (  # (not `or`: a map's truth would read every id)
            state.row_of if state.row_of is not None else {i: row for row, i in enumerate(state.ids)}
        )
        self._seq, self._miscount = state.seq, state.miscount
        if state.bits is not None and state.centre is not None:
            self._bits, self._bits_rows = state.bits, rows
            self._centre, self._centred_at = state.centre, rows
        self._unchecked, self._sums = self._np.ones(rows, dtype=bool), state.sums
        if state.row_file is not None:
            self._row_file, self._written = state.row_file, self._np.zeros(rows, dtype=bool)
        self._since_snapshot = 0

    def _checked(self, rows: np.ndarray | None) -> bool:
        """Whether ``rows`` (None: every row) match the checksums of the snapshot they came from; if
        one does not, the snapshot is refused (logged), the index reloads in full and writes a good
        one, and the caller must start over (False). Checked rows are not checked again."""
        if self._unchecked is None:
            return True
        np = self._np
        if rows is None:
            todo = np.flatnonzero(self._unchecked)
        else:
            rows = rows[rows < len(self._unchecked)]
            todo = rows[self._unchecked[rows]]
        for start in range(0, len(todo), SLICE):
            part = np.sort(todo[start : start + SLICE])  # in file order: the pages are read in turn
            bad = np.flatnonzero(row_sums(self._gather(part)) != self._sums[part])
            if len(bad):
                self._refuse_row(int(part[bad[0]]))
                return False
            self._unchecked[part] = False
        if rows is None or not self._unchecked.any():
            self._unchecked = self._sums = None
        return True

    def _refuse_row(self, row: int) -> None:
        """A snapshot row failed its checksum: the snapshot is refused (logged) and the index reloaded
        in full from the store, saved again when it is large enough to keep one."""
        assert self._snapshot is not None
        self._snapshot.refuse(f"row {row} does not match its checksum")
        self._reload()
        if len(self._ids) >= SNAPSHOT_MIN:
            self._save()

    def _checked_rows(self, rows: np.ndarray) -> np.ndarray | None:
        """The matrix's ``rows`` (as :meth:`_gather` reads them), those not yet checked checked against
        the snapshot's checksums from the same read; None when one does not match (then, as
        :meth:`_checked`, the index has reloaded in full and the caller starts over)."""
        if self._unchecked is None:
            return self._gather(rows)
        numpy = self._np
        order = numpy.argsort(rows, kind="stable")
        ordered = rows[order]
        gathered = self._gather(ordered)  # in file order: the pages are read in turn
        todo = ordered < len(self._unchecked)
        todo[todo] = self._unchecked[ordered[todo]]
        if todo.any():
            part = ordered[todo]
            bad = numpy.flatnonzero(row_sums(gathered[todo]) != self._sums[part])
            if len(bad):
                self._refuse_row(int(part[bad[0]]))
                return None
            self._unchecked[part] = False
            if not self._unchecked.any():
                self._unchecked = self._sums = None
        vectors: np.ndarray = numpy.empty_like(gathered)
        vectors[order] = gathered
        return vectors

    def _save(self) -> None:
        """Write the snapshot of the index as it stands, its sign bits computed afresh first."""
        assert self._snapshot is not None
        if not self._checked(None):  # a damaged row is never written into a new snapshot
            return  # the reload wrote one
        size = len(self._ids)
        if self.binary and size >= BINARY_FROM:
            self._refresh_bits(size, recentre=True)
        done = self._snapshot.write(
            VectorState(
                seq=self._seq,
                miscount=self._miscount,
                ids=self._ids,
                ignored=self._ignored,
                matrix=self._matrix[:size],
                bits=None if self._bits is None else self._bits[:, :size],
                centre=self._centre,
                capacity=int(self._matrix.shape[0]),
            ),
            self.store,
        )
        if done:
            self._since_snapshot = 0
        else:  # not before as many rows again: a folder that cannot be written is not retried per sync
            self._since_snapshot = -size

    def vectors(self) -> dict[str, np.ndarray]:
        """Every lesson's vector (a copy), after a sync: what the consolidation pre-pass compares."""
        self.sync(force=True)
        with self._lock:
            self._checked(None)
            return {lesson_id: self._matrix[row].copy() for lesson_id, row in self._row_of.items()}

    def search(
        self, query: np.ndarray, limit: int, *, exclude: frozenset[str] = frozenset()
    ) -> list[tuple[str, float]]:
        """The ``limit`` nearest lesson ids by cosine (vectors are unit length), best first."""
        self.sync()
        np = self._np
        with self._lock:
            size = len(self._ids)
            if size == 0 or limit <= 0:
                return []
            if query.shape != (self.dim,):
                raise ValueError(
                    f"query vector has shape {query.shape}; this index holds {self.dim} dimensions"
                )
            query = query.astype(np.float32, copy=False)
            if self._unchecked is not None and (self._bits is None or size >= 2 * self._centred_at):
                self._checked(None)  # every row is about to be read (a scan, or the sign bits afresh)
            rows = self._shortlist(query, len(self._ids), min(len(self._ids), limit + len(exclude)))
            # The shortlist's rows, read once: checked against the snapshot and scored from one read.
            vectors = self._checked_rows(rows) if rows is not None else None
            if rows is not None and vectors is None:  # a damaged snapshot row: reloaded in full, start over
                rows = self._shortlist(query, len(self._ids), min(len(self._ids), limit + len(exclude)))
            size = len(self._ids)
            if size == 0:
                return []
            wanted = min(size, limit + len(exclude))
            if rows is None:
                with one_blas_thread():  # one query's product: waking BLAS's threads costs more under load
                    scores = self._matrix[:size] @ query
                top = np.argpartition(-scores, wanted - 1)[:wanted] if wanted < size else np.arange(size)
            else:  # the shortlist's scores only (an array of every row would cost more than them)
                with one_blas_thread():
                    scores = (vectors if vectors is not None else self._gather(rows)) @ query
                top = np.argpartition(-scores, wanted - 1)[:wanted]
            rank = np.argsort(-scores[top], kind="stable")
            order = top[rank] if rows is None else rows[top[rank]]
            ids = self._ids
            found = [
                (ids[i], float(s))
                for i, s in zip(order, scores[top[rank]], strict=True)
                if ids[i] not in exclude
            ]
        return found[:limit]

    def _shortlist(self, query: np.ndarray, size: int, wanted: int) -> np.ndarray | None:
        """Rows closest by Hamming distance of sign bits, or None when an exact scan is the better deal."""
        rescore = max(wanted * RESCORE_PER_RESULT, MIN_RESCORE, size // RESCORE_SHARE_OF_INDEX)
        if not self.binary or size < BINARY_FROM or rescore * RESCORE_SHARE > size:
            return None
        self._refresh_bits(size)
        distance = hamming(self._bits, self._sign_words(query[None, :])[:, 0], size)
        return nearest_rows(distance, rescore)

    def _refresh_bits(self, size: int, *, recentre: bool = False) -> None:
        """Sign bits of the first ``size`` rows up to date (the centre taken afresh when asked, or
        when the index has doubled since it was)."""
        numpy = self._np
        if recentre or self._bits is None or size >= 2 * self._centred_at:
            self._centre = self._mean(size)
            self._centred_at = size
            self._bits = self._sign_words(self._matrix[:size])
            self._bits_rows = size
            self._stale_bits.clear()
        elif self._bits_rows < size:
            if self._bits.shape[1] < size:
                grown = numpy.zeros((self._bits.shape[0], max(size, 2 * self._bits.shape[1])), numpy.uint64)
                grown[:, : self._bits_rows] = self._bits[:, : self._bits_rows]
                self._bits = grown
            self._bits[:, self._bits_rows : size] = self._sign_words(self._matrix[self._bits_rows : size])
            self._bits_rows = size
        if self._stale_bits:
            rows = numpy.fromiter(self._stale_bits, dtype=numpy.int64)
            self._bits[:, rows] = self._sign_words(self._matrix[rows])
            self._stale_bits.clear()

    def _mean(self, size: int) -> np.ndarray:
        """The mean row, summed in slices (a mapped matrix is read once, never copied whole)."""
        total = self._np.zeros(self.dim, dtype=self._np.float64)
        for start in range(0, size, SLICE):
            total += self._matrix[start : min(size, start + SLICE)].sum(axis=0, dtype=self._np.float64)
        mean: np.ndarray = (total / max(size, 1)).astype(self._np.float32)
        return mean

    def _sign_words(self, rows: np.ndarray) -> np.ndarray:
        """Sign bits of ``rows`` around the centre as (words, len(rows)) uint64, 64 dimensions a word."""
        numpy = self._np
        if len(rows) > SLICE:  # in slices: the comparison makes a byte per dimension
            sliced: np.ndarray = numpy.concatenate(
                [self._sign_words(rows[start : start + SLICE]) for start in range(0, len(rows), SLICE)],
                axis=1,
            )
            return sliced
        packed = numpy.packbits(rows > self._centre, axis=1)
        spare = -packed.shape[1] % 8  # zero bytes up to a whole word: equal in every row, never counted
        if spare:
            packed = numpy.pad(packed, ((0, 0), (0, spare)))
        words: np.ndarray = numpy.ascontiguousarray(packed.view(numpy.uint64).T)
        return words

    def similarity(self, query: np.ndarray, lesson_ids: list[str]) -> dict[str, float]:
        """Cosine of ``query`` with each given lesson that has a vector."""
        self.sync()
        with self._lock:
            rows = [(i, self._row_of[i]) for i in lesson_ids if i in self._row_of]
            if not rows:
                return {}
            vectors = self._checked_rows(self._np.array([row for _, row in rows], dtype=self._np.int64))
            if vectors is None:  # a damaged snapshot row: reloaded in full, its rows read afresh
                rows = [(i, self._row_of[i]) for i in lesson_ids if i in self._row_of]
                if not rows:
                    return {}
                vectors = self._gather(self._np.array([row for _, row in rows], dtype=self._np.int64))
        scores = vectors @ query.astype(self._np.float32, copy=False)
        return {lesson_id: float(score) for (lesson_id, _), score in zip(rows, scores, strict=True)}

    # ------------------------------------------------------------------ internals

    def _apply(self, rows: list[tuple[str, bytes]]) -> None:
        """Rows written since the last sync: rewritten lessons in place, new ones appended, taken a
        slice at a time (one buffer per slice, not one array per row)."""
        np = self._np
        width = 4 * self.dim
        fresh: list[str] = []
        if len(rows) > SEARCHED_MAX and not isinstance(self._row_of, dict):
            self._row_of = dict(self._row_of)  # one map of every id beats this many searches
        for start in range(0, len(rows), SLICE):
            part = rows[start : start + SLICE]
            if any(len(blob) != width for _, blob in part):
                part = [(lesson_id, blob) for lesson_id, blob in part if self._sized(lesson_id, blob)]
            if self._ignored:
                self._ignored.difference_update(lesson_id for lesson_id, _ in part)
            vectors = np.frombuffer(b"".join(blob for _, blob in part), dtype="<f4").reshape(-1, self.dim)
            new_rows: list[int] = []
            for at, (lesson_id, _) in enumerate(part):
                row = self._row_of.get(lesson_id)
                if row is None:
                    new_rows.append(at)
                    fresh.append(lesson_id)
                else:
                    self._matrix[row] = vectors[at]
                    self._wrote(row)
                    self._stale_bits.add(row)
                    if self._unchecked is not None and row < len(self._unchecked):
                        self._unchecked[row] = False  # the store's own row now
            if new_rows:
                size = len(self._ids)
                self._grow(size + len(new_rows))
                self._matrix[size : size + len(new_rows)] = vectors[new_rows]
                for offset, lesson_id in enumerate(fresh):
                    self._row_of[lesson_id] = size + offset
                self._ids.extend(fresh)
                fresh.clear()

    def _gather(self, rows: np.ndarray) -> np.ndarray:
        """The matrix's ``rows``: those still as the snapshot file holds them read from it (not
        faulted in through the mapping), the others from the matrix."""
        if self._row_file is None:
            gathered: np.ndarray = self._matrix[rows]
            return gathered
        from_file = rows < self._row_file.rows
        from_file[from_file] = ~self._written[rows[from_file]]
        if from_file.all():
            return self._row_file.read(rows)
        out = self._np.empty((len(rows), self.dim), dtype=self._np.float32)
        out[from_file] = self._row_file.read(rows[from_file])
        out[~from_file] = self._matrix[rows[~from_file]]
        return out

    def _wrote(self, row: int) -> None:
        """Row ``row`` of the matrix now differs from the snapshot file's."""
        if self._written is not None and row < len(self._written):
            self._written[row] = True

    def _sized(self, lesson_id: str, blob: bytes) -> bool:
        """Whether a stored vector has this index's size; one written by an embedder of another size
        under the same name is ignored (and logged once)."""
        if len(blob) == 4 * self.dim:
            return True
        if lesson_id not in self._ignored:
            log.warning(
                "vector of %s has %d dimensions, not %d: ignored", lesson_id, len(blob) // 4, self.dim
            )
            self._ignored.add(lesson_id)
        return False

    def _grow(self, needed: int) -> None:
        """Room for ``needed`` rows, by doubling."""
        if needed > self._matrix.shape[0]:
            capacity = max(_INITIAL_CAPACITY, self._matrix.shape[0])
            while capacity < needed:
                capacity *= 2
            self._resize(capacity, len(self._ids))

    def _resize(self, capacity: int, keep: int) -> None:
        """Room for ``capacity`` rows, the first ``keep`` kept: in memory, or past ``mapped_from``
        in a memory-mapped temporary file (removed when it is closed or the process ends)."""
        np = self._np
        self._row_file = self._written = None  # the rows are copied out of the snapshot's mapping
        if capacity < self.mapped_from:
            grown = np.zeros((capacity, self.dim), dtype=np.float32)
            grown[:keep] = self._matrix[:keep]
            self._matrix, self._mapped = grown, False
            return
        # The mapping keeps the (already unlinked) file alive; the file object itself can close.
        with tempfile.TemporaryFile(prefix="lessonbank-vectors-") as file:
            file.truncate(capacity * self.dim * 4)
            mapped = np.memmap(file, dtype=np.float32, mode="r+", shape=(capacity, self.dim))
        for start in range(0, keep, SLICE):  # copied in slices: no second full copy in memory
            mapped[start : min(keep, start + SLICE)] = self._matrix[start : min(keep, start + SLICE)]
        self._matrix, self._mapped = mapped, True

    def memory(self) -> dict[str, int]:
        """Bytes of the index: ``resident`` (sign bits, ids; always in memory) and ``matrix`` (the
        float32 vectors; ``mapped`` says whether they are a memory-mapped file instead)."""
        bits = 0 if self._bits is None else int(self._bits.nbytes)
        ids = sum(len(lesson_id) for lesson_id in self._ids) + 150 * len(self._ids)  # str + list + dict
        resident = bits + ids + (0 if self._mapped else int(self._matrix.nbytes))
        return {"resident": resident, "matrix": int(self._matrix.nbytes), "mapped": int(self._mapped)}

    def _reload(self) -> int:
        np = self._np
        self._matrix, self._mapped = np.zeros((0, self.dim), dtype=np.float32), False
        self._row_file = self._written = None
        self._ids, self._row_of, self._ignored = [], {}, set()
        self._bits, self._bits_rows, self._centred_at = None, 0, 0
        self._stale_bits.clear()
        self._unchecked = self._sums = None
        read, changes = self._load()
        self._seq = changes.seq
        self._miscount = miscount(
            len(self._ids) + len(self._ignored), changes.count, self.namespace, "vectors"
        )
        return read

    def _load(self) -> tuple[int, VectorChanges]:
        """Every row, read and applied a page at a time (``LOAD_PAGE``): the rows read are never all
        held at once beside the matrix. Room for the count the first page gives is made at once
        (doubling would copy the rows held so far each time). How many rows that read, and the
        last page (its sequence and count)."""
        read, last = 0, VectorChanges(rows=[], seq=0, count=0)
        for page in vector_pages(self.store, self.namespace, self.model, LOAD_PAGE):
            if not read:
                self._grow(page.count)
            read += len(page.rows)
            self._apply(page.rows)
            last = replace(page, rows=[])
        return read, last


def nearest_rows(distance: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` rows of least ``distance`` (small whole numbers; ties at the cut taken by row):
    counted by distance, not by a selection, which slows down on the many ties sign bits have
    (a million rows under load: 17 ms of CPU for numpy's argpartition, 10 for this)."""
    import numpy

    within = numpy.cumsum(numpy.bincount(distance))  # [d]: rows at distance d or less
    cut = int(numpy.searchsorted(within, count))  # the least distance that takes `count` rows in
    closer = numpy.flatnonzero(distance < cut)
    tied = numpy.flatnonzero(distance == cut)[: count - len(closer)]
    rows: np.ndarray = numpy.concatenate((closer, tied))
    return rows


HAMMING_SLICE = 1 << 16  # rows of sign bits compared at a time: the work arrays stay in the cache


def hamming(bits: np.ndarray, query: np.ndarray, size: int) -> np.ndarray:
    """Bits that differ between ``query`` (words) and each of the first ``size`` columns of ``bits``
    (words, rows), as uint16: a slice of rows at a time through two small work arrays, a third less
    time at a million rows than whole-column temporaries (each a fresh 8 MB to fault in)."""
    import numpy

    distance = numpy.empty(size, dtype=numpy.uint16)
    width = min(size, HAMMING_SLICE)
    differ, count = numpy.empty(width, dtype=numpy.uint64), numpy.empty(width, dtype=numpy.uint8)
    for start in range(0, size, HAMMING_SLICE):
        end = min(size, start + HAMMING_SLICE)
        out, xor, ones = distance[start:end], differ[: end - start], count[: end - start]
        for word in range(bits.shape[0]):
            numpy.bitwise_xor(bits[word, start:end], query[word], out=xor)
            numpy.bitwise_count(xor, out=ones)
            if word:
                numpy.add(out, ones, out=out)
            else:
                out[:] = ones
    return distance
