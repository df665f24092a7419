"""Store contract: retention (``purge_old``) deletes the same records on every backend.

Old reflections go by age, done jobs by when they finished, episodes by age unless a job that is not
done still points at them; lessons and other namespaces are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lessonbank.errors import NotFoundError
from lessonbank.models import Decision, Episode, Job, Lesson, Reflection
from lessonbank.ports import LessonQuery, Purged, RetentionCutoffs
from lessonbank.stores import Store
from tests.contract.conftest import Clock
from tests.contract.test_contract_jobs import A
from tests.contract.test_contract_lessons import at

DAY = 86_400.0
NS = "default"


@dataclass
class Made:
    episode: Episode
    job: Job | None = None
    reflection: Reflection | None = None


def _episode(store: Store, clock: Clock, name: str, *, job: str | None = None, namespace: str = NS) -> Made:
    """An episode created now, with a job left in the state ``job`` names (done, dead, queued)."""
    episode = Episode(task=f"task {name}", error="boom", namespace=namespace, created_at=at(clock.now))
    if job is None:
        store.record_episode(episode, Decision(reflect=False, reason="skip"), None)
        return Made(episode)
    made = Job(
        namespace=namespace,
        dedupe_key=f"key-{name}",
        episode_id=episode.id,
        created_at=at(clock.now),
        updated_at=at(clock.now),
        run_after=at(clock.now + (1000 * DAY if job == "queued" else 0)),  # queued: never leased here
    )
    decision = Decision(reflect=True, trigger="error", reflector="lesson", reason="failed", job_id=made.id)
    store.record_episode(episode, decision, made)
    if job == "queued":
        return Made(episode, made)
    leased = store.lease_job(A, [namespace], 60)
    assert leased is not None and leased.id == made.id
    if job == "dead":
        store.fail_job(made.id, A, error="bad key", retry_at=None)
        return Made(episode, made)
    reflection = Reflection(
        namespace=namespace,
        episode_id=episode.id,
        job_id=made.id,
        reflector="lesson",
        status="ok",
        raw_output=f"reflection on {name}",
        created_at=at(clock.now),
    )
    lesson = Lesson(
        namespace=namespace,
        content=f"lesson learned on {name}: check the cache first",
        episode_id=episode.id,
        reflection_id=reflection.id,
        created_at=at(clock.now),
        updated_at=at(clock.now),
    )
    store.finish_job(made.id, A, reflection=reflection, lessons=[lesson], detail="reflected")
    return Made(episode, made, reflection)


def _gone(read: object) -> bool:
    try:
        read()  # type: ignore[operator]
    except NotFoundError:
        return True
    return False


def test_purge_old_by_age_keeps_what_unfinished_jobs_need(store: Store, clock: Clock) -> None:
    start = clock.now
    old_done = _episode(store, clock, "old-done", job="done")
    old_dead = _episode(store, clock, "old-dead", job="dead")
    old_queued = _episode(store, clock, "old-queued", job="queued")
    old_bare = _episode(store, clock, "old-bare")
    other_ns = _episode(store, clock, "other-namespace", job="done", namespace="team-b")
    clock.advance(39 * DAY)
    new_done = _episode(store, clock, "new-done", job="done")
    clock.advance(1 * DAY)  # now: the old records are 40 days old, the new ones 1 day
    month = RetentionCutoffs(clock.now - 30 * DAY, clock.now - 30 * DAY, clock.now - 30 * DAY)

    assert store.purge_old(NS, RetentionCutoffs()) == Purged()  # nothing asked: nothing goes
    assert store.purge_old(NS, month, dry_run=True) == Purged(episodes=2, reflections=1, jobs=1)
    assert not _gone(lambda: store.get_episode(old_done.episode.id))  # a dry run deletes nothing
    assert store.count_jobs([NS]) == {"done": 2, "dead": 1, "queued": 1}

    assert store.purge_old(NS, month) == Purged(episodes=2, reflections=1, jobs=1)

    for gone in (old_done, old_bare):
        assert _gone(lambda gone=gone: store.get_episode(gone.episode.id))
    assert old_done.reflection is not None and old_done.job is not None
    assert _gone(lambda: store.get_reflection(old_done.reflection.id))
    assert _gone(lambda: store.get_job(old_done.job.id))
    for kept in (old_dead, old_queued, new_done):  # an unfinished job keeps its episode; new ones stay
        assert store.get_episode(kept.episode.id)[0].id == kept.episode.id
        assert kept.job is not None and store.get_job(kept.job.id).id == kept.job.id
    assert new_done.reflection is not None
    assert store.get_reflection(new_done.reflection.id).id == new_done.reflection.id
    assert store.count_jobs([NS]) == {"done": 1, "dead": 1, "queued": 1}
    assert store.stats(NS).episodes == 3
    assert store.stats(NS).reflections == {"ok": 1}
    # Lessons keep their text whatever happened to their episode; another namespace is untouched.
    kept_lessons = store.list_lessons(LessonQuery(NS))
    assert sorted(x.content.split(":")[0] for x in kept_lessons) == [
        "lesson learned on new-done",
        "lesson learned on old-done",
    ]
    assert store.get_episode(other_ns.episode.id)[0].namespace == "team-b"
    assert store.count_jobs(["team-b"]) == {"done": 1}
    assert store.purge_old(NS, month) == Purged()  # nothing left to do
    assert clock.now - start == 40 * DAY


def test_kinds_are_purged_independently(store: Store, clock: Clock) -> None:
    old = _episode(store, clock, "old", job="done")
    clock.advance(40 * DAY)
    cut = clock.now - 30 * DAY
    assert old.reflection is not None and old.job is not None

    # Episodes only: the episode goes, its reflection and done job stay and are still found by episode.
    assert store.purge_old(NS, RetentionCutoffs(episodes_before=cut)) == Purged(episodes=1)
    assert _gone(lambda: store.get_episode(old.episode.id))
    assert [r.id for r in store.reflections_for_episode(old.episode.id)] == [old.reflection.id]
    assert [r.id for r in store.reflections_for_episode(old.episode.id, namespace=NS)] == [old.reflection.id]
    assert store.get_job(old.job.id).status == "done"

    # Then reflections only, then done jobs only.
    assert store.purge_old(NS, RetentionCutoffs(reflections_before=cut)) == Purged(reflections=1)
    assert store.reflections_for_episode(old.episode.id) == []
    assert store.get_job(old.job.id).status == "done"
    assert store.purge_old(NS, RetentionCutoffs(done_jobs_before=cut)) == Purged(jobs=1)
    assert _gone(lambda: store.get_job(old.job.id))
    assert store.count_jobs(None) == {}


def test_a_done_job_goes_by_when_it_finished_and_frees_its_dedupe_key(store: Store, clock: Clock) -> None:
    made = _episode(store, clock, "late", job="queued")
    assert made.job is not None
    clock.advance(1000 * DAY)  # created long ago, finished just now
    assert store.lease_job(A, None, 60) is not None
    store.finish_job(made.job.id, A, reflection=None, lessons=[], detail="done late")
    cut = clock.now - 30 * DAY
    everything = RetentionCutoffs(cut, cut, cut)

    assert store.purge_old(NS, everything) == Purged(episodes=1)  # the job finished too recently
    clock.advance(31 * DAY)
    cut = clock.now - 30 * DAY
    assert store.purge_old(NS, RetentionCutoffs(cut, cut, cut)) == Purged(jobs=1)

    again = Job(
        namespace=NS,
        dedupe_key=made.job.dedupe_key,
        episode_id=made.episode.id,
        created_at=at(clock.now),
        updated_at=at(clock.now),
        run_after=at(clock.now),
    )
    store.enqueue_job(again)  # the key is free again, as after `jobs purge`
    assert store.get_job(again.id).status == "queued"


@pytest.mark.parametrize("dry_run", [True, False])
def test_an_empty_store_purges_nothing(store: Store, clock: Clock, dry_run: bool) -> None:
    cut = clock.now
    assert store.purge_old(NS, RetentionCutoffs(cut, cut, cut), dry_run=dry_run) == Purged()
