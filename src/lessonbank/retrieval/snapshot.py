"""Lexical index snapshots: a namespace's built index kept in a file beside its SQLite bank, or in
a cache folder for a PostgreSQL or Redis bank.

A new process reads the snapshot (memory-mapped) instead of every term vector, then follows the
change sequence from the snapshot's number on, as a long-lived index does: rows written since go to
its delta, lessons deleted since are found by the count. A snapshot therefore only has to be an
index the process could have held at sequence ``seq``; it is never trusted further than that.

Invariants:

- One file per namespace, ``<bank>.lexicon/<hash of the namespace>.snap`` for SQLite; for a server
  store ``<cache>/index-snapshots/<hash of the URL>/<hash of the namespace>.snap``, the URL taken
  without its password and the cache ``$LESSONBANK_HOME/cache`` (else ``$XDG_CACHE_HOME/lessonbank``,
  ``~/.cache/lessonbank``). Written whole or not at all (a temporary file in the same folder, then a
  rename), readable by its owner only (0600), in folders private to the user.
- The header names the format, the term-vector space and record layout, the namespace, the bank
  (a SQLite file's inode, a server store's URL), the sequence it reflects and the last lessons
  written with their term vectors' hashes (SQLite writes them empty, Redis keeps none: then their
  ids alone). A CRC32 covers everything but the postings, checked when the file is read; the postings
  (most of the file: 330 MB at a million lessons, and 36 MB of their one-byte codes) have a CRC32 per
  block of ``BLOCK``, kept under that first one, and the index checks a block before a search first reads it, so a recall touches the
  blocks of its own words only. A block that does not match makes the index reload in full before it
  answers (:class:`~lessonbank.retrieval.lexical_index.LexicalIndex`).
- A snapshot whose format, space, namespace or bank differs, none of whose anchors the store still
  holds as they were, whose sequence the bank has not reached, or whose bytes are damaged is
  ignored with a logged reason, and the index loads in full: it can cost time, never an answer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import mmap
import os
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, overload
from urllib.parse import urlsplit, urlunsplit

from lessonbank.settings import make_private_folder
from lessonbank.stores.lexical import LEXICAL_SPACE, TERM_RECORD

if TYPE_CHECKING:
    import numpy as np

    from lessonbank.ports import Store

log = logging.getLogger("lessonbank.retrieval")

FORMAT = (
    5  # 5: each word's bounds and its postings' one-byte codes; 4: ids as bytes, postings checked by block
)
MAGIC = b"LBLEXSNP"
PREFIX = struct.Struct("<8sI")  # magic, header length
ALIGN = 64
ANCHORS = 8  # lessons (the last written) of which one at least the bank must still hold, as it was
ARRAYS = {  # name → dtype, in file order
    "terms": "<u8",
    "starts": "<i8",
    "docs": "<i4",
    "tf": "<f4",
    "length": "<f8",
    "ids": "u1",
    "ignored": "u1",
    "order": "<i4",
    "ends": "<i8",
    "blocks": "<u4",
    "codes": "u1",
    "max_tf": "<f8",
    "min_length": "<f8",
    "impact": "<f8",
}
POSTINGS = ("docs", "tf", "codes")  # checked a block at a time, when a search first reads it (block_sums)
BLOCK = 1 << 16  # postings a block holds (512 KB of docs and tf)


@dataclass
class WordFigures:
    """What pruning keeps per word of a base (:class:`~lessonbank.retrieval.word_bounds.WordBounds`):
    its highest frequency, shortest lesson and highest ratio at the norm's per-token term
    ``at_token``, and a one-byte code per posting (parallel to the postings)."""

    max_tf: np.ndarray
    min_length: np.ndarray
    impact: np.ndarray
    codes: np.ndarray
    at_token: float


@dataclass
class IndexState:
    """What a lexical index holds once compacted (no delta, no dead slot), at sequence ``seq``."""

    seq: int
    miscount: int
    ids: Sequence[str]
    ignored: set[str]
    length: np.ndarray
    terms: np.ndarray
    starts: np.ndarray
    docs: np.ndarray
    tf: np.ndarray
    figures: WordFigures
    slot_of: MutableMapping[str, int] | None = None  # lesson id → slot, when read from a file
    blocks: np.ndarray | None = None  # block_sums of the postings, as read from a file (not yet checked)


def snapshot_of(store: Store, namespace: str) -> Snapshot | None:
    """The snapshot of ``namespace``: beside a SQLite bank's file, in the cache folder of a
    PostgreSQL or Redis bank's URL; None for a store with neither (the in-memory test double)."""
    dialect = getattr(store, "dialect", None)
    folder = getattr(dialect, "index_folder", None)
    if isinstance(folder, Path):
        return Snapshot(folder, namespace, bank_file=Path(str(getattr(dialect, "path", ""))))
    url = getattr(dialect, "url", None) or getattr(getattr(store, "db", None), "url", None)
    if not isinstance(url, str):
        return None
    key = without_password(url)
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return Snapshot(cache_folder() / "index-snapshots" / digest, namespace, bank_url=key)


def without_password(url: str) -> str:
    """``url`` with the password taken out of it (the cache folder's name must not hold it)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = f"{parts.username}@" if parts.username else ""
    host = parts.hostname or ""
    netloc = f"{user}{f'[{host}]' if ':' in host else host}{f':{parts.port}' if parts.port else ''}"
    return urlunsplit(parts._replace(netloc=netloc))


def cache_folder() -> Path:
    """Where lessonbank keeps what it can rebuild: ``$LESSONBANK_HOME/cache``, else the platform's
    cache folder (``$XDG_CACHE_HOME/lessonbank``, ``~/.cache/lessonbank``)."""
    home = os.environ.get("LESSONBANK_HOME")
    if home:
        return Path(home).expanduser() / "cache"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "lessonbank"


class Snapshot:
    """The snapshot file of one namespace of one bank (``bank_file`` for SQLite, else ``bank_url``)."""

    def __init__(
        self, folder: Path, namespace: str, *, bank_file: Path | None = None, bank_url: str | None = None
    ) -> None:
        self.folder = folder
        self.bank_file = bank_file
        self.bank_url = bank_url
        self.namespace = namespace
        digest = hashlib.sha256(namespace.encode()).hexdigest()[:24]
        self.path = folder / f"{digest}.snap"

    def _bank(self) -> str:
        return bank_identity(self.bank_file, self.bank_url)

    # ------------------------------------------------------------------ writing

    def write(self, state: IndexState, store: Store) -> bool:
        """Persist ``state``; False (logged) when the file cannot be written."""
        import numpy as np

        ids = list(state.ids)
        ids_blob = "\0".join(ids).encode()
        ignored_blob = "\0".join(sorted(state.ignored)).encode()
        if any("\0" in lesson_id for lesson_id in (*ids[-1:], *state.ignored)) or (
            ids_blob.count(b"\0") != max(0, len(ids) - 1)
        ):
            log.info("namespace %s: a lesson id holds a NUL byte; no index snapshot", self.namespace)
            return False
        anchors = ids[-ANCHORS:]
        hashes = store.vector_hashes(self.namespace, LEXICAL_SPACE, anchors)
        arrays: dict[str, Any] = {
            "terms": state.terms,
            "starts": state.starts,
            "docs": state.docs,
            "tf": state.tf,
            "length": state.length,
            "ids": np.frombuffer(ids_blob, dtype=np.uint8),
            "ignored": np.frombuffer(ignored_blob, dtype=np.uint8),
            "order": id_order(ids_blob, len(ids)),
            "ends": id_ends(ids_blob),
            "blocks": block_sums(state.docs, state.tf, state.figures.codes, 0, blocks_of(len(state.docs))),
            "codes": state.figures.codes,
            "max_tf": state.figures.max_tf,
            "min_length": state.figures.min_length,
            "impact": state.figures.impact,
        }
        layout: dict[str, list[int]] = {}
        offset = 0
        for name, dtype in ARRAYS.items():
            array = np.ascontiguousarray(arrays[name], dtype=dtype)
            arrays[name] = array
            layout[name] = [offset, len(array)]
            offset = aligned(offset + array.nbytes, ALIGN)
        crc = 0
        for name in ARRAYS:
            if name not in POSTINGS:
                crc = zlib.crc32(memoryview(arrays[name]).cast("B"), crc)
        header = json.dumps(
            {
                "format": FORMAT,
                "space": LEXICAL_SPACE,
                "record": TERM_RECORD.format,
                "namespace": self.namespace,
                "bank": self._bank(),
                "seq": state.seq,
                "miscount": state.miscount,
                "slots": len(ids),
                "anchors": [[lesson_id, hashes.get(lesson_id, "")] for lesson_id in anchors],
                "arrays": layout,
                "at_token": state.figures.at_token,
                "crc32": crc,
            }
        ).encode()
        start = aligned(PREFIX.size + len(header), ALIGN)

        def fill(out: BinaryIO) -> None:
            out.write(PREFIX.pack(MAGIC, len(header)) + header)
            for name in ARRAYS:
                out.seek(start + layout[name][0])
                out.write(memoryview(arrays[name]).cast("B"))
            out.truncate(start + offset)

        if not write_whole(self.path, fill, f"namespace {self.namespace}: no index snapshot"):
            return False
        log.debug("namespace %s: index snapshot of %d lessons at seq %d", self.namespace, len(ids), state.seq)
        return True

    # ------------------------------------------------------------------ reading

    def read(self, store: Store) -> IndexState | None:
        """The snapshot's index if it is this bank's, whole and not ahead of the store; else None,
        with the reason logged."""
        try:
            with open(self.path, "rb") as file:
                size = os.fstat(file.fileno()).st_size
                if size < PREFIX.size:
                    return self._refuse("it is truncated")
                buffer = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            return self._refuse(f"it cannot be read ({error})")
        try:
            return self._parse(buffer, size, store)
        except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as error:
            return self._refuse(f"it is damaged ({error})")

    def _parse(self, buffer: mmap.mmap, size: int, store: Store) -> IndexState | None:
        import numpy as np

        magic, header_length = PREFIX.unpack_from(buffer)
        if magic != MAGIC or PREFIX.size + header_length > size:
            return self._refuse("it is not an index snapshot")
        header = json.loads(bytes(buffer[PREFIX.size : PREFIX.size + header_length]))
        if header.get("format") != FORMAT:
            return self._refuse(f"its format is {header.get('format')!r}, this version reads {FORMAT}")
        if header.get("space") != LEXICAL_SPACE or header.get("record") != TERM_RECORD.format:
            return self._refuse("it holds another term-vector format")
        if header.get("namespace") != self.namespace:
            return self._refuse("it belongs to another namespace")
        if header.get("bank") != self._bank():
            return self._refuse("it belongs to another bank")
        start = aligned(PREFIX.size + header_length, ALIGN)
        arrays: dict[str, Any] = {}
        for name, dtype in ARRAYS.items():
            offset, count = (int(v) for v in header["arrays"][name])
            kind = np.dtype(dtype)
            if offset < 0 or count < 0 or start + offset + count * kind.itemsize > size:
                return self._refuse("it is truncated")
            arrays[name] = np.frombuffer(buffer, dtype=kind, count=count, offset=start + offset)
        crc = 0  # of everything but the postings, which the index checks a block at a time
        for name in ARRAYS:
            if name not in POSTINGS:
                crc = zlib.crc32(memoryview(arrays[name]).cast("B"), crc)
        if crc != header["crc32"]:
            return self._refuse("its checksum does not match")
        slots, terms, starts, docs = int(header["slots"]), arrays["terms"], arrays["starts"], arrays["docs"]
        ids = SnapshotIds(arrays["ids"], arrays["order"], arrays["ends"])
        if (
            ids.base() != slots
            or not valid_order(arrays["order"], slots)
            or len(arrays["length"]) != slots
            or len(starts) != len(terms) + 1
            or int(starts[0]) != 0
            or int(starts[-1]) != len(docs)
            or len(arrays["tf"]) != len(docs)
            or bool(np.any(np.diff(starts) <= 0))
            or bool(np.any(terms[1:] <= terms[:-1]))
            or len(arrays["blocks"]) != blocks_of(len(docs))
            or len(arrays["codes"]) != len(docs)
            or any(len(arrays[name]) != len(terms) for name in ("max_tf", "min_length", "impact"))
        ):
            return self._refuse("its arrays do not agree")
        seq = int(header["seq"])
        if seq <= 0:
            return self._refuse(f"it is at sequence {seq}")
        anchors = [(str(lesson_id), str(text_hash)) for lesson_id, text_hash in header["anchors"]]
        held = store.vector_hashes(self.namespace, LEXICAL_SPACE, [lesson_id for lesson_id, _ in anchors])
        if not any(held.get(lesson_id) == text_hash for lesson_id, text_hash in anchors) and not (
            # Term vectors without a hash (Redis keeps none): the lesson ids, unique to a bank, tell.
            store.get_lessons(
                [lesson_id for lesson_id, text_hash in anchors if not text_hash], namespace=self.namespace
            )
        ):
            return self._refuse("the bank no longer holds the lessons it was taken at")
        # A bank restored from an older copy has handed out fewer sequence numbers than the snapshot
        # reflects (sequence numbers only grow): asking for the rows from ``seq`` on tells.
        if store.vector_changes(self.namespace, LEXICAL_SPACE, seq - 1).seq < seq:
            return self._refuse("the bank's change sequence is behind it (restored from an older copy?)")
        return IndexState(
            seq=seq,
            miscount=int(header["miscount"]),
            ids=ids,
            ignored=set(split_ids(arrays["ignored"])),
            length=arrays["length"].copy(),
            terms=terms,
            starts=starts,
            docs=docs,
            tf=arrays["tf"],
            figures=WordFigures(
                arrays["max_tf"],
                arrays["min_length"],
                arrays["impact"],
                arrays["codes"],
                float(header["at_token"]),
            ),
            slot_of=SlotMap(ids),
            blocks=arrays["blocks"],
        )

    def refuse(self, reason: str) -> None:
        """Say why the snapshot is not used (a block of postings found damaged after it was read, too)."""
        self._refuse(reason)

    def _refuse(self, reason: str) -> IndexState | None:
        log.warning(
            "namespace %s: index snapshot %s ignored, the index loads in full: %s",
            self.namespace,
            self.path,
            reason,
        )
        return None


def bank_identity(bank_file: Path | None, bank_url: str | None) -> str:
    """What a bank is: its file's inode (a file replaced in place is another bank), or its URL."""
    if bank_file is None:
        return f"url:{bank_url}"
    try:
        return f"inode:{os.stat(bank_file).st_ino}"
    except OSError:
        return "inode:-1"


def write_whole(path: Path, fill: Callable[[BinaryIO], None], failure: str) -> bool:
    """Write ``path`` whole or not at all: ``fill`` writes a temporary file in the same private
    folder, which is synced and renamed over ``path``. False, logged as ``failure`` and the reason,
    when it cannot be written."""
    try:
        make_private_folder(path.parent)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    except OSError as error:
        log.warning("%s (%s)", failure, error)
        return False
    try:
        with os.fdopen(fd, "wb") as out:
            fill(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        log.warning("%s (%s)", failure, error)
        return False
    return True


def split_ids(blob: Any) -> list[str]:
    """Lesson ids stored as one NUL-separated byte array."""
    text = blob.tobytes().decode()
    return text.split("\0") if text else []


def blocks_of(postings: int) -> int:
    return -(-postings // BLOCK)


def blocks_holding(start: int, end: int) -> range:
    """The blocks holding postings ``start`` to ``end`` (one word's)."""
    return range(start // BLOCK, (end - 1) // BLOCK + 1)


def block_sums(docs: Any, tf: Any, codes: Any, first: int, end: int) -> Any:
    """The CRC32 of each block of postings from ``first`` to ``end`` (its docs, tf, then codes)."""
    import numpy as np

    out = np.empty(end - first, dtype="<u4")
    for block in range(first, end):
        part = slice(block * BLOCK, (block + 1) * BLOCK)
        crc = zlib.crc32(np.ascontiguousarray(docs[part], dtype="<i4").data)
        crc = zlib.crc32(np.ascontiguousarray(tf[part], dtype="<f4").data, crc)
        out[block - first] = zlib.crc32(np.ascontiguousarray(codes[part], dtype="u1").data, crc)
    return out


def id_order(blob: bytes, count: int) -> Any:
    """The slots of ``count`` NUL-separated ids in the order of their bytes: what
    :class:`SnapshotIds` searches to find a lesson's slot without a map of every id."""
    import numpy as np

    if not count:
        return np.zeros(0, dtype="<i4")
    return np.argsort(np.array(blob.split(b"\0")), kind="stable").astype("<i4")


def id_ends(blob: bytes) -> Any:
    """Where each of the NUL-separated ids but the last ends (its NUL), kept in the file so that
    reading it need not scan every id."""
    import numpy as np

    return np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == 0).astype("<i8")


def valid_order(order: Any, slots: int) -> bool:
    """Whether ``order`` can be the sorted slots of ``slots`` ids (its sort is the CRC's to vouch for)."""
    return len(order) == slots and (not slots or (int(order.min()) >= 0 and int(order.max()) < slots))


class SnapshotIds(Sequence[str]):
    """Lesson ids as a snapshot stores them (NUL-separated bytes, and their slots sorted by id),
    decoded one at a time when asked for, with the ids appended since in a list.

    A million ids as Python strings and a map of them cost ~0.5 s and ~150 MB, and a first recall
    reads a handful: a slot's id is decoded when asked for, an id's slot found by binary search
    (:meth:`slot`). Reading every id (:meth:`__iter__`) decodes them all at once.
    """

    def __init__(self, blob: Any, order: Any, ends: Any) -> None:
        self._blob = memoryview(blob).cast("B")
        self._ends = ends  # id_ends: where each id but the last ends
        self._base = len(self._ends) + 1 if len(self._blob) else 0
        if len(ends) and (int(ends[0]) < 0 or int(ends[-1]) >= len(self._blob)):
            raise ValueError("the ids' ends lie outside them")
        self._order = order
        self._tail: list[str] = []

    def base(self) -> int:
        """How many ids come from the snapshot."""
        return self._base

    def __len__(self) -> int:
        return self._base + len(self._tail)

    @overload
    def __getitem__(self, at: int) -> str: ...
    @overload
    def __getitem__(self, at: slice) -> list[str]: ...
    def __getitem__(self, at: int | slice) -> str | list[str]:
        if isinstance(at, slice):
            return [self[i] for i in range(*at.indices(len(self)))]
        at = int(at)
        if at < 0:
            at += len(self)
        if 0 <= at < self._base:
            return self._bytes(at).decode()
        return self._tail[at - self._base]

    def _bytes(self, at: int) -> bytes:
        start = int(self._ends[at - 1]) + 1 if at else 0
        end = int(self._ends[at]) if at < len(self._ends) else len(self._blob)
        return bytes(self._blob[start:end])

    def __iter__(self) -> Iterator[str]:
        if self._base:
            yield from bytes(self._blob).decode().split("\0")
        yield from self._tail

    def append(self, lesson_id: str) -> None:
        self._tail.append(lesson_id)

    def extend(self, lesson_ids: Iterable[str]) -> None:
        self._tail.extend(lesson_ids)

    def slot(self, lesson_id: str) -> int | None:
        """The snapshot slot holding ``lesson_id`` (binary search on the sorted slots), or None."""
        key, order = lesson_id.encode(), self._order
        low, high = 0, self._base
        while low < high:
            middle = (low + high) // 2
            if self._bytes(int(order[middle])) < key:
                low = middle + 1
            else:
                high = middle
        if low < self._base and self._bytes(int(order[low])) == key:
            return int(order[low])
        return None


class SlotMap(MutableMapping[str, int]):
    """Lesson id → slot over :class:`SnapshotIds`: the snapshot's ids found by binary search, the
    changes since (new slots, lessons moved or gone) kept in a dict. Iterating it builds the whole
    map once (what forgetting deleted lessons or reading every vector needs)."""

    def __init__(self, ids: SnapshotIds) -> None:
        self._ids = ids
        self._changed: dict[str, int | None] = {}  # None: no longer in the map
        self._whole: dict[str, int] | None = None

    def _map(self) -> dict[str, int]:
        if self._whole is None:
            whole = dict(zip(_base_ids(self._ids), range(self._ids.base()), strict=True))
            for lesson_id, slot in self._changed.items():
                if slot is None:
                    whole.pop(lesson_id, None)
                else:
                    whole[lesson_id] = slot
            self._whole, self._changed = whole, {}
        return self._whole

    def __getitem__(self, lesson_id: str) -> int:
        if self._whole is not None:
            return self._whole[lesson_id]
        slot = self._changed[lesson_id] if lesson_id in self._changed else self._ids.slot(lesson_id)
        if slot is None:
            raise KeyError(lesson_id)
        return slot

    def __setitem__(self, lesson_id: str, slot: int) -> None:
        if self._whole is not None:
            self._whole[lesson_id] = slot
        else:
            self._changed[lesson_id] = slot

    def __delitem__(self, lesson_id: str) -> None:
        if self._whole is not None:
            del self._whole[lesson_id]
            return
        self[lesson_id]  # KeyError when it is not there
        self._changed[lesson_id] = None

    def __iter__(self) -> Iterator[str]:
        return iter(self._map())

    def __len__(self) -> int:
        return len(self._map())


def _base_ids(ids: SnapshotIds) -> Iterator[str]:
    """The ids that came from the snapshot, decoded at once."""
    for at, lesson_id in enumerate(ids):
        if at == ids.base():
            return
        yield lesson_id


def aligned(offset: int, align: int) -> int:
    return -(-offset // align) * align
