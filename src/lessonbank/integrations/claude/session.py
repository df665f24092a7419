"""What a Claude Code session's hooks remember between them: one row per (namespace, session) in a
small SQLite file, ``$LESSONBANK_HOME/claude/sessions.db``.

Each hook is its own process (or request), so the state lives on disk: the task of the stretch of
work not yet recorded (its first prompt), the lessons injected during it (credited by the episode
that ends it), the lessons in the model's context now (not injected twice; carried through a
compaction), the failed tool calls seen, and how far the transcript has been read. Hooks of one
session can run at once (parallel tool calls): every change is one ``BEGIN IMMEDIATE`` transaction
that reads the row, changes it and writes it back, so no update is lost. Sessions untouched for
:data:`KEEP_S` are forgotten.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lessonbank.settings import make_private_folder

KEEP_S = 7 * 24 * 3600.0
MAX_IDS = 200  # lessons remembered per list: far more than a session's contexts inject
MAX_FAILURES = 20  # failed tool calls remembered per stretch (each cut to FAILURE_CHARS)
FAILURE_CHARS = 300
BUSY_TIMEOUT_S = 5.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    namespace TEXT NOT NULL,
    session_id TEXT NOT NULL,
    state TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (namespace, session_id)
)
"""


@dataclass
class SessionState:
    """One session's state. ``task``: the first prompt of the stretch not yet recorded;
    ``injected``: lessons injected during that stretch; ``shown``: lessons in the model's context."""

    task: str | None = None
    last_prompt: str | None = None
    injected: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    transcript_offset: int = 0
    started_at: float | None = None
    episodes: int = 0

    def inject(self, ids: list[str]) -> None:
        """Remember ``ids`` as injected (for the stretch's episode) and in context."""
        for target in (self.injected, self.shown):
            target.extend(i for i in ids if i not in target)
            del target[:-MAX_IDS]

    def fail(self, what: str) -> None:
        self.failures.append(what[:FAILURE_CHARS])
        del self.failures[:-MAX_FAILURES]

    def recorded(self, transcript_offset: int) -> None:
        """The stretch was recorded as an episode: the next one starts empty."""
        self.task, self.injected, self.failures = None, [], []
        self.transcript_offset = transcript_offset
        self.episodes += 1

    @classmethod
    def of(cls, text: str) -> SessionState:
        known = set(cls.__dataclass_fields__)
        data = json.loads(text)
        return cls(**{key: value for key, value in data.items() if key in known})


class Sessions:
    """The session states of one namespace, in the SQLite file ``path``."""

    def __init__(self, path: Path, namespace: str, *, clock: Callable[[], float] = time.time) -> None:
        self.path, self.namespace, self.clock = path, namespace, clock

    @classmethod
    def under(cls, home: Path, namespace: str) -> Sessions:
        """The sessions file under a lessonbank home (``$LESSONBANK_HOME/claude/sessions.db``)."""
        return cls(home / "claude" / "sessions.db", namespace)

    def _connect(self) -> sqlite3.Connection:
        make_private_folder(self.path.parent)
        connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        connection.execute(_SCHEMA)
        return connection

    def get(self, session_id: str) -> SessionState:
        """The state of ``session_id`` (an empty one for a session not seen yet)."""
        with closing(self._connect()) as connection:
            row = connection.execute(
                "SELECT state FROM sessions WHERE namespace = ? AND session_id = ?",
                (self.namespace, session_id),
            ).fetchone()
        return SessionState.of(row[0]) if row else SessionState()

    def change(self, session_id: str, change: Callable[[SessionState], None]) -> SessionState:
        """Apply ``change`` to the state of ``session_id`` in one transaction; the state written."""
        with closing(self._connect()) as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                row = connection.execute(
                    "SELECT state FROM sessions WHERE namespace = ? AND session_id = ?",
                    (self.namespace, session_id),
                ).fetchone()
                state = SessionState.of(row[0]) if row else SessionState(started_at=self.clock())
                change(state)
                connection.execute(
                    "INSERT OR REPLACE INTO sessions (namespace, session_id, state, updated_at) VALUES (?, ?, ?, ?)",
                    (self.namespace, session_id, json.dumps(asdict(state)), self.clock()),
                )
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        return state

    def forget_stale(self) -> int:
        """Forget the sessions (of every namespace) untouched for :data:`KEEP_S`; how many."""
        with closing(self._connect()) as connection:
            cursor = connection.execute("DELETE FROM sessions WHERE updated_at < ?", (self.clock() - KEEP_S,))
            return cursor.rowcount
