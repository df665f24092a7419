"""Export and import in bounded memory: text written a record at a time, records read a piece at a time.

Export formats: ``json`` (one array, two-space indent), ``jsonl`` (one record per line) and
``markdown`` (for people); and the files agents read, written from the live lessons only:
``skills`` (a folder of Agent Skills, one per procedure: :mod:`lessonbank.integrations.skills`) and
``agents-md`` (the rules section of an ``AGENTS.md`` / ``CLAUDE.md``:
:mod:`lessonbank.integrations.agents_md`), which :mod:`lessonbank.integrations.agent_files` dispatches
to (this module writes the text formats). A backup holds every lesson, whatever its status; a lesson that is no
longer live carries a mark: ``"state": "superseded"`` or ``"state": "expired"`` in a JSON record
(its ``superseded_by`` / ``expires_at`` say by what and since when), and the same words in its
markdown heading. Import drops the mark and keeps the fields, so a restored lesson stays what it was.

Reading: :class:`RecordReader` takes a binary stream and yields the records of a JSON array (parsed
one element at a time with :meth:`json.JSONDecoder.raw_decode`) or of JSON Lines. A line that is not
JSON is skipped and counted; a JSON array that breaks stops the read with :class:`InputError`.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, TextIO, TypeVar, get_args

from lessonbank.errors import InputError
from lessonbank.models import Lesson
from lessonbank.services.sections import render_lesson

ExportFormat = Literal["json", "jsonl", "markdown", "skills", "agents-md"]
EXPORT_FORMATS: tuple[str, ...] = get_args(ExportFormat)
AGENT_FORMATS = ("skills", "agents-md")  # files an agent reads, written from the live lessons only
ExportTarget = str | os.PathLike[str] | TextIO
Mark = Literal["superseded", "expired"] | None

STATE_KEY = "state"  # the key of the mark on a record of a lesson that is no longer live
IMPORT_BATCH = 1_000  # records validated and written per store call: memory stays flat, commits few
READ_CHUNK = 1 << 16
MAX_RECORD_CHARS = 32 << 20  # one record (line or array element) past this is refused, not buffered on
_WHITESPACE = " \t\r\n"
T = TypeVar("T")


def check_format(fmt: object) -> None:
    if fmt not in EXPORT_FORMATS:
        raise InputError(
            f"unknown export format {fmt!r}; use json, jsonl, markdown, skills or agents-md", field="format"
        )


def write_export(
    marked: Iterable[tuple[Lesson, Mark]], fmt: str, namespace: str, target: ExportTarget
) -> int | None:
    """Write the export of ``marked`` lessons to ``target`` in ``fmt``. ``skills`` (a folder) and
    ``agents-md`` (a file whose other text is kept) take the live lessons only and return how many
    skills or rules they wrote; the text formats return None (every lesson is a record)."""
    check_format(fmt)
    if fmt not in AGENT_FORMATS:
        write_chunks(export_chunks(marked, fmt, namespace), target)
        return None
    if not isinstance(target, str | os.PathLike):
        if fmt == "skills":
            raise InputError("skills are written as folders: give a folder, not a stream", field="target")
        _write(export_chunks(marked, fmt, namespace), target)
        return None
    # A folder of skills or an AGENTS.md file: :mod:`lessonbank.integrations.agent_files` writes them.
    raise InputError(f"{fmt} is written to a folder or a file: use the agent-file writer", field="format")


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter), pulled only as each list is wanted."""
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def export_record(lesson: Lesson, mark: Mark) -> dict[str, Any]:
    record = lesson.model_dump(mode="json")
    if mark is not None:
        record[STATE_KEY] = mark
    return record


def export_line(lesson: Lesson, mark: Mark) -> str:
    """One JSON Lines record: pydantic's own JSON (as before marks existed), the mark added last."""
    line = lesson.model_dump_json()
    return line if mark is None else f'{line[:-1]},"{STATE_KEY}":"{mark}"}}'


def export_chunks(marked: Iterable[tuple[Lesson, Mark]], fmt: str, namespace: str) -> Iterator[str]:
    """The export text of ``marked`` lessons, a record at a time; joined, it is the whole export.

    ``json`` is byte for byte ``json.dumps(records, indent=2, ensure_ascii=False)``: each element is
    dumped alone and indented one level (JSON strings hold no raw newline, so this is exact)."""
    check_format(fmt)
    if fmt == "skills":
        raise InputError(
            "skills are written as folders, one per procedure: export_to(DIR, 'skills') or "
            "`lessonbank export --format skills DIR`",
            field="format",
        )
    if fmt == "agents-md":  # the section alone, as a new AGENTS.md holds it
        from lessonbank.integrations.rules_section import live_rules, section

        yield (
            section(
                live_rules(lesson for lesson, mark in marked if mark is None and lesson.status == "active")
            )
            + "\n"
        )
        return
    if fmt == "json":
        opening = "[\n  "
        for lesson, mark in marked:
            dumped = json.dumps(export_record(lesson, mark), indent=2, ensure_ascii=False)
            yield opening + dumped.replace("\n", "\n  ")
            opening = ",\n  "
        yield "[]" if opening == "[\n  " else "\n]"  # nothing yielded yet: an empty array
    elif fmt == "jsonl":
        for lesson, mark in marked:
            yield export_line(lesson, mark) + "\n"
    else:
        yield f"# Lessons — namespace `{namespace}`\n"
        for lesson, mark in marked:
            heading = f"## {lesson.id} · {lesson.kind} · confidence {lesson.confidence:.2f}"
            if mark == "superseded":
                heading += f" · superseded by {lesson.superseded_by}"
            elif mark == "expired" and lesson.expires_at is not None:
                heading += f" · expired {lesson.expires_at.isoformat(timespec='seconds')}"
            yield f"\n{heading}\n\n{render_lesson(lesson)}\n\ntags: {', '.join(lesson.tags)}\n"


def write_chunks(chunks: Iterable[str], target: ExportTarget, *, end_with_newline: bool = True) -> None:
    """Write ``chunks`` to a text stream, or to a file path, and end with a newline (unless
    ``end_with_newline`` is off: the text is written byte for byte).

    What a path names decides how it is written, as a shell's ``>`` would, and never turns a
    system file into a copy of the lessons:

    - a regular file (or a symbolic link to one) is replaced at its resolved path by a temporary
      file written beside it and renamed over it at the end, so a failed export never leaves a half
      backup where the last good one was; the new file keeps the old one's mode (and owner, where
      this process may set it);
    - a new file is created readable by its owner only (0600): an export holds every lesson;
    - a FIFO or a character device (``/dev/stdout``, a terminal, ``/dev/null``) is written into,
      never replaced;
    - a folder, a block device or a socket is refused with an :class:`OSError` that says so."""
    if not isinstance(target, str | os.PathLike):
        _write(chunks, target, end_with_newline)
        return
    path = Path(target)
    try:
        found: os.stat_result | None = os.stat(path)  # through links: what the path leads to is written
    except FileNotFoundError:
        found = None
    if found is None or stat.S_ISREG(found.st_mode):
        _replace(chunks, Path(os.path.realpath(path)), found, end_with_newline)
    elif _streamable(found):
        _stream_into(chunks, path, end_with_newline)
    else:
        refused = _REFUSED.get(stat.S_IFMT(found.st_mode), "not a file")
        code = errno.EISDIR if stat.S_ISDIR(found.st_mode) else errno.EINVAL
        raise OSError(code, f"it is {refused}; give a file name", str(path))


_REFUSED = {stat.S_IFDIR: "a folder", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def _streamable(found: os.stat_result) -> bool:
    return stat.S_ISFIFO(found.st_mode) or stat.S_ISCHR(found.st_mode)


def _stream_into(chunks: Iterable[str], path: Path, end_with_newline: bool = True) -> None:
    """Write into the FIFO or character device at ``path`` as it is: no temporary file, no rename."""
    # O_NOCTTY: a terminal written to never becomes this process's controlling terminal. No O_CREAT
    # and no O_TRUNC, and what was opened is checked again: a path swapped for a file meanwhile is
    # refused, not written over.
    fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as stream:
        if not _streamable(os.fstat(fd)):
            raise OSError(errno.EINVAL, "it changed while the export started; try again", str(path))
        _write(chunks, stream, end_with_newline)


def _replace(
    chunks: Iterable[str], path: Path, old: os.stat_result | None, end_with_newline: bool = True
) -> None:
    """Write ``path`` whole through a temporary file beside it, renamed over it at the end."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # made 0600
    temporary = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as file:
            if old is not None:  # the replaced file's owner (where this process may set it), then mode
                with contextlib.suppress(PermissionError):
                    os.fchown(file.fileno(), old.st_uid, old.st_gid)
                os.fchmod(file.fileno(), stat.S_IMODE(old.st_mode))
            _write(chunks, file, end_with_newline)
            file.flush()
            os.fsync(file.fileno())  # the rename must not reach the disk before the text
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _write(chunks: Iterable[str], stream: IO[str], end_with_newline: bool = True) -> None:
    last = ""
    for chunk in chunks:
        if chunk:
            stream.write(chunk)
            last = chunk
    if end_with_newline and not last.endswith("\n"):
        stream.write("\n")


class RecordReader:
    """The records of a JSON array or of JSON Lines in ``stream``, read a piece at a time.

    The first character that is not whitespace decides: ``[`` is one JSON array, anything else is
    JSON Lines. A line that is not JSON (or not UTF-8, or nested too deeply) is skipped: ``skipped``
    counts it and ``on_skip`` gets a message naming its line. An array that is not JSON raises
    :class:`InputError` (records before the fault were already yielded). ``empty`` tells, after the
    read, that the input held nothing but whitespace."""

    def __init__(self, stream: BinaryIO, what: str, *, on_skip: Callable[[str], None] | None = None) -> None:
        self.stream, self.what, self.on_skip = stream, what, on_skip
        self.skipped = 0
        self.records = 0
        self.empty = False
        self.is_array = False

    def __iter__(self) -> Iterator[Any]:
        chunks = iter(lambda: self.stream.read(READ_CHUNK), b"")
        head = b""
        for chunk in chunks:  # enough bytes to see a byte order mark, which is dropped
            head += chunk
            if len(head) >= len(codecs.BOM_UTF8):
                break
        head = head.removeprefix(codecs.BOM_UTF8).lstrip(_WHITESPACE.encode())
        for chunk in chunks if not head else ():
            # Leading whitespace is dropped as it comes, so only the first real piece is held.
            head = chunk.lstrip(_WHITESPACE.encode())
            if head:
                break
        if not head:
            self.empty = True
            return
        self.is_array = head.startswith(b"[")
        pieces = chain([head], chunks)
        records = self._array(pieces) if self.is_array else self._lines(pieces)
        for record in records:
            self.records += 1
            yield record

    def _skip(self, number: int, why: str) -> None:
        self.skipped += 1
        if self.on_skip is not None:
            self.on_skip(f"line {number} skipped: {why}")

    def _lines(self, pieces: Iterator[bytes]) -> Iterator[Any]:
        parts: list[bytes] = []
        number, size, dropping = 0, 0, False
        for piece in chain(pieces, [b"\n"]):  # the last line may have no newline of its own
            start = 0
            while (end := piece.find(b"\n", start)) >= 0:
                number += 1
                if not dropping:
                    raw = b"".join([*parts, piece[start:end]])
                    if raw.strip():
                        yield from self._line(number, raw)
                parts, size, dropping, start = [], 0, False, end + 1
            if not dropping:
                parts.append(piece[start:])
                size += len(piece) - start
                if size > MAX_RECORD_CHARS:  # refused now, and the rest of it read past, never held
                    self._skip(number + 1, f"longer than {MAX_RECORD_CHARS:,} bytes")
                    parts, size, dropping = [], 0, True

    def _line(self, number: int, raw: bytes) -> Iterator[Any]:
        try:
            yield json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            self._skip(number, f"not valid UTF-8 (byte {exc.start})")
        except json.JSONDecodeError as exc:
            self._skip(number, f"not JSON ({exc.msg})")
        except RecursionError:
            self._skip(number, "nested too deeply to read as JSON")

    def _array(self, pieces: Iterator[bytes]) -> Iterator[Any]:
        text = _Text(pieces, self.what)
        text.skip_whitespace()
        text.pos += 1  # the "["
        decoder, count = json.JSONDecoder(), 0
        while True:
            if not text.skip_whitespace():
                raise self._broken(count, "the array is not closed (the input stops early)")
            if text.buffer[text.pos] == "]" and count == 0:
                text.pos += 1
                break
            try:
                value, text.pos = text.decode(decoder)
            except json.JSONDecodeError as exc:
                raise self._broken(count, exc.msg) from None
            except RecursionError:
                raise InputError(f"{self.what} is nested too deeply to read as JSON", field="input") from None
            yield value
            count += 1
            if not text.skip_whitespace():
                raise self._broken(count, "the array is not closed (the input stops early)")
            separator = text.buffer[text.pos]
            text.pos += 1
            if separator == "]":
                break
            if separator != ",":
                raise self._broken(count, f"expected ',' or ']', found {separator!r}")
        if text.skip_whitespace():
            raise self._broken(count, "more text after the array")

    def _broken(self, count: int, why: str) -> InputError:
        return InputError(f"{self.what} is not JSON after record {count:,}: {why}", field="input")


class _Text:
    """Decoded text over byte pieces, with a read position; what is behind the position is dropped."""

    def __init__(self, pieces: Iterator[bytes], what: str) -> None:
        self.pieces, self.what = pieces, what
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buffer, self.pos, self.eof, self.offset = "", 0, False, 0

    def more(self, wanted: int = READ_CHUNK) -> bool:
        """Read at least ``wanted`` more characters when there are; False at the end of the input."""
        self.buffer, self.pos = self.buffer[self.pos :], 0
        added = 0
        while added < wanted and not self.eof:
            piece = next(self.pieces, None)
            try:
                text = self.decoder.decode(piece or b"", final=piece is None)
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"{self.what} is not valid UTF-8 (byte {self.offset + exc.start}); send UTF-8 text",
                    field="input",
                ) from None
            self.eof = piece is None
            self.offset += len(piece or b"")
            self.buffer += text
            added += len(text)
        return added > 0

    def skip_whitespace(self) -> bool:
        """Move past whitespace; False when the input ends first."""
        while True:
            while self.pos < len(self.buffer) and self.buffer[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.buffer):
                return True
            if not self.more():
                return False

    def decode(self, decoder: json.JSONDecoder) -> tuple[Any, int]:
        """The JSON value at the position and the position after it, reading on while it is cut off.

        A value that ends the buffer may go on (``12`` of ``123``), so it is taken only with a
        character after it or at the end of the input. The window doubles on each retry, so a long
        record is parsed a few times, not once per piece."""
        while True:
            try:
                value, end = decoder.raw_decode(self.buffer, self.pos)
                if end < len(self.buffer) or self.eof:
                    return value, end
            except json.JSONDecodeError:
                if self.eof or len(self.buffer) - self.pos > MAX_RECORD_CHARS:
                    raise
            window = len(self.buffer) - self.pos
            if not self.more(max(READ_CHUNK, window)):
                return decoder.raw_decode(self.buffer, self.pos)
