"""Vector index snapshots: one namespace's vectors of one embedder, kept in a file beside the lexical
snapshot (beside a SQLite bank, or in the cache folder of a PostgreSQL or Redis bank).

A new process maps the snapshot's matrix (copy-on-write: its own writes never reach the file) instead
of reading every vector from the store, then follows the change sequence from the snapshot's number
on, as a long-lived index does. The rows a search reads (its shortlist, the lessons it compares) are
read from the file with ``pread`` (:class:`RowFile`) unless the process has written them since:
faulting 4,000 scattered rows in through the mapping maps whole cached folios, ~850 MB at a million. The sign bits and their centre, which the two-step search needs and
which take a pass over every vector to compute, are in the file too.

Invariants:

- One file per (namespace, model), ``<hash of both>.vsnap`` in the lexical snapshot's folder
  (:func:`lessonbank.retrieval.snapshot.snapshot_of`). Written whole or not at all (a temporary file
  then a rename), readable by its owner only, in folders private to the user.
- The header names the format, the model and its dimensions, the namespace, the bank (a SQLite
  file's inode, a server store's URL), the sequence it reflects and the last lessons written with
  their vectors' text hashes. A CRC32 covers the ids, the sign bits and a checksum of every row
  (:func:`row_sums`), all read with the header; the rows themselves (a gigabyte at a million
  vectors) are checked against their checksums as the index first reads them (see
  :class:`~lessonbank.retrieval.vector.VectorIndex`), and one that does not match makes the index
  reload in full before it answers.
- The matrix has room for more rows than it holds, as much as the index that wrote it had (zeros,
  a sparse file): rows a process appends go to its private pages, not into a copy of the matrix.
- A snapshot whose format, model, size, namespace or bank differs, none of whose anchors the store
  still holds as they were, whose sequence the bank has not reached, or whose bytes are damaged is
  ignored with a logged reason, and the index loads in full: it can cost time, never an answer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import struct
import zlib
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from lessonbank.retrieval.snapshot import (
    SlotMap,
    SnapshotIds,
    aligned,
    bank_identity,
    id_ends,
    id_order,
    snapshot_of,
    split_ids,
    valid_order,
    write_whole,
)

if TYPE_CHECKING:
    import numpy as np

    from lessonbank.ports import Store

log = logging.getLogger("lessonbank.retrieval")

FORMAT = 4  # 4: ids as bytes with their ends and their rows sorted by id (no map of every id)
MAGIC = b"LBVECSNP"
PREFIX = struct.Struct("<8sI")  # magic, header length
ALIGN = 4096  # the matrix starts on a page: it is mapped
ANCHORS = 8
SPARE_MIN = 1_024  # rows of room at least
ROW_SLICE = 1 << 14  # rows summed or written at a time (words widened to 64 bits: 32 MB at 256 dimensions)
ITEM = {"ids": 1, "ignored": 1, "centre": 4, "bits": 8, "sums": 8, "order": 4, "ends": 8}  # bytes per item


@dataclass
class VectorState:
    """What a vector index holds at sequence ``seq``: ``matrix[:len(ids)]`` are its rows (the
    matrix has room for more), ``bits`` and ``centre`` the sign bits of those rows (or None)."""

    seq: int
    miscount: int
    ids: Sequence[str]
    ignored: set[str]
    matrix: np.ndarray
    bits: np.ndarray | None
    centre: np.ndarray | None
    row_of: MutableMapping[str, int] | None = None  # lesson id → row, when read from a file
    sums: np.ndarray | None = None  # row_sums of the rows, as read from a file (not yet checked)
    capacity: int = 0  # rows the matrix has room for, in the index that wrote it (0: its rows)
    row_file: RowFile | None = None  # the file's rows, read one at a time (when the matrix maps it)


class RowFile:
    """A snapshot's rows read with ``pread``, those a search shortlists: faulting them in through
    the mapping maps a whole cached folio per row (4,000 rows of a million: +850 MB resident),
    reading them costs their bytes. Holds its own descriptor of the file the matrix maps (a newer
    snapshot replaces the file, never its bytes)."""

    def __init__(self, fd: int, start: int, rows: int, dim: int) -> None:
        self.fd, self.start, self.rows, self.dim = fd, start, rows, dim

    def read(self, rows: Any) -> np.ndarray:
        """The rows at ``rows`` (each < ``self.rows``), as float32 (a short read leaves zeros, which
        no checksum of a written row matches)."""
        import numpy as np

        # Each row read straight into its place in one buffer (no bytes object and no array
        # assignment per row: a first hybrid recall reads ~4,000 rows at 100k, twice the time so).
        width = 4 * self.dim
        buffer = bytearray(len(rows) * width)
        view = memoryview(buffer)
        for at, row in enumerate(rows.tolist()):
            place = view[at * width : (at + 1) * width]
            if os.preadv(self.fd, [place], self.start + row * width) != width:
                place[:] = bytes(width)
        return np.frombuffer(buffer, dtype="<f4").reshape(len(rows), self.dim)

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def row_sums(rows: np.ndarray) -> np.ndarray:
    """A checksum per row: its 32-bit words times odd weights, summed modulo 2^64. A change to any
    one word changes the sum (an odd weight is invertible modulo 2^64), and numpy computes it at
    memory speed, where a CRC32 of every row would cost a second per gigabyte."""
    import numpy as np

    out = np.empty(len(rows), dtype=np.uint64)
    if len(rows):
        weights = np.arange(1, 2 * rows.shape[1], 2, dtype=np.uint64)
        for start in range(0, len(rows), ROW_SLICE):
            words = np.ascontiguousarray(rows[start : start + ROW_SLICE], dtype="<f4").view("<u4")
            out[start : start + ROW_SLICE] = (words.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    return out


def vector_snapshot_of(store: Store, namespace: str, model: str) -> VectorSnapshot | None:
    """The snapshot of ``namespace``'s vectors of ``model``, where the lexical one of the namespace
    lives; None for a store with no such place (the in-memory test double)."""
    lexical = snapshot_of(store, namespace)
    if lexical is None:
        return None
    return VectorSnapshot(lexical.folder, namespace, model, lexical.bank_file, lexical.bank_url)


class VectorSnapshot:
    def __init__(
        self, folder: Path, namespace: str, model: str, bank_file: Path | None, bank_url: str | None
    ) -> None:
        self.folder = folder
        self.namespace = namespace
        self.model = model
        self.bank_file = bank_file
        self.bank_url = bank_url
        digest = hashlib.sha256(f"{namespace}\0{model}".encode()).hexdigest()[:24]
        self.path = folder / f"{digest}.vsnap"

    def _bank(self) -> str:
        return bank_identity(self.bank_file, self.bank_url)

    # ------------------------------------------------------------------ writing

    def write(self, state: VectorState, store: Store) -> bool:
        """Persist ``state``; False (logged) when it cannot be written."""
        import numpy as np

        ids = list(state.ids)
        rows, dim = len(ids), int(state.matrix.shape[1])
        ids_blob = "\0".join(ids).encode()
        ignored_blob = "\0".join(sorted(state.ignored)).encode()
        if any("\0" in lesson_id for lesson_id in state.ignored) or ids_blob.count(b"\0") != max(0, rows - 1):
            log.info("namespace %s: a lesson id holds a NUL byte; no vector snapshot", self.namespace)
            return False
        anchors = ids[-ANCHORS:]
        hashes = store.vector_hashes(self.namespace, self.model, anchors)
        small: dict[str, Any] = {
            "ids": np.frombuffer(ids_blob, dtype=np.uint8),
            "ignored": np.frombuffer(ignored_blob, dtype=np.uint8),
            "centre": np.zeros(0, "<f4")
            if state.centre is None
            else np.ascontiguousarray(state.centre, "<f4"),
            "bits": np.zeros(0, "<u8")
            if state.bits is None
            else np.ascontiguousarray(state.bits, "<u8").ravel(),
            "sums": row_sums(state.matrix[:rows]),
            "order": id_order(ids_blob, rows),
            "ends": id_ends(ids_blob),
        }
        layout: dict[str, list[int]] = {}
        offset = 0
        for name, array in small.items():
            layout[name] = [offset, len(array)]
            offset += array.nbytes
        # Room to grow as the index that wrote it had (doubling), so a process appending rows
        # writes them into its private pages, not into a fresh copy of every row.
        capacity = state.capacity if state.capacity > rows else max(SPARE_MIN, 2 * rows)
        header = json.dumps(
            {
                "format": FORMAT,
                "model": self.model,
                "dim": dim,
                "namespace": self.namespace,
                "bank": self._bank(),
                "seq": state.seq,
                "miscount": state.miscount,
                "rows": rows,
                "capacity": capacity,
                "bit_words": 0 if state.bits is None else int(state.bits.shape[0]),
                "anchors": [[lesson_id, hashes.get(lesson_id, "")] for lesson_id in anchors],
                "arrays": layout,
                "crc32": "0" * 10,  # filled in once the payload is written: same length
            }
        ).encode()
        small_start = PREFIX.size + len(header)
        matrix_start = aligned(small_start + offset, ALIGN)

        def fill(out: BinaryIO) -> None:
            crc = 0
            out.seek(small_start)
            for array in small.values():
                crc = zlib.crc32(memoryview(array).cast("B"), crc)
                out.write(memoryview(array).cast("B"))
            out.seek(matrix_start)
            for start in range(0, rows, ROW_SLICE):  # in slices: the matrix may be a mapped file
                out.write(np.ascontiguousarray(state.matrix[start : start + ROW_SLICE], "<f4").tobytes())
            out.truncate(matrix_start + capacity * dim * 4)  # the spare rows: a hole, not bytes
            final = header.replace(b'"crc32": "0000000000"}', b'"crc32": "%010d"}' % crc)
            out.seek(0)
            out.write(PREFIX.pack(MAGIC, len(final)) + final)

        if not write_whole(self.path, fill, f"namespace {self.namespace}: no vector snapshot"):
            return False
        log.debug("namespace %s: vector snapshot of %d rows at seq %d", self.namespace, rows, state.seq)
        return True

    # ------------------------------------------------------------------ reading

    def read(self, store: Store, dim: int, mapped_from: int) -> VectorState | None:
        """The snapshot's index if it is this bank's, whole and not ahead of the store; else None,
        with the reason logged. Past ``mapped_from`` rows the matrix is the file, mapped."""
        try:
            with open(self.path, "rb") as file:
                return self._parse(file, store, dim, mapped_from)
        except FileNotFoundError:
            return None
        except OSError as error:
            return self._refuse(f"it cannot be read ({error})")
        except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as error:
            return self._refuse(f"it is damaged ({error})")

    def _parse(self, file: Any, store: Store, dim: int, mapped_from: int) -> VectorState | None:
        import numpy as np

        size = os.fstat(file.fileno()).st_size
        prefix = file.read(PREFIX.size)
        if len(prefix) < PREFIX.size:
            return self._refuse("it is truncated")
        magic, header_length = PREFIX.unpack(prefix)
        if magic != MAGIC or PREFIX.size + header_length > size:
            return self._refuse("it is not a vector snapshot")
        header = json.loads(file.read(header_length))
        if header.get("format") != FORMAT:
            return self._refuse(f"its format is {header.get('format')!r}, this version reads {FORMAT}")
        if header.get("model") != self.model or header.get("dim") != dim:
            return self._refuse("it holds another embedder's vectors")
        if header.get("namespace") != self.namespace:
            return self._refuse("it belongs to another namespace")
        if header.get("bank") != self._bank():
            return self._refuse("it belongs to another bank")
        rows, capacity, words = int(header["rows"]), int(header["capacity"]), int(header["bit_words"])
        layout = {name: (int(at), int(count)) for name, (at, count) in header["arrays"].items()}
        small_length = sum(count * ITEM[name] for name, (_, count) in layout.items())
        small_start = PREFIX.size + header_length
        matrix_start = aligned(small_start + small_length, ALIGN)
        if rows < 0 or capacity < rows or matrix_start + capacity * dim * 4 > size:
            return self._refuse("it is truncated")
        file.seek(small_start)
        blob = file.read(small_length)
        if len(blob) != small_length:
            return self._refuse("it is truncated")
        if f"{zlib.crc32(blob):010d}" != header["crc32"]:
            return self._refuse("its checksum does not match")
        arrays = {
            name: np.frombuffer(blob, dtype=dtype, count=layout[name][1], offset=layout[name][0])
            for name, dtype in (
                ("ids", "u1"),
                ("ignored", "u1"),
                ("centre", "<f4"),
                ("bits", "<u8"),
                ("sums", "<u8"),
                ("order", "<i4"),
                ("ends", "<i8"),
            )
        }
        ids = SnapshotIds(arrays["ids"], arrays["order"], arrays["ends"])
        if ids.base() != rows or not valid_order(arrays["order"], rows) or len(arrays["sums"]) != rows:
            return self._refuse("its ids do not agree with its rows")
        seq = int(header["seq"])
        if seq <= 0:
            return self._refuse(f"it is at sequence {seq}")
        anchors = [(str(lesson_id), str(text_hash)) for lesson_id, text_hash in header["anchors"]]
        held = store.vector_hashes(self.namespace, self.model, [lesson_id for lesson_id, _ in anchors])
        if not any(held.get(lesson_id) == text_hash for lesson_id, text_hash in anchors):
            return self._refuse("the bank no longer holds the vectors it was taken at")
        if store.vector_changes(self.namespace, self.model, seq - 1).seq < seq:
            return self._refuse("the bank's change sequence is behind it (restored from an older copy?)")
        bits = centre = None
        if words and len(arrays["centre"]) == dim and len(arrays["bits"]) == words * rows:
            bits = arrays["bits"].reshape(words, rows).copy()
            centre = arrays["centre"].copy()
        matrix: np.ndarray
        row_file = None
        if capacity >= mapped_from:
            matrix = np.memmap(file, dtype=np.float32, mode="c", offset=matrix_start, shape=(capacity, dim))
            row_file = RowFile(os.dup(file.fileno()), matrix_start, rows, dim)
        else:
            matrix = np.zeros((capacity, dim), dtype=np.float32)
            file.seek(matrix_start)
            matrix[:rows] = np.frombuffer(file.read(rows * dim * 4), dtype="<f4").reshape(rows, dim)
        return VectorState(
            seq=seq,
            miscount=int(header["miscount"]),
            ids=ids,
            ignored=set(split_ids(arrays["ignored"])),
            matrix=matrix,
            bits=bits,
            centre=centre,
            sums=arrays["sums"].copy(),
            row_of=SlotMap(ids),
            row_file=row_file,
        )

    def refuse(self, reason: str) -> None:
        """Say why the snapshot is not used (a row found damaged after it was read, too)."""
        self._refuse(reason)

    def _refuse(self, reason: str) -> VectorState | None:
        log.warning(
            "namespace %s: vector snapshot %s ignored, the vectors load in full: %s",
            self.namespace,
            self.path,
            reason,
        )
        return None
