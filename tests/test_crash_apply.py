"""A proposal's apply is all or nothing with real processes: a process SIGKILLed in the middle of
``apply_proposal`` (its lessons written in the transaction, the audit rows and the proposal not yet)
leaves the store as it was, on SQLite, PostgreSQL and Redis; the same apply then succeeds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lessonbank.models import AuditEntry, Lesson
from lessonbank.ports import LessonQuery, Store
from lessonbank.proposals import Operation, Proposal
from lessonbank.stores import open_store
from tests.contract.conftest import (
    POSTGRES_URL,
    REDIS_URL,
    drop_postgres_schema,
    drop_redis_prefix,
    require,
)

pytestmark = pytest.mark.slow

NS = "default"

# The child applies the proposal, stopping for good where the audit rows are queued (after every
# lesson write of the transaction), and says so on stdout.
CHILD = """
import json, sys, time
from lessonbank.models import AuditEntry, Lesson
from lessonbank.proposals import Proposal
from lessonbank.stores import open_store
import lessonbank.stores.sql.consolidation as sql_consolidation
from lessonbank.stores.redis import audit as redis_audit

def stall(*args, **kwargs):
    print("mid-apply", flush=True)
    time.sleep(120)

sql_consolidation.insert_audit = stall
redis_audit.RedisAudit.q_append = stall
url, payload = sys.argv[1], json.loads(sys.argv[2])
store = open_store(url)
proposal = Proposal.model_validate(payload["proposal"])
writes = [Lesson.model_validate(x) for x in payload["writes"]]
audit = [AuditEntry.model_validate(x) for x in payload["audit"]]
store.apply_proposal(proposal, writes, audit)
print("applied", flush=True)
"""


@pytest.fixture(params=("sqlite", "postgres", "redis"))
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    backend: str = request.param
    require(backend)
    tag = uuid.uuid4().hex[:12]
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'crash.db'}"
    elif backend == "redis":
        yield f"{REDIS_URL}?prefix=lbcrash{tag}:"
        drop_redis_prefix(f"lbcrash{tag}:")
    else:
        yield f"{POSTGRES_URL}?schema=lbcrash_{tag}"
        drop_postgres_schema(f"lbcrash_{tag}")


def merge(store: Store) -> tuple[Proposal, list[Lesson], list[AuditEntry]]:
    """Two stored lessons and an approved proposal merging them: what to apply."""
    a = store.write_lesson(Lesson(content="restart the flaky runner before retrying the deploy job")).lesson
    b = store.write_lesson(
        Lesson(content="when the deploy pipeline stalls, bounce the build runner first")
    ).lesson
    merged = Lesson(content="when a deploy stalls, restart the zeppelin runner once", source="consolidation")
    now = datetime.now(UTC)
    writes = [
        a.model_copy(update={"superseded_by": merged.id, "updated_at": now}),
        b.model_copy(update={"superseded_by": merged.id, "updated_at": now}),
        merged,
    ]
    made = Proposal(
        cycle_id="cyc_crash",
        operations=[Operation(kind="merge", lesson_ids=[a.id, b.id], lesson=merged)],
        based_on={a.id: a.updated_at, b.id: b.updated_at},
    )
    store.save_proposal(made)
    audit = [
        AuditEntry(actor="reflection:cyc_crash", action="edit", proposal_id=made.id).of(old, new)
        for old, new in ((a, writes[0]), (b, writes[1]), (None, merged))
    ]
    return made.model_copy(update={"status": "applied"}), writes, audit


def test_sigkill_mid_apply_writes_nothing(url: str) -> None:
    store = open_store(url)
    try:
        applied, writes, audit = merge(store)
        payload = json.dumps(
            {
                "proposal": applied.model_dump(mode="json"),
                "writes": [x.model_dump(mode="json") for x in writes],
                "audit": [x.model_dump(mode="json") for x in audit],
            }
        )
        child = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(CHILD), url, payload],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            assert child.stdout is not None
            line = child.stdout.readline()
            assert line.strip() == "mid-apply", child.stderr.read() if child.stderr else ""
        finally:
            child.send_signal(signal.SIGKILL)
            child.communicate(timeout=30)

        a, b, merged = writes
        assert store.get_lessons([merged.id]) == []
        assert [x.superseded_by for x in store.get_lessons([a.id, b.id])] == [None, None]
        assert {x.id for x in store.list_lessons(LessonQuery(NS))} == {a.id, b.id}
        assert store.search(LessonQuery(NS), ["zeppelin"], 5) == []
        assert store.audit_log(NS) == []
        assert store.get_proposal(applied.id, namespace=NS).status == "pending"
        # Nothing is left half done: the same apply now goes through.
        store.apply_proposal(applied, writes, audit)
        assert [c.lesson_id for c in store.search(LessonQuery(NS), ["zeppelin"], 5)] == [merged.id]
        assert {x.id for x in store.list_lessons(LessonQuery(NS))} == {merged.id}
        assert len(store.audit_log(NS)) == 3
        assert store.get_proposal(applied.id, namespace=NS).status == "applied"
        if url.startswith("sqlite"):
            conn = store.dialect.connection()  # type: ignore[attr-defined]
            conn.execute("INSERT INTO lessons_fts (lessons_fts) VALUES ('integrity-check')")
    finally:
        store.close()
