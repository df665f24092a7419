"""A second process that screens part of each import batch, so an import uses two cores.

An import's own Python work per record (validation, the secrets redaction, the injection screen, the
untrusted-agent rule: :func:`lessonbank.services.writing.imported_lesson`) is independent from record
to record. With more than one core, a large batch is split: one helper process screens the first part
while the importing thread screens the rest, then the batch is written as one as before. Records are
still pulled one batch at a time and each batch is written before the next one is pulled.

Invariants:

- The same function screens a record in either process: the lessons written, the records skipped
  (with their messages) and the order of both are the same whichever process screened them.
- The helper's log records (a quarantined lesson's warning) are handed back and logged here, through
  the same ``lessonbank`` logger.
- Nothing is lost when the helper cannot help: a batch it cannot take (its records do not pickle) or
  a helper that died is screened here instead, and a broken helper is not used again.
- Splitting must pay: the importing process times both ways (records screened per second, split or
  not) and keeps to the faster, trying the other one batch in ``PROBE_EVERY``.
- One helper per process, started on the first large batch (that batch is screened here while it
  starts: a small import never waits for a process to start), ended at interpreter exit, when this
  process ends, or after ``IDLE_S`` without a batch. It is a plain ``python -c`` child talking over its stdin and stdout, not a
  ``multiprocessing`` worker: those re-run the parent's main module, which a script that imports
  without an ``if __name__ == "__main__"`` guard would not survive. Two imports at once: while one
  uses the helper, the other screens on its own.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from lessonbank.models import Lesson
from lessonbank.stores.lexical import TermWork, term_work

log = logging.getLogger("lessonbank")

# Below this many records a batch is screened here alone: sending records to the helper and lessons
# back costs ~20 µs a record, worth it only once the batch's screening outweighs the hand-over.
MIN_SPLIT = 200
# The helper's share of a split batch: it also pickles what it made, this side unpickles it.
HELPER_SHARE = 0.5
# A large batch is screened the way that was faster lately; one in this many the other way, to measure it.
PROBE_EVERY = 8
# A helper left this long without a batch ends (a server that imported once keeps no idle process);
# the next large batch starts another.
IDLE_S = 60.0

# One screened record: its number in the import, then its lesson, or why it was skipped.
Screened = tuple[int, Lesson | None, str | None]
# What a split batch also hands back: the term work of each lesson made (see lexical.worked_ahead).
Work = list[TermWork]
Screen = Callable[[Any], Lesson]


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def screen_records(records: Sequence[tuple[int, Any]], screen: Screen) -> list[Screened]:
    """Each numbered record through ``screen``; a ValueError or TypeError skips the record."""
    out: list[Screened] = []
    for number, record in records:
        try:
            out.append((number, screen(record), None))
        except (ValueError, TypeError) as exc:
            out.append((number, None, " ".join(str(exc).split())[:300]))
    return out


def _worked(screened: list[Screened]) -> tuple[list[Screened], Work]:
    return screened, [term_work(lesson) for _, lesson, _ in screened if lesson is not None]


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        record.msg, record.args = record.getMessage(), None  # the arguments need not pickle
        record.exc_info = record.exc_text = None
        self.records.append(record)


_SIZE = struct.Struct("<Q")
_READY = b"R"


def _send(stream: IO[bytes], payload: bytes) -> None:
    stream.write(_SIZE.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def _receive(stream: IO[bytes]) -> bytes:
    """One message; EOFError when the other side has gone."""
    head = stream.read(_SIZE.size)
    if len(head) < _SIZE.size:
        raise EOFError("the other process has gone")
    payload = stream.read(_SIZE.unpack(head)[0])
    if len(payload) < _SIZE.unpack(head)[0]:
        raise EOFError("the other process has gone")
    return payload


def _helper_screen(payload: bytes) -> bytes:
    """In the helper: screen a pickled ``(screen, log level, records)``."""
    screen, level, records = pickle.loads(payload)
    collect = _Collect()
    log.setLevel(level)
    log.propagate = False
    log.addHandler(collect)
    try:
        screened, work = _worked(screen_records(records, screen))
    finally:
        log.removeHandler(collect)
    return pickle.dumps((screened, work, collect.records), pickle.HIGHEST_PROTOCOL)


def serve() -> None:
    """The helper's loop: a request on stdin, its answer on stdout, until stdin closes or none comes
    for ``sys.argv[1]`` seconds. The modules named after it (the screen's) are loaded first, before
    it says it is ready."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the importing process's; this one ends with it
    idle = float(sys.argv[1])
    for name in sys.argv[2:]:
        importlib.import_module(name)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing printed may land in the answers
    try:
        stdout.write(_READY)
        stdout.flush()
        _answer(stdin, stdout, idle)
    except (OSError, EOFError):  # the importing process has gone
        return


def _answer(stdin: IO[bytes], stdout: IO[bytes], idle: float) -> None:
    while True:
        # One request at a time (the importer waits for each answer): none is left in stdin's buffer.
        if not select.select([stdin], [], [], idle)[0]:
            return  # idle: the importer starts another helper when it needs one
        payload = _receive(stdin)
        try:
            answer = pickle.dumps((True, _helper_screen(payload)), pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # handed back, raised in the importing process
            try:
                answer = pickle.dumps((False, exc), pickle.HIGHEST_PROTOCOL)
            except Exception:
                answer = pickle.dumps((False, RuntimeError(repr(exc))), pickle.HIGHEST_PROTOCOL)
        _send(stdout, answer)


class _Helper:
    """The process's one helper process, started once and used only once it has said it is ready."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # held by the import using the helper
        self._process: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._pid = 0
        self.idle_s = IDLE_S
        # Seconds a record took to screen and tokenise lately: batches split, batches screened here.
        self._cost: list[float | None] = [None, None]
        self._batches = 0
        # Readiness is polled with select(); an embedding program (not Python) cannot be run as one.
        python = Path(sys.executable or "").name.lower()
        self.broken = _cores() < 2 or os.name != "posix" or not python.startswith(("python", "pypy"))
        atexit.register(self.close)

    def _start(self, screen: Screen) -> None:
        root = str(Path(__file__).resolve().parents[2])  # this lessonbank, wherever it was imported from
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
        }
        self._pid, self._ready = os.getpid(), False
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from lessonbank.services.import_helper import serve; serve()",
                str(self.idle_s),
                getattr(screen, "func", screen).__module__,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # a helper that fails is reported here, when it is next used
            start_new_session=True,  # no terminal's job: Ctrl-C and hang-ups are the importer's to act on
            env=env,
        )

    def _usable(self, screen: Screen) -> subprocess.Popen[bytes] | None:
        """The helper when it is up and answering; otherwise None (and it is started, once)."""
        if self._process is not None and self._ready and self._process.poll() == 0:
            self.close()  # it ended, idle: start another
        if self._process is None or self._pid != os.getpid():  # a forked child starts its own
            try:
                self._start(screen)
            except OSError as exc:  # no process can be started here
                self._fail(exc)
            return None
        process = self._process
        if not self._ready:
            assert process.stdout is not None
            if not select.select([process.stdout], [], [], 0)[0]:
                return None  # still starting
            if process.stdout.read(1) != _READY:
                self._fail(EOFError("the helper process ended as it started"))
                return None
            self._ready = True
        return process

    def usable(self, screen: Screen) -> bool:
        """Whether the next large batch would be split (starting the helper if it is not)."""
        if self.broken or not self._lock.acquire(blocking=False):
            return False
        try:
            return self._usable(screen) is not None
        finally:
            self._lock.release()

    def _fail(self, exc: BaseException) -> None:
        if not self.broken:
            log.warning("import: the helper process is not used (%s); screening here", exc)
        self.broken = True
        self.close()

    def close(self) -> None:
        """End the helper (its stdin closed: it returns from its loop)."""
        process, self._process = self._process, None
        if process is None or self._pid != os.getpid():
            return
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def screen(
        self, records: Sequence[tuple[int, Any]], screen: Screen
    ) -> tuple[list[Screened], Work | None]:
        """``screen_records(records, screen)``, the first part of a large batch screened by the helper
        (``screen`` must pickle: a module's function, or a ``functools.partial`` of one); then (split
        batches only) the term work of every lesson made, in order."""
        if self.broken or len(records) < MIN_SPLIT or not self._lock.acquire(blocking=False):
            return screen_records(records, screen), None
        try:
            process = self._usable(screen)
            if process is None:
                return screen_records(records, screen), None
            split = self._choose()
            start = time.perf_counter()
            if split:
                done = self._split(process, records, screen)
            else:  # timed as a split batch is: screened and tokenised
                done = _worked(screen_records(records, screen))
            self._timed(split, (time.perf_counter() - start) / len(records))
            return done
        finally:
            self._lock.release()

    def _choose(self) -> bool:
        """Whether to split the next large batch: the way that screened a record faster lately (on a
        busy machine a second process may get no more CPU than the first had alone, and handing
        records over costs), the other way now and then to see whether that has changed."""
        self._batches += 1
        split, here = self._cost
        if split is None or here is None:
            return split is None
        faster = split <= here
        return faster != (self._batches % PROBE_EVERY == 0)

    def _timed(self, split: bool, seconds: float) -> None:
        index = 0 if split else 1
        before = self._cost[index]
        self._cost[index] = seconds if before is None else before + 0.3 * (seconds - before)

    def _split(
        self, process: subprocess.Popen[bytes], records: Sequence[tuple[int, Any]], screen: Screen
    ) -> tuple[list[Screened], Work | None]:
        assert process.stdin is not None and process.stdout is not None
        cut = int(len(records) * HELPER_SHARE)
        try:
            payload = pickle.dumps((screen, log.getEffectiveLevel(), records[:cut]), pickle.HIGHEST_PROTOCOL)
        except Exception:  # a record that does not pickle: this batch is screened here
            return screen_records(records, screen), None
        try:
            _send(process.stdin, payload)
        except OSError as exc:
            self._fail(exc)
            return screen_records(records, screen), None
        # This side tokenises its part too while the helper works: the store's write then only writes.
        mine, my_work = _worked(screen_records(records[cut:], screen))
        try:
            ok, answer = pickle.loads(_receive(process.stdout))
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            self._fail(exc)
            return [*screen_records(records[:cut], screen), *mine], None
        if not ok:
            raise answer
        theirs, their_work, logged = pickle.loads(answer)
        for record in logged:
            log.handle(record)
        return [*theirs, *mine], [*their_work, *my_work]


HELPER = _Helper()
