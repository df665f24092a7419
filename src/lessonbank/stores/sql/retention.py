"""The SQL stores' retention (the RetentionStore port), one for SQLite and PostgreSQL.

Three DELETE statements (or counts, in a dry run) in one transaction. The episodes an unfinished
job needs are read by one uncorrelated subquery (computed once, not per episode: the jobs table has
no index on ``episode_id``, and unfinished jobs are few).
"""

from __future__ import annotations

from typing import Any

from lessonbank import queueing
from lessonbank.ports import Purged, RetentionCutoffs
from lessonbank.stores.sql.dialect import Dialect

DONE = f"'{queueing.DONE}'"  # a constant of ours, never input

# (kind, table, the WHERE clause after the namespace and the cut-off)
_KINDS = (
    ("reflections", "reflections", "created_at < ?"),
    ("jobs", "jobs", f"status = {DONE} AND coalesce(finished_at, updated_at) < ?"),
    (
        "episodes",
        "episodes",
        "created_at < ? AND id NOT IN (SELECT episode_id FROM jobs WHERE namespace = ? "
        f"AND status <> {DONE} AND episode_id IS NOT NULL)",
    ),
)


def purge_old(dialect: Dialect, namespace: str, cutoffs: RetentionCutoffs, *, dry_run: bool) -> Purged:
    """Delete (or count, with ``dry_run``) the namespace's records past the cut-offs (see the port)."""
    before = {
        "reflections": cutoffs.reflections_before,
        "jobs": cutoffs.done_jobs_before,
        "episodes": cutoffs.episodes_before,
    }

    def run() -> Purged:
        found: dict[str, int] = {}
        with dialect.tx() as conn:
            for kind, table, where in _KINDS:
                cutoff = before[kind]
                if cutoff is None:
                    found[kind] = 0
                    continue
                params: list[Any] = [namespace, cutoff] + ([namespace] if kind == "episodes" else [])
                clause = f"FROM {table} WHERE namespace = ? AND {where}"
                if dry_run:
                    row = conn.execute(f"SELECT count(*) {clause}", params).fetchone()
                    found[kind] = int(row[0]) if row else 0
                else:
                    found[kind] = conn.execute(f"DELETE {clause}", params).rowcount
        return Purged(**found)

    return dialect.run(run)
