"""What only the server stores have: the seed 000 Redis keys, surviving dropped connections,
a clear error once the retry budget is spent, migrations, many worker processes on one queue."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lessonbank.errors import StoreError
from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.stores import Store, open_store
from lessonbank.stores.sql.migrations.postgres import MIGRATIONS as PG_MIGRATIONS
from tests.conftest import SEED_004_REPLY
from tests.contract.conftest import (
    POSTGRES_URL,
    REDIS_URL,
    Clock,
    drop_postgres_schema,
    drop_redis_prefix,
    require,
)


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    require("redis")
    prefix = f"lbtest{uuid.uuid4().hex[:12]}:"
    yield prefix
    drop_redis_prefix(prefix)


@pytest.fixture
def pg_schema() -> Iterator[str]:
    require("postgres")
    schema = f"lbtest_{uuid.uuid4().hex[:12]}"
    yield schema
    drop_postgres_schema(schema)


def insight(goal: str, text: str, clock: Clock, **fields: object) -> Lesson:
    from datetime import UTC, datetime

    return Lesson(
        kind="insight",
        goal_id=goal,
        content=text,
        importance=0.8,
        metadata={"goal_title": f"Goal {goal}", "goal_state": "failed"},
        created_at=datetime.fromtimestamp(clock.now, UTC),
        **fields,  # type: ignore[arg-type]
    )


# ------------------------------------------------------------------ Redis: seed 000 keys


def test_redis_seed_keys_mirror_goal_insights(redis_prefix: str) -> None:
    import redis

    clock = Clock()
    store = open_store(f"{REDIS_URL}?prefix={redis_prefix}", clock=clock)
    cli = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        made = []
        for n in range(4):
            clock.advance(1)
            made.append(
                store.write_lesson(insight("g1", f"insight number {n} about stale price data", clock)).lesson
            )
        entries = json.loads(cli.get(f"{redis_prefix}reflection:g1") or "[]")
        assert [e["insight"] for e in entries] == [
            f"insight number {n} about stale price data" for n in (3, 2, 1)
        ]
        assert entries[0]["goal_id"] == "g1" and entries[0]["goal_state"] == "failed"
        assert entries[0]["importance"] == 0.8 and entries[0]["goal_title"] == "Goal g1"
        assert entries[0]["lesson_id"] == made[3].id and entries[0]["created_at"].startswith("2027-01-15T")
        assert 7 * 86400 - 60 < cli.ttl(f"{redis_prefix}reflection:g1") <= 7 * 86400
        for n in range(2, 12):
            store.write_lesson(insight(f"g{n}", f"goal {n} went wrong because of a timeout", clock))
        recent = cli.lrange(f"{redis_prefix}reflection:recent_goals", 0, -1)
        assert cli.type(f"{redis_prefix}reflection:recent_goals") == "list"
        assert recent == [f"g{n}" for n in range(11, 1, -1)]
        # Ordinary lessons leave the seed keys alone; forgetting an insight removes its entry.
        store.write_lesson(Lesson(content="a plain lesson", goal_id="g1"))
        assert len(json.loads(cli.get(f"{redis_prefix}reflection:g1") or "[]")) == 3
        assert store.delete_lesson("default", made[3].id)
        assert [e["lesson_id"] for e in json.loads(cli.get(f"{redis_prefix}reflection:g1") or "[]")] == [
            made[2].id,
            made[1].id,
        ]
        solo = store.list_lessons(LessonQuery("default", goal_id="g11"))[0]
        assert store.delete_lesson("default", solo.id)
        assert cli.get(f"{redis_prefix}reflection:g11") is None
        assert "g11" not in cli.lrange(f"{redis_prefix}reflection:recent_goals", 0, -1)
    finally:
        store.close()
        cli.close()


def test_redis_seed_keys_are_per_namespace(redis_prefix: str) -> None:
    import redis

    clock = Clock()
    store = open_store(f"{REDIS_URL}?prefix={redis_prefix}", clock=clock)
    cli = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        mine = store.write_lesson(insight("g1", "the default namespace learned this", clock)).lesson
        clock.advance(1)
        theirs = store.write_lesson(insight("g1", "team b learned something else", clock, namespace="teamB"))
        clock.advance(1)
        store.write_lesson(insight("g2", "team b on another goal", clock, namespace="teamB"))
        clock.advance(1)
        store.write_lesson(insight("g3", "a namespace with a colon", clock, namespace="team:c"))

        def entries(key: str) -> list[str]:
            return [e["lesson_id"] for e in json.loads(cli.get(f"{redis_prefix}{key}") or "[]")]

        # The default namespace keeps seed 000's exact names; the others have their own.
        assert entries("reflection:g1") == [mine.id]
        assert cli.lrange(f"{redis_prefix}reflection:recent_goals", 0, -1) == ["g1"]
        assert entries("reflection:teamB:g1") == [theirs.lesson.id]
        assert cli.lrange(f"{redis_prefix}reflection:teamB:recent_goals", 0, -1) == ["g2", "g1"]
        assert len(entries("reflection:team%3Ac:g3")) == 1
        assert cli.lrange(f"{redis_prefix}reflection:team%3Ac:recent_goals", 0, -1) == ["g3"]
        assert store.delete_lesson("teamB", theirs.lesson.id)
        assert entries("reflection:teamB:g1") == [] and entries("reflection:g1") == [mine.id]
        assert cli.lrange(f"{redis_prefix}reflection:teamB:recent_goals", 0, -1) == ["g2"]
    finally:
        store.close()
        cli.close()


def test_redis_keys_of_namespaces_and_names_never_collide(redis_prefix: str) -> None:
    import redis

    from lessonbank.models import Decision, Episode, Job

    clock = Clock()
    store = open_store(f"{REDIS_URL}?prefix={redis_prefix}", clock=clock)
    cli = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        # Namespace "teamA:tok" would own "lb:teamA:tok:stream", teamA's index entry for "stream".
        lesson = store.write_lesson(Lesson(namespace="teamA", content="restart the stream consumer"))
        episode = Episode(task="deploy", namespace="teamA:tok", error="boom")
        job = Job(namespace="teamA:tok", dedupe_key="k", episode_id=episode.id)
        decision = Decision(reflect=True, trigger="error", reflector="lesson", reason="x", job_id=job.id)
        assert store.record_episode(episode, decision, job) == decision
        found = store.search(LessonQuery("teamA"), ["stream"], 5)
        assert [c.lesson_id for c in found] == [lesson.lesson.id]
        leased = store.lease_job("host@1:w", ["teamA:tok"], 60)
        assert leased is not None and leased.id == job.id
        # Tags, dedupe keys and model names with ":" or "%" stay apart from every other key.
        tagged = store.write_lesson(
            Lesson(namespace="teamA", content="tag with a colon", tags=["tok:stream", "50%"])
        )
        assert [x.id for x in store.list_lessons(LessonQuery("teamA", tags=["tok:stream"]))] == [
            tagged.lesson.id
        ]
        assert [x.id for x in store.list_lessons(LessonQuery("teamA", tags=["50%"]))] == [tagged.lesson.id]
        store.enqueue_job(Job(namespace="teamA", dedupe_key="a:b", episode_id="ep_1"))
        store.enqueue_job(Job(namespace="teamA", dedupe_key="a%3Ab", episode_id="ep_2"))
        assert store.count_jobs(["teamA"]) == {"queued": 2}
        assert store.put_vectors("teamA", "openai:small", [(lesson.lesson.id, "h", b"1234")]) == 1
        assert store.vector_hashes("teamA", "openai:small", [lesson.lesson.id]) == {lesson.lesson.id: "h"}
        # Ordinary names keep their keys; others are percent-encoded.
        base = f"{redis_prefix}lb:"
        assert cli.exists(f"{base}teamA:lesson:{lesson.lesson.id}")
        assert cli.exists(f"{base}teamA%3Atok:episode:{episode.id}")
        assert cli.exists(f"{base}teamA:tag:tok%3Astream") and cli.exists(f"{base}teamA:tag:50%25")
        assert cli.exists(f"{base}teamA:vec:openai%3Asmall")
        for key in cli.scan_iter(match=f"{base}*"):
            assert key.count(":") <= 4, key
    finally:
        store.close()
        cli.close()


# ------------------------------------------------------------------ connection drops


class Proxy:
    """A TCP relay to a server that a test can cut (like a server restart) and bring back."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.up = True
        self.refused = 0  # connections turned away while cut: the client's attempts to reconnect
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up:
                self.refused += 1
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Drop every connection and refuse new ones."""
        self.up = False
        with self.lock:
            conns, self.conns = self.conns, []
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def restore(self) -> None:
        self.up = True

    def close(self) -> None:
        self.cut()
        self.listener.close()


@pytest.fixture
def server_url(request: pytest.FixtureRequest) -> Iterator[tuple[str, Callable[[int], str]]]:
    """(backend, a function from a proxy port to a store URL on that backend)."""
    backend: str = request.param
    require(backend)
    tag = uuid.uuid4().hex[:12]
    if backend == "redis":
        yield backend, lambda port: f"redis://127.0.0.1:{port}/0?prefix=lbtest{tag}:&retry_s=6"
        drop_redis_prefix(f"lbtest{tag}:")
    else:
        yield (
            backend,
            lambda port: (
                f"postgresql://127.0.0.1:{port}/test?schema=lbtest_{tag}&retry_s=6&connect_timeout=2"
            ),
        )
        drop_postgres_schema(f"lbtest_{tag}")


@pytest.mark.slow
@pytest.mark.parametrize("server_url", ["redis", "postgres"], indirect=True)
def test_dropped_connections_are_retried_and_nothing_acknowledged_is_lost(
    server_url: tuple[str, Callable[[int], str]],
) -> None:
    backend, url_for = server_url
    proxy = Proxy(6379 if backend == "redis" else 5432)
    store = open_store(url_for(proxy.port))
    try:
        written = [
            store.write_lesson(Lesson(content=f"acknowledged lesson {n} about retries")).lesson.id
            for n in range(10)
        ]
        proxy.cut()  # the server "restarts": every connection drops, new ones are refused
        threading.Timer(1.5, proxy.restore).start()
        late = store.write_lesson(Lesson(content="written while the server was away")).lesson
        assert proxy.refused >= 1  # it tried while the server was away, then succeeded
        written.append(late.id)
        assert [lesson.id for lesson in store.get_lessons(written)] == written
        assert len(store.list_lessons(LessonQuery("default"))) == 11

        proxy.cut()  # gone for good: a clear error once the budget is spent
        refused = proxy.refused
        with pytest.raises(StoreError, match=r"unreachable after .* attempts over 6s"):
            store.write_lesson(Lesson(content="this one cannot be written"))
        assert proxy.refused - refused >= 2  # retried within its budget before giving up
    finally:
        proxy.close()
        store.close()
    check = open_store(url_for(6379 if backend == "redis" else 5432))
    try:
        assert len(check.list_lessons(LessonQuery("default"))) == 11
    finally:
        check.close()


def test_redis_client_kill_mid_run_is_retried(redis_prefix: str) -> None:
    import redis

    name = f"lbtest-{uuid.uuid4().hex[:8]}"
    store = open_store(f"{REDIS_URL}?prefix={redis_prefix}&client_name={name}")
    admin = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        for n in range(5):
            store.write_lesson(Lesson(content=f"lesson {n} before the kill"))
            for client in admin.client_list():
                if client.get("name") == name:
                    admin.client_kill_filter(_id=client["id"])
        assert len(store.list_lessons(LessonQuery("default"))) == 5
    finally:
        store.close()
        admin.close()


def test_postgres_backend_kill_mid_run_is_retried(pg_schema: str) -> None:
    import psycopg

    app = f"lbtest-{uuid.uuid4().hex[:8]}"
    store = open_store(f"{POSTGRES_URL}?schema={pg_schema}&application_name={app}")
    try:
        for n in range(5):
            store.write_lesson(Lesson(content=f"lesson {n} before the kill"))
            with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                    (app,),
                )
        assert len(store.list_lessons(LessonQuery("default"))) == 5
    finally:
        store.close()


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:9/0?retry_s=0.5", "postgresql://127.0.0.1:9/test?retry_s=0.5"]
)
def test_an_absent_server_is_a_clear_error(url: str) -> None:
    require("redis" if url.startswith("redis") else "postgres")
    with pytest.raises(StoreError, match=r"unreachable .*check that the server is up"):
        open_store(url)


# ------------------------------------------------------------------ Redis: hashes of an earlier release


def test_redis_lesson_hashes_without_flat_counters_read_them_from_their_json(redis_prefix: str) -> None:
    """Lesson hashes written before importance and the helpful/harmful counters had flat copies."""
    import redis

    store = open_store(f"{REDIS_URL}?prefix={redis_prefix}")
    try:
        made = store.write_lesson(Lesson(content="vacuum the reporting tables", importance=0.9, helpful=4))
        client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
        key = f"{redis_prefix}lb:default:lesson:{made.lesson.id}"
        assert client.hdel(key, "importance", "helpful", "harmful") == 3
        [hit] = store.search(LessonQuery("default"), ["vacuum"], 5)
        assert (hit.importance, hit.helpful, hit.harmful) == (0.9, 4, 0)
        assert store.get_lesson(made.lesson.id).helpful == 4
        # The first credit starts from the JSON's counts, not from zero.
        assert store.credit_lessons("default", [made.lesson.id], helpful=1, harmful=2) == 1
        stored = store.get_lesson(made.lesson.id)
        assert (stored.helpful, stored.harmful) == (5, 2)
        client.close()
    finally:
        store.close()


# ------------------------------------------------------------------ PostgreSQL migrations


def test_postgres_migrations_apply_once_and_refuse_a_newer_schema(pg_schema: str) -> None:
    import psycopg

    url = f"{POSTGRES_URL}?schema={pg_schema}"
    stores: list[Store] = []
    threads = [threading.Thread(target=lambda: stores.append(open_store(url))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        rows = conn.execute(f'SELECT version FROM "{pg_schema}".schema_migrations').fetchall()
        assert rows == [(n + 1,) for n in range(len(PG_MIGRATIONS))]
        conn.execute(f'INSERT INTO "{pg_schema}".schema_migrations VALUES (99, 0)')
    with pytest.raises(StoreError, match="newer lessonbank"):
        open_store(url)


def test_postgres_schema_of_the_previous_release_is_upgraded(
    pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from lessonbank.stores.lexical import LEXICAL_SPACE, lesson_term_vector
    from lessonbank.stores.sql import postgres as postgres_db
    from lessonbank.stores.sql.postgres_search import COLUMNS, PLACEHOLDERS, values

    url = f"{POSTGRES_URL}?schema={pg_schema}"
    monkeypatch.setattr(postgres_db, "MIGRATIONS", PG_MIGRATIONS[:1])
    open_store(url).close()
    old = Lesson(content="rotate the signing keys every quarter")
    old = old.model_copy(update={"content_hash": "h-old"})
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"')
        columns = COLUMNS.rsplit(",", 1)[0]  # as the previous release wrote them: no learned_from
        conn.execute(
            f"INSERT INTO lessons ({columns}) VALUES ({PLACEHOLDERS.rsplit(',', 1)[0].replace('?', '%s')})",
            values(old, 0.0)[:-1],
        )
    monkeypatch.setattr(postgres_db, "MIGRATIONS", PG_MIGRATIONS)
    store = open_store(url)
    try:
        assert [c.lesson_id for c in store.search(LessonQuery("default"), ["signing"], 5)] == [old.id]
        # The lesson written before term vectors were kept got its own in the upgrade.
        assert dict(store.vector_changes("default", LEXICAL_SPACE, 0).rows) == {
            old.id: lesson_term_vector(old)
        }
        new = store.write_lesson(Lesson(content="pin the base image", learned_from="Harden the docker build"))
        assert [c.lesson_id for c in store.search(LessonQuery("default"), ["docker"], 5)] == [new.lesson.id]
        assert store.put_vectors("default", "m", [(old.id, "h", b"\x00\x00\x80?")]) == 1
        assert store.delete_lesson("default", old.id)
        assert store.vector_changes("default", "m", 0).count == 0
    finally:
        store.close()


# ------------------------------------------------------------------ many worker processes


@pytest.mark.slow
@pytest.mark.parametrize("backend_name", ["redis", "postgres"])
def test_worker_processes_share_one_queue(backend_name: str, tmp_path: Path) -> None:
    require(backend_name)
    tag = uuid.uuid4().hex[:12]
    if backend_name == "redis":
        url = f"{REDIS_URL}?prefix=lbtest{tag}:"
    else:
        url = f"{POSTGRES_URL}?schema=lbtest_{tag}"
    from lessonbank import Episode, LessonBank

    jobs = 30
    try:
        with LessonBank(url, worker=False, llm="fake") as bank:
            for n in range(jobs):
                bank.record(
                    Episode(task=f"task {n}", status="failure", error=f"error {n}", agent=f"agent-{n}")
                )
            assert bank.stats()["jobs"] == {"queued": jobs}
        env = {
            **os.environ,
            "LESSONBANK_FAKE_REPLIES": json.dumps([SEED_004_REPLY] * jobs),
            "LESSONBANK_HOME": str(tmp_path),
        }
        cmd = [
            sys.executable,
            "-m",
            "lessonbank.cli",
            "worker",
            "--db",
            url,
            "--llm",
            "fake",
            "--concurrency",
            "2",
            "--until-idle",
        ]
        procs = [subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True) for _ in range(3)]
        outputs = [proc.communicate(timeout=120)[1] for proc in procs]
        assert all(proc.returncode == 0 for proc in procs), outputs
        processed = [int(out.rsplit("stopped after ", 1)[1].split(" ")[0]) for out in outputs]
        assert sum(processed) == jobs
        with LessonBank(url, worker=False) as bank:
            assert bank.stats()["jobs"] == {"done": jobs}
            assert bank.stats()["reflections"] == {"ok": jobs}  # each job ran exactly once
            assert len(bank.lessons()) == 1  # identical lessons merged into one
    finally:
        if backend_name == "redis":
            drop_redis_prefix(f"lbtest{tag}:")
        else:
            drop_postgres_schema(f"lbtest_{tag}")


def test_redis_entries_left_pending_by_a_vanished_consumer_are_reclaimed(redis_prefix: str) -> None:
    """A worker that read a job's stream entry and died before leasing it: XAUTOCLAIM after the lease."""
    from lessonbank.models import Job
    from lessonbank.stores.redis import RedisStore

    store = open_store(f"{REDIS_URL}?prefix={redis_prefix}")
    assert isinstance(store, RedisStore)
    try:
        store.enqueue_job(Job(namespace="default", dedupe_key="k", episode_id="ep_1"))
        stream = store.k("default", "stream")
        store.r.xreadgroup("workers", "vanished@1:x", {stream: ">"}, count=1)  # read, never leased
        assert store.r.xpending(stream, "workers")["pending"] == 1
        assert store.lease_job("host@2:b", None, 0.3) is None  # not idle long enough yet
        time.sleep(0.4)
        taken = store.lease_job("host@2:b", None, 0.3)
        assert taken is not None and taken.lease_owner == "host@2:b" and taken.attempts == 1
        store.finish_job(taken.id, "host@2:b", reflection=None, lessons=[], detail="ok")
        assert store.r.xpending(stream, "workers")["pending"] == 0 and store.r.xlen(stream) == 0
    finally:
        store.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://127.0.0.1:6379/0?retry_s=soon", "bad retry_s"),
        ("postgresql://127.0.0.1:5432/test?schema=", "bad schema name"),
        ("postgresql://127.0.0.1:5432/test?pool_max=many", "bad option"),
        ("mysql://127.0.0.1/db", "unknown database URL scheme"),
    ],
)
def test_bad_urls_are_config_errors(url: str, message: str) -> None:
    from lessonbank.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        open_store(url)


@pytest.mark.parametrize(
    ("module", "url", "extra"),
    [("redis", "redis://127.0.0.1:6379/0", "redis"), ("psycopg", "postgresql://127.0.0.1/test", "postgres")],
)
def test_a_missing_client_library_names_the_extra(
    module: str, url: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lessonbank.errors import ConfigError

    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    moved = (f"lessonbank.stores.{extra}", f"lessonbank.stores.sql.{extra}")  # the store and its dialect
    for name in [n for n in sys.modules if n.startswith(moved)]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ConfigError, match=rf"pip install 'lessonbank\[{extra}\]'"):
        open_store(url)


def test_redis_entries_read_by_a_dead_local_worker_are_taken_at_once(redis_prefix: str) -> None:
    """Killed between reading an entry and leasing its job: no need to wait for the lease to pass."""
    from lessonbank.models import Job
    from lessonbank.stores.redis import RedisStore

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    store = open_store(f"{REDIS_URL}?prefix={redis_prefix}")
    assert isinstance(store, RedisStore)
    try:
        store.enqueue_job(Job(namespace="default", dedupe_key="k", episode_id="ep_1"))
        stream = store.k("default", "stream")
        store.r.xreadgroup("workers", f"{socket.gethostname()}@{proc.pid}:dead", {stream: ">"}, count=1)
        taken = store.lease_job("host@2:b", None, 3600)
        assert taken is not None and taken.lease_owner == "host@2:b"
        assert [c["name"] for c in store.r.xinfo_consumers(stream, "workers")] == ["host@2:b"]
    finally:
        store.close()


def test_postgres_recall_runs_prepared_statements(pg_schema: str) -> None:
    """A recall's statements (the index's change check, the candidates' rows) are prepared on the
    connection after a few uses (psycopg prepares a statement run 5 times), not parsed and planned
    on every recall."""
    from lessonbank import LessonBank

    with LessonBank(f"{POSTGRES_URL}?schema={pg_schema}&pool_min=1&pool_max=1", worker=False) as bank:
        bank.import_lessons(
            [{"content": f"rotate the signing keys of service {n} every quarter"} for n in range(20)]
        )
        for n in range(10):
            assert bank.recall(f"signing keys service {n}", k=3, mode="lexical")
        with bank.store.dialect.read() as conn:  # type: ignore[attr-defined]
            prepared = [
                row[0] for row in conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
            ]
    assert any("lesson_vectors" in statement for statement in prepared)  # the change check
    assert any("l.id = ANY" in statement for statement in prepared)  # the candidates' rows
