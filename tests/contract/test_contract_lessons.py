"""Store contract: episodes, lessons, recall and reflections behave alike on every backend."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lessonbank.errors import InputError, NotFoundError
from lessonbank.models import Decision, Episode, Job, Lesson, Reflection
from lessonbank.ports import LessonQuery
from lessonbank.stores import Store
from tests.contract.conftest import Clock

NS = "default"


def at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def lesson(content: str, clock: Clock, **fields: object) -> Lesson:
    fields.setdefault("created_at", at(clock.now))
    fields.setdefault("updated_at", at(clock.now))
    return Lesson(content=content, **fields)  # type: ignore[arg-type]


def ids(found: list[Lesson]) -> list[str]:
    return [item.id for item in found]


# ------------------------------------------------------------------ episodes


def test_episode_roundtrip_repeat_and_dedupe(store: Store, clock: Clock) -> None:
    episode = Episode(
        task="deploy billing", agent="ops", namespace=NS, error="boom", created_at=at(clock.now)
    )
    job = Job(namespace=NS, dedupe_key="k1", episode_id=episode.id)
    decision = Decision(reflect=True, trigger="error", reflector="lesson", reason="failed", job_id=job.id)
    assert store.record_episode(episode, decision, job) == decision
    stored, stored_decision = store.get_episode(episode.id)
    assert stored == episode and stored_decision == decision
    # The same episode again (a retried call) changes nothing and answers the first decision.
    again = Job(namespace=NS, dedupe_key="k-other", episode_id=episode.id)
    assert store.record_episode(episode, decision.model_copy(update={"job_id": again.id}), again) == decision
    assert [j.id for j in store.list_jobs(NS)] == [job.id]
    # Another episode with the same dedupe key is not reflected twice.
    twin = Episode(task="deploy billing", agent="ops", namespace=NS, created_at=at(clock.now + 1))
    twin_job = Job(namespace=NS, dedupe_key="k1", episode_id=twin.id)
    final = store.record_episode(twin, decision.model_copy(update={"job_id": twin_job.id}), twin_job)
    assert not final.reflect and final.job_id == job.id and "duplicate" in final.reason
    assert store.get_episode(twin.id)[1] == final
    assert len(store.list_jobs(NS)) == 1
    with pytest.raises(NotFoundError):
        store.get_episode("ep_missing")


def test_recent_episodes_newest_first_with_filters(store: Store, clock: Clock) -> None:
    made = []
    for n in range(6):
        episode = Episode(
            task=f"task {n}", agent="a" if n % 2 else "b", namespace=NS, created_at=at(clock.now + n)
        )
        store.record_episode(episode, Decision(reflect=False, reason="skip"), None)
        made.append(episode)
    store.record_episode(
        Episode(task="elsewhere", namespace="other", created_at=at(clock.now + 9)),
        Decision(reflect=False, reason="skip"),
        None,
    )
    recent = store.recent_episodes(NS)
    assert [e.id for e, _ in recent] == [e.id for e in reversed(made)]
    assert [e.id for e, _ in store.recent_episodes(NS, agent="a")] == [made[5].id, made[3].id, made[1].id]
    assert [e.id for e, _ in store.recent_episodes(NS, since=clock.now + 4)] == [made[5].id, made[4].id]
    assert len(store.recent_episodes(NS, limit=2)) == 2
    assert recent[0][1] == Decision(reflect=False, reason="skip")


# ------------------------------------------------------------------ writing lessons


def test_same_content_reinforces_with_tag_union(store: Store, clock: Clock) -> None:
    first = store.write_lesson(lesson("Pin the helm chart version", clock, tags=["helm"]))
    assert first.action == "added"
    clock.advance(10)
    again = store.write_lesson(lesson("  pin the HELM chart   version ", clock, tags=["k8s", "helm"]))
    assert again.action == "reinforced" and again.lesson.id == first.lesson.id
    stored = store.get_lesson(first.lesson.id)
    assert stored.access_count == 1 and stored.confidence == pytest.approx(0.55)
    assert stored.tags == ["helm", "k8s"]
    assert stored.last_accessed is not None and stored.last_accessed.timestamp() == pytest.approx(clock.now)
    assert len(store.list_lessons(LessonQuery(NS))) == 1


def test_near_duplicates_reinforce_but_other_kinds_and_opposites_stay_apart(
    store: Store, clock: Clock
) -> None:
    base = "always run the database migrations before starting the api server in staging"
    first = store.write_lesson(lesson(base, clock)).lesson
    near = store.write_lesson(
        lesson("Always run database migrations before starting the API server in staging.", clock)
    )
    assert near.action == "reinforced" and near.lesson.id == first.id
    # One more word: nearly the same text, yet not the same lesson; added, and marked for review.
    today = store.write_lesson(lesson(base + " today", clock))
    assert today.action == "added" and today.lesson.metadata["similar_to"][0]["id"] == first.id
    assert store.get_lesson(today.lesson.id).metadata["similar_to"][0]["by"] == "words"
    other_kind = store.write_lesson(
        lesson(
            "Always run database migrations before starting the API server in staging.",
            clock,
            kind="principle",
        )
    )
    assert other_kind.action == "added"
    assert store.write_lesson(lesson("run X", clock)).action == "added"
    assert store.write_lesson(lesson("do not run X", clock)).action == "added"
    for _ in range(20):
        store.write_lesson(lesson(base, clock))
    assert store.get_lesson(first.id).confidence == 1.0


def test_lesson_fields_and_metadata_roundtrip(store: Store, clock: Clock) -> None:
    original = lesson(
        "Use the Edit tool for surgical changes",
        clock,
        kind="lesson",
        situation="Refactoring large Go files",
        mistake="full rewrite",
        correction="patch",
        trigger="error",
        tags=["go", "edit"],
        task_type="code",
        agent="coder",
        goal_id="g-1",
        importance=0.8,
        confidence=0.7,
        source="manual",
        episode_id="ep_1",
        reflection_id="ref_1",
        helpful=2,
        harmful=1,
        pinned=True,
        expires_at=at(clock.now + 3600),
        metadata={"goal_title": "Refactor auth", "steps": ["a", "b"], "n": 3},
    )
    stored = store.write_lesson(original).lesson
    loaded = store.get_lesson(stored.id)
    assert loaded == stored
    assert loaded.metadata == {"goal_title": "Refactor auth", "steps": ["a", "b"], "n": 3}
    assert store.get_lessons([stored.id, "les_missing", stored.id]) == [loaded, loaded]
    with pytest.raises(NotFoundError):
        store.get_lesson("les_missing")


def test_update_supersede_forget_and_expiry(store: Store, clock: Clock) -> None:
    old = store.write_lesson(lesson("retry the flaky upload step once", clock)).lesson
    new = store.write_lesson(lesson("retry the flaky upload step with backoff", clock)).lesson
    store.update_lesson(old.model_copy(update={"superseded_by": new.id}))
    store.update_lesson(new.model_copy(update={"supersedes": old.id}))
    visible = store.list_lessons(LessonQuery(NS))
    assert ids(visible) == [new.id]
    assert [c.lesson_id for c in store.search(LessonQuery(NS), ["flaky", "upload"], 10)] == [new.id]
    assert store.get_lesson(old.id).superseded_by == new.id

    # Rewriting content re-indexes: the new word is found, the old one no longer.
    edited = store.update_lesson(new.model_copy(update={"content": "retry the flaky download step"}))
    assert edited.content_hash != new.content_hash
    assert [c.lesson_id for c in store.search(LessonQuery(NS), ["download"], 10)] == [new.id]
    assert store.search(LessonQuery(NS), ["backoff"], 10) == []
    with pytest.raises(NotFoundError):
        store.update_lesson(lesson("never stored", clock))

    assert store.delete_lesson(NS, new.id) is True
    assert store.delete_lesson(NS, new.id) is False
    assert store.delete_lesson("other", old.id) is False  # another namespace cannot forget it
    assert store.search(LessonQuery(NS), ["download"], 10) == []
    # Forgotten content can be learned again from scratch.
    assert store.write_lesson(lesson("retry the flaky download step", clock)).action == "added"

    soon = store.write_lesson(
        lesson("rotate the api token weekly", clock, expires_at=at(clock.now + 60))
    ).lesson
    assert ids(store.list_lessons(LessonQuery(NS, kinds=["lesson"], tags=[]))).count(soon.id) == 1
    clock.advance(61)
    assert soon.id not in ids(store.list_lessons(LessonQuery(NS)))
    assert store.search(LessonQuery(NS), ["rotate", "token"], 10) == []
    revived = store.update_lesson(store.get_lesson(soon.id).model_copy(update={"expires_at": None}))
    assert revived.id in ids(store.list_lessons(LessonQuery(NS)))
    store.update_lesson(revived.model_copy(update={"expires_at": at(clock.now - 1)}))
    assert store.purge_expired(NS) == 1
    with pytest.raises(NotFoundError):
        store.get_lesson(soon.id)


def test_an_update_cannot_take_another_lessons_content(store: Store, clock: Clock) -> None:
    first = store.write_lesson(lesson("pin the compiler version in ci", clock)).lesson
    second = store.write_lesson(lesson("cache the dependency downloads", clock)).lesson
    with pytest.raises(InputError, match=first.id):
        store.update_lesson(second.model_copy(update={"content": "Pin the compiler version in CI"}))
    assert store.get_lesson(second.id).content == "cache the dependency downloads"
    assert store.get_lesson(first.id).content == "pin the compiler version in ci"
    with pytest.raises(NotFoundError):  # an absent lesson is absent, whatever its content
        store.update_lesson(lesson("pin the compiler version in ci", clock))


def test_list_filters_sorts_and_pages(store: Store, clock: Clock) -> None:
    made = {}
    specs = [
        (
            "a",
            dict(
                kind="lesson",
                tags=["x", "y"],
                task_type="code",
                agent="coder",
                importance=0.9,
                confidence=0.5,
                helpful=0,
            ),
        ),
        ("b", dict(kind="principle", tags=["x"], task_type="ops", importance=0.2, confidence=0.9, helpful=5)),
        (
            "c",
            dict(
                kind="lesson", tags=["y"], goal_id="g1", importance=0.5, confidence=0.6, helpful=1, harmful=3
            ),
        ),
        ("d", dict(kind="insight", goal_id="g1", status="archived", importance=1.0, confidence=1.0)),
    ]
    for name, fields in specs:
        clock.advance(1)
        made[name] = store.write_lesson(
            lesson(f"lesson {name} about topic {name}{name}", clock, **fields)
        ).lesson
    store.touch_lessons([made["c"].id, made["c"].id, made["a"].id])

    def names(query: LessonQuery, **kwargs: object) -> list[str]:
        by_id = {v.id: k for k, v in made.items()}
        return [by_id[item.id] for item in store.list_lessons(query, **kwargs)]  # type: ignore[arg-type]

    assert names(LessonQuery(NS)) == ["c", "b", "a"]
    assert names(LessonQuery(NS, statuses=("active", "archived"))) == ["d", "c", "b", "a"]
    assert names(LessonQuery(NS, statuses=())) == ["d", "c", "b", "a"]
    assert names(LessonQuery(NS, kinds=["lesson"])) == ["c", "a"]
    assert names(LessonQuery(NS, tags=["x"])) == ["b", "a"]
    assert names(LessonQuery(NS, tags=["x", "y"])) == ["a"]
    assert names(LessonQuery(NS, task_type="ops")) == ["b"]
    assert names(LessonQuery(NS, agent="coder")) == ["a"]
    assert names(LessonQuery(NS, goal_id="g1", statuses=())) == ["d", "c"]
    assert names(LessonQuery("other")) == []
    assert names(LessonQuery(NS), sort="access") == ["c", "a", "b"]
    assert names(LessonQuery(NS), sort="confidence") == ["b", "c", "a"]
    assert names(LessonQuery(NS), sort="utility") == ["b", "a", "c"]
    assert names(LessonQuery(NS), sort="score") == ["a", "c", "b"]
    assert names(LessonQuery(NS), limit=2) == ["c", "b"]
    assert names(LessonQuery(NS), limit=2, offset=2) == ["a"]
    assert names(LessonQuery(NS), sort="access", limit=1, offset=1) == ["a"]
    with pytest.raises(InputError):
        store.list_lessons(LessonQuery(NS), sort="nonsense")  # type: ignore[arg-type]


def test_import_counts_added_and_reinforced_and_renames_taken_ids(store: Store, clock: Clock) -> None:
    first = store.write_lesson(lesson("cache the npm directory in ci", clock)).lesson
    batch = [
        lesson("cache the npm directory in ci", clock, tags=["ci"]),
        lesson("a brand new lesson about caching", clock),
        lesson("A brand new lesson about   caching", clock),
        lesson("another lesson whose id is taken", clock, id=first.id),
    ]
    assert store.import_lessons(batch) == (2, 2)
    everything = store.list_lessons(LessonQuery(NS))
    assert len(everything) == 3
    assert store.get_lesson(first.id).content == "cache the npm directory in ci"
    assert store.get_lesson(first.id).tags == ["ci"]
    assert [c.lesson_id for c in store.search(LessonQuery(NS), ["taken"], 5)] != [first.id]
    assert len(store.search(LessonQuery(NS), ["brand"], 5)) == 1


# ------------------------------------------------------------------ recall


def test_search_ranks_by_bm25_and_applies_filters(store: Store, clock: Clock) -> None:
    rare = store.write_lesson(
        lesson("zeppelin deploys need a manual approval gate", clock, tags=["ops"])
    ).lesson
    for n in range(6):
        store.write_lesson(lesson(f"deploys of service {n} run on fridays", clock, agent="bot"))
    found = store.search(LessonQuery(NS), ["zeppelin", "deploys"], 3)
    assert found[0].lesson_id == rare.id and found[0].relevance > found[1].relevance > 0
    assert len(store.search(LessonQuery(NS), ["deploys"], 100)) == 7
    assert len(store.search(LessonQuery(NS), ["deploys"], 4)) == 4
    assert [c.lesson_id for c in store.search(LessonQuery(NS, tags=["ops"]), ["deploys"], 10)] == [rare.id]
    assert len(store.search(LessonQuery(NS, agent="bot"), ["deploys"], 10)) == 6
    assert store.search(LessonQuery(NS, kinds=["principle"]), ["deploys"], 10) == []
    assert store.search(LessonQuery("other"), ["deploys"], 10) == []
    assert store.search(LessonQuery(NS), ["absent"], 10) == []
    assert store.search(LessonQuery(NS), [], 10) == []
    tagged = store.search(LessonQuery(NS), ["ops"], 10)  # tags are searchable words too
    assert [c.lesson_id for c in tagged] == [rare.id]


def test_candidates_carry_use_and_recency(store: Store, clock: Clock) -> None:
    made = store.write_lesson(lesson("pin python dependencies with a lock file", clock, pinned=True)).lesson
    (before,) = store.search(LessonQuery(NS), ["python"], 5)
    assert before.access_count == 0 and before.pinned and before.last_used == pytest.approx(clock.now)
    clock.advance(100)
    store.touch_lessons([made.id])
    (after,) = store.search(LessonQuery(NS), ["python"], 5)
    assert after.access_count == 1 and after.last_used == pytest.approx(clock.now)
    assert store.get_lesson(made.id).access_count == 1
    store.touch_lessons([])
    store.touch_lessons(["les_missing"])


def test_recall_stays_bounded_when_every_word_is_common(store: Store, clock: Clock) -> None:
    store.import_lessons([lesson(f"common words everywhere number {n}", clock) for n in range(1600)])
    found = store.search(LessonQuery(NS), ["common", "words"], 20)
    assert len(found) == 20
    assert len({c.relevance for c in found}) == 1 and found[0].relevance > 0


def test_hostile_text_is_stored_and_searched_as_text(store: Store, clock: Clock) -> None:
    text = 'quote \' " \\ ; DROP TABLE lessons; -- {"$ne": 1} * ^ NEAR(a b) reflection:recent_goals'
    made = store.write_lesson(lesson(text, clock, tags=["sql'tag", "x:y"])).lesson
    assert store.get_lesson(made.id).content == text
    for term in ["drop", "table", "ne", "near", "reflection", "recent_goals", "'", "\\"]:
        store.search(LessonQuery(NS), [term], 5)
    assert [c.lesson_id for c in store.search(LessonQuery(NS), ["drop", "lessons"], 5)] == [made.id]
    assert ids(store.list_lessons(LessonQuery(NS, tags=["sql'tag"]))) == [made.id]


# ------------------------------------------------------------------ reflections and stats


def _finish(store: Store, clock: Clock, reflection: Reflection, lessons: list[Lesson]) -> str:
    job = Job(namespace=NS, dedupe_key=reflection.id, episode_id=reflection.episode_id)
    store.enqueue_job(job)
    leased = store.lease_job("host@1:w", None, 60)
    assert leased is not None and leased.id == job.id
    store.finish_job(job.id, "host@1:w", reflection=reflection, lessons=lessons, detail="done")
    return job.id


def test_reflections_and_stats(store: Store, clock: Clock) -> None:
    episode = Episode(task="t", namespace=NS, created_at=at(clock.now))
    store.record_episode(episode, Decision(reflect=False, reason="x"), None)
    reflection = Reflection(
        namespace=NS,
        episode_id=episode.id,
        reflector="lesson",
        status="ok",
        llm_calls=1,
        tokens_in=100,
        tokens_out=20,
        cost_usd=0.5,
        created_at=at(clock.now),
    )
    skipped = Reflection(
        namespace=NS,
        episode_id=episode.id,
        reflector="insight",
        status="skipped",
        llm_calls=2,
        tokens_in=10,
        tokens_out=1,
        created_at=at(clock.now + 1),
    )
    _finish(store, clock, reflection, [lesson("one lesson", clock), lesson("ONE lesson", clock)])
    _finish(store, clock, skipped, [])
    stored = store.get_reflection(reflection.id)
    assert len(stored.lesson_ids) == 2 and stored.lesson_ids[0] == stored.lesson_ids[1]
    assert [r.id for r in store.reflections_for_episode(episode.id)] == [reflection.id, skipped.id]
    assert store.reflections_for_episode("ep_none") == []
    with pytest.raises(NotFoundError):
        store.get_reflection("ref_missing")
    store.write_lesson(lesson("a principle", clock, kind="principle"))
    store.write_lesson(lesson("archived one", clock, status="archived"))

    stats = store.stats(NS)
    assert stats.episodes == 1
    assert stats.lessons == {"lesson": 1, "principle": 1}
    assert stats.lessons_by_status == {"active": 2, "archived": 1}
    assert stats.reflections == {"ok": 1, "skipped": 1}
    assert (stats.tokens_in, stats.tokens_out, stats.llm_calls) == (110, 21, 3)
    assert stats.cost_usd == pytest.approx(0.5)
    assert stats.jobs == {"done": 2}
    assert stats.by_reflector["lesson"]["calls"] == 1
    assert stats.by_reflector["insight"]["unpriced_calls"] == 1
    day = at(clock.now).strftime("%Y-%m-%d")
    assert stats.by_day[day]["reflections"] == 2
    assert store.stats("other").episodes == 0


def test_recall_matches_word_forms_as_sqlite_stems_them(store: Store, clock: Clock) -> None:
    made = store.write_lesson(lesson("when editing large Go files use Edit, not full rewrite", clock)).lesson
    deploys = store.write_lesson(lesson("deploys on fridays need a second reviewer", clock)).lesson
    assert [c.lesson_id for c in store.search(LessonQuery(NS), ["file"], 5)] == [made.id]
    assert [c.lesson_id for c in store.search(LessonQuery(NS), ["edits"], 5)] == [made.id]
    assert [c.lesson_id for c in store.search(LessonQuery(NS), ["deploying"], 5)] == [deploys.id]
    assert [c.lesson_id for c in store.search(LessonQuery(NS), ["Reviewers"], 5)] == [deploys.id]


def test_a_listing_that_is_not_live_only_holds_superseded_and_expired_lessons(
    store: Store, clock: Clock
) -> None:
    old = store.write_lesson(lesson("cache the token between calls", clock)).lesson
    new = store.write_lesson(lesson("never cache the token: it expires", clock, supersedes=old.id)).lesson
    gone = store.write_lesson(lesson("use the old vpn", clock, expires_at=at(clock.now + 60))).lesson
    clock.advance(120)
    assert ids(store.list_lessons(LessonQuery(NS))) == [new.id]
    everything = store.list_lessons(LessonQuery(NS, live_only=False))
    assert sorted(ids(everything)) == sorted([old.id, new.id, gone.id])
    assert {x.id: x.superseded_by for x in everything}[old.id] == new.id
    # Filters still apply; recall never sees them.
    assert ids(store.list_lessons(LessonQuery(NS, live_only=False, kinds=["principle"]))) == []
    assert [c.lesson_id for c in store.search(LessonQuery(NS), ["cache", "vpn"], 10)] == [new.id]
