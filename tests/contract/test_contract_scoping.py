"""Store contract: namespaces are apart by id too. An id a caller chose in one namespace cannot be
taken in another, and a read by id answers from the namespace it is asked about only."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lessonbank import LessonBank
from lessonbank.errors import InputError, NotFoundError
from lessonbank.models import Decision, Episode, Job, Lesson, Reflection
from lessonbank.ports import LessonQuery
from lessonbank.stores import Store
from tests.contract.conftest import Clock

A, B = "team-a", "team-b"


def at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _episode(clock: Clock, namespace: str, task: str, **fields: object) -> Episode:
    return Episode(task=task, namespace=namespace, error="boom", created_at=at(clock.now), **fields)  # type: ignore[arg-type]


def _record(store: Store, episode: Episode, key: str) -> tuple[Decision, Job]:
    job = Job(namespace=str(episode.namespace), dedupe_key=key, episode_id=episode.id)
    decision = Decision(reflect=True, trigger="error", reflector="lesson", reason="failed", job_id=job.id)
    return store.record_episode(episode, decision, job), job


def test_an_episode_id_taken_in_another_namespace_is_refused(store: Store, clock: Clock) -> None:
    mine = _episode(clock, A, "deploy billing", id="ep_shared")
    decision, job = _record(store, mine, "k-a")
    theirs = _episode(clock, B, "something else entirely", id="ep_shared")
    with pytest.raises(InputError) as refused:
        _record(store, theirs, "k-b")
    assert refused.value.field == "id"
    # Nothing changed: A keeps its episode and its job, B has neither.
    assert store.get_episode("ep_shared") == (mine, decision)
    assert store.get_episode("ep_shared", namespace=A) == (mine, decision)
    with pytest.raises(NotFoundError):
        store.get_episode("ep_shared", namespace=B)
    assert store.recent_episodes(B) == [] and store.list_jobs(B) == []
    assert [j.id for j in store.list_jobs(A)] == [job.id]
    leased = store.lease_job("host@1:w", [A], 60)
    assert leased is not None and leased.id == job.id
    # The same id again in the same namespace stays a repeat: the first decision, nothing new.
    assert _record(store, mine, "k-a2")[0] == decision
    assert [j.id for j in store.list_jobs(A)] == [job.id]


def test_a_lesson_id_taken_in_another_namespace_is_refused(store: Store, clock: Clock) -> None:
    mine = store.write_lesson(
        Lesson(
            id="les_shared", namespace=A, content="pin the exact package version", created_at=at(clock.now)
        )
    ).lesson
    with pytest.raises(InputError) as refused:
        store.write_lesson(
            Lesson(
                id="les_shared", namespace=B, content="rotate the log files daily", created_at=at(clock.now)
            )
        )
    assert refused.value.field == "id"
    assert store.get_lesson("les_shared") == mine
    assert store.list_lessons(LessonQuery(B)) == []
    # An import that brings the same id gets a fresh one; A's lesson stays as it was.
    assert store.import_lessons(
        [Lesson(id="les_shared", namespace=B, content="restart the cache after deploys")]
    ) == (1, 0)
    (imported,) = store.list_lessons(LessonQuery(B))
    assert imported.id != "les_shared" and imported.content == "restart the cache after deploys"
    assert store.get_lesson("les_shared") == mine
    assert store.get_lesson("les_shared", namespace=A) == mine


def test_a_job_id_taken_in_another_namespace_is_refused(store: Store, clock: Clock) -> None:
    job = Job(id="job_shared", namespace=A, dedupe_key="k", episode_id="ep_1")
    store.enqueue_job(job)
    with pytest.raises(InputError) as refused:
        store.enqueue_job(Job(id="job_shared", namespace=B, dedupe_key="k", episode_id="ep_2"))
    assert refused.value.field == "id"
    assert store.get_job("job_shared").namespace == A
    assert store.list_jobs(B) == [] and store.count_jobs([B]) == {}


def test_reads_by_id_answer_from_the_namespace_asked(store: Store, clock: Clock) -> None:
    episode = _episode(clock, A, "deploy billing")
    _, job = _record(store, episode, "k-a")
    lesson = Lesson(namespace=A, content="check the billing config first", created_at=at(clock.now))
    reflection = Reflection(
        namespace=A,
        episode_id=episode.id,
        job_id=job.id,
        reflector="lesson",
        status="ok",
        created_at=at(clock.now),
    )
    leased = store.lease_job("host@1:w", [A], 60)
    assert leased is not None
    written = store.finish_job(job.id, "host@1:w", reflection=reflection, lessons=[lesson], detail="ok")
    lesson_id = written[0].lesson.id

    # Asked about A (or about any namespace): found.
    for namespace in (A, None):
        assert store.get_episode(episode.id, namespace=namespace)[0] == episode
        assert store.get_lesson(lesson_id, namespace=namespace).id == lesson_id
        assert [x.id for x in store.get_lessons([lesson_id], namespace=namespace)] == [lesson_id]
        assert store.get_job(job.id, namespace=namespace).id == job.id
        assert store.get_reflection(reflection.id, namespace=namespace).id == reflection.id
        assert [r.id for r in store.reflections_for_episode(episode.id, namespace=namespace)] == [
            reflection.id
        ]
    # Asked about B: another namespace's records are not there.
    with pytest.raises(NotFoundError):
        store.get_episode(episode.id, namespace=B)
    with pytest.raises(NotFoundError):
        store.get_lesson(lesson_id, namespace=B)
    assert store.get_lessons([lesson_id], namespace=B) == []
    with pytest.raises(NotFoundError):
        store.get_job(job.id, namespace=B)
    with pytest.raises(NotFoundError):
        store.get_reflection(reflection.id, namespace=B)
    assert store.reflections_for_episode(episode.id, namespace=B) == []


def test_a_bank_does_not_show_or_reflect_another_namespaces_records(store_url: str) -> None:
    with LessonBank(store_url, namespace=A) as a, LessonBank(store_url, namespace=B) as b:
        episode = a.record({"task": "deploy billing", "error": "boom"})
        lesson = a.add_lesson("check the billing config first")
        jobs_before = a.jobs()
        for record_id in [episode.id, lesson.id, *(j.id for j in jobs_before)]:
            assert a.show(record_id)
            with pytest.raises(NotFoundError):
                b.show(record_id)
        with pytest.raises(NotFoundError):
            b.get_lesson(lesson.id)
        with pytest.raises(NotFoundError):
            b.reflect(episode.id)
        with pytest.raises(NotFoundError):
            b.forget(lesson.id)
        assert b.retry_jobs([j.id for j in jobs_before]) == 0
        assert [j.id for j in a.jobs()] == [j.id for j in jobs_before] and b.jobs() == []
        assert a.get_lesson(lesson.id).id == lesson.id


# ---------------------------------------------------------------- who a lesson serves


def test_a_lesson_without_an_agent_serves_every_agent_in_recall_and_context(store_url: str) -> None:
    """One rule for recall and context on every store: a lesson without an agent (task type, goal)
    serves every one; a lesson of another agent (task type, goal) does not."""
    with LessonBank(store_url) as bank:
        shared = bank.add_lesson("when editing large Go files use Edit, not full rewrite", tags=["go"])
        theirs = bank.add_lesson("split large go files by package for the reviewer", agent="reviewer")
        mine = bank.add_lesson("split large go files along their types first", agent="coder")
        for mode in ("lexical", "hybrid") if bank.retriever.embedder else ("lexical",):
            found = {
                hit.lesson.id for hit in bank.recall("split large go file", agent="coder", k=5, mode=mode)
            }
            assert found == {shared.id, mine.id}
        assert shared.id in bank.context("split large go file", agent="coder").lesson_ids
        # Task type and goal follow the same rule.
        typed = bank.add_lesson("large go files compile slowly: split them", task_type="refactor")
        by_type = {hit.lesson.id for hit in bank.recall("split large go file", task_type="review", k=5)}
        assert shared.id in by_type and typed.id not in by_type
        by_goal = {hit.lesson.id for hit in bank.recall("split large go file", goal_id="g1", k=5)}
        assert {shared.id, theirs.id, mine.id, typed.id} <= by_goal
        assert {h.lesson.id for h in bank.recall("split large go file", task_type="refactor", k=5)} >= {
            shared.id,
            typed.id,
        }


def test_the_agent_rule_holds_with_vectors(store_url: str) -> None:
    with LessonBank(store_url, embedder="hash") as bank:
        shared = bank.add_lesson("when editing large Go files use Edit, not full rewrite")
        theirs = bank.add_lesson("when editing large Go files use the formatter", agent="reviewer")
        found = {
            h.lesson.id for h in bank.recall("editing large go files", agent="coder", k=5, mode="vector")
        }
        assert shared.id in found and theirs.id not in found


def test_a_rule_without_an_agent_is_listed_for_every_agent(store_url: str) -> None:
    """The rules listing follows the one scope rule, as the learned-rules section of a context does."""
    with LessonBank(store_url, worker=False) as bank:
        shared = bank.add_lesson("IF a migration fails THEN restore the snapshot first", kind="principle")
        mine = bank.add_lesson("IF the linter fails THEN run it with --fix", kind="principle", agent="coder")
        theirs = bank.add_lesson("IF a pager fires THEN ack within 5 min", kind="principle", agent="ops")
        assert {rule.id for rule in bank.rules(agent="coder")} == {shared.id, mine.id}
        assert bank.rules(agent="coder")[0].id == mine.id  # the agent's own first
        assert {rule.id for rule in bank.rules(agent="nobody")} == {shared.id}
        assert {rule.id for rule in bank.rules()} == {shared.id, mine.id, theirs.id}
        block = bank.context("fix the failing migration", agent="coder", formats=["learned_rules"])
        assert set(block.lesson_ids) == {shared.id, mine.id}
