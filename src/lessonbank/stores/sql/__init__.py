"""One SQL store for SQLite and PostgreSQL, with a dialect for what differs.

- :mod:`.store` — :class:`SQLStore`: episodes, reflections, lessons (written through
  :class:`~lessonbank.lessons.LessonWriter`), credit, stats; vectors through the dialect.
- :mod:`.jobs` — the job queue, one SQL for both databases.
- :mod:`.dialect` — the :class:`Dialect` protocol: placeholders, row locks, row encoding,
  lexical search, vectors, connections and transactions.
- :mod:`.sqlite` and :mod:`.postgres` (+ :mod:`.postgres_search`) — the two dialects;
  :mod:`.migrations` — their numbered schema migrations.

The dialect modules import their database driver; import them only when that database is used.
"""

from lessonbank.stores.sql.dialect import Dialect
from lessonbank.stores.sql.store import SQLStore

__all__ = ["Dialect", "SQLStore"]
