"""Group commit: concurrent writers share transactions, each still answered with its own result.

The committer alone (:class:`~lessonbank.stores.group_commit.GroupCommit`), then the stores'
``record_episode`` from many threads on every backend, then a process killed while its threads
record: every episode acknowledged before the kill is in the store afterwards.
"""

# ruff: noqa: F811  (the fixtures imported below are parameters of the tests)
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from lessonbank.errors import InputError
from lessonbank.models import Decision, Episode, Job, Lesson
from lessonbank.ports import LessonQuery, WriteResult
from lessonbank.stores import Store
from lessonbank.stores.group_commit import GroupCommit

# The contract suite's fixtures: a fresh store on every backend.
from tests.contract.conftest import backend, clock, open_url, store, store_url  # noqa: F401

# ---------------------------------------------------------------------- the committer alone


class Ledger:
    """A pretend database: a batch either commits whole or raises, rolled back, like a transaction."""

    def __init__(self, *, hold: threading.Event | None = None) -> None:
        self.committed: list[int] = []
        self.transactions: list[list[int]] = []
        self.hold = hold  # the first transaction waits for it: later writers queue meanwhile
        self.lock = threading.Lock()

    def write_all(self, items: Sequence[int]) -> list[int]:
        if self.hold is not None:
            hold, self.hold = self.hold, None
            assert hold.wait(30)
        if any(item < 0 for item in items):
            raise ValueError(f"bad item among {list(items)}")
        with self.lock:
            self.transactions.append(list(items))
            self.committed.extend(items)
        return [item * 10 for item in items]

    def write_one(self, item: int) -> int:
        return self.write_all([item])[0]


def run_threads(count: int, target: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=target, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()


def queue_behind_leader(
    commit: GroupCommit[int, int], ledger: Ledger, items: Sequence[int]
) -> dict[int, object]:
    """Item 0 leads and is held inside its transaction while ``items`` arrive; then it is released.
    What each item's caller got: its result or its exception."""
    hold = threading.Event()
    ledger.hold = hold
    answers: dict[int, object] = {}

    def call(item: int) -> None:
        try:
            answers[item] = commit(item)
        except Exception as exc:
            answers[item] = exc

    leader = threading.Thread(target=call, args=(0,))
    leader.start()
    while ledger.hold is not None:  # the leader is inside write_all
        threading.Event().wait(0.001)
    followers = [threading.Thread(target=call, args=(item,)) for item in items]
    for thread in followers:
        thread.start()
    while True:  # every follower is queued behind the leader
        with commit._lock:
            if len(commit._queue) == len(items):
                break
        threading.Event().wait(0.001)
    hold.set()
    for thread in [leader, *followers]:
        thread.join(30)
        assert not thread.is_alive()
    return answers


def test_writers_queued_behind_a_transaction_share_the_next_one() -> None:
    ledger = Ledger()
    commit = GroupCommit(ledger.write_all, ledger.write_one)
    answers = queue_behind_leader(commit, ledger, range(1, 21))
    assert answers == {item: item * 10 for item in range(21)}
    assert ledger.transactions[0] == [0]
    assert sorted(ledger.transactions[1]) == list(range(1, 21))  # one commit for all twenty
    assert (commit.batches, commit.items) == (2, 21)


def test_a_bad_write_fails_only_its_own_caller() -> None:
    ledger = Ledger()
    commit = GroupCommit(ledger.write_all, ledger.write_one)
    answers = queue_behind_leader(commit, ledger, [1, 2, -3, 4, 5])
    assert isinstance(answers[-3], ValueError)
    assert {item: answer for item, answer in answers.items() if item != -3} == {
        0: 0,
        1: 10,
        2: 20,
        4: 40,
        5: 50,
    }
    assert sorted(ledger.committed) == [0, 1, 2, 4, 5]  # the shared attempt rolled back, then one by one


def test_batches_are_capped_and_every_writer_is_answered() -> None:
    ledger = Ledger()
    commit = GroupCommit(ledger.write_all, ledger.write_one, max_batch=4)
    answers = queue_behind_leader(commit, ledger, range(1, 11))
    assert answers == {item: item * 10 for item in range(11)}
    assert max(len(batch) for batch in ledger.transactions) == 4
    assert sorted(ledger.committed) == list(range(11))


def test_a_lone_writer_commits_alone() -> None:
    ledger = Ledger()
    commit = GroupCommit(ledger.write_all, ledger.write_one)
    assert [commit(item) for item in range(3)] == [0, 10, 20]
    assert ledger.transactions == [[0], [1], [2]]


def test_an_interrupted_leader_still_answers_its_followers() -> None:
    calls: list[Sequence[int]] = []
    hold = threading.Event()

    def write_all(items: Sequence[int]) -> list[int]:
        calls.append(list(items))
        if len(calls) == 1:
            assert hold.wait(30)
            raise KeyboardInterrupt  # not an Exception: no one-by-one retry, and it reaches the leader
        return list(items)

    commit = GroupCommit(write_all, lambda item: write_all([item])[0])
    got: dict[str, object] = {}

    def leader() -> None:
        try:
            commit(0)
        except KeyboardInterrupt:
            got["leader"] = "interrupted"

    def follower() -> None:
        got["follower"] = commit(7)

    first = threading.Thread(target=leader)
    first.start()
    while not calls:
        threading.Event().wait(0.001)
    second = threading.Thread(target=follower)
    second.start()
    while not commit._queue:
        threading.Event().wait(0.001)
    hold.set()
    for thread in (first, second):
        thread.join(30)
        assert not thread.is_alive()
    assert got == {"leader": "interrupted", "follower": 7}  # the follower led the next batch


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        GroupCommit(lambda items: list(items), lambda item: item, max_batch=0)


# ---------------------------------------------------------------------- the stores


def decision() -> Decision:
    return Decision(reflect=False, reason="test")


def test_concurrent_records_are_each_durable_and_readable_on_return(store: Store) -> None:
    threads, each = 16, 12
    seen: dict[int, list[str]] = {}

    def record(n: int) -> None:
        mine = []
        for step in range(each):
            episode = Episode(task=f"task {n}.{step}", status="failure", namespace="ns")
            store.record_episode(episode, decision(), None)
            stored, _ = store.get_episode(episode.id, namespace="ns")  # readable at once
            assert stored.task == episode.task
            mine.append(episode.id)
        seen[n] = mine

    run_threads(threads, record)
    recorded = {episode.id for episode, _ in store.recent_episodes("ns", limit=10_000)}
    assert recorded == {episode_id for ids in seen.values() for episode_id in ids}
    assert len(recorded) == threads * each


def test_a_record_refused_among_concurrent_ones_fails_only_its_caller(
    store: Store,
    open_url: Callable[[str], Store],
    store_url: str,
) -> None:
    taken = Episode(task="held by another namespace", status="failure", namespace="other")
    store.record_episode(taken, decision(), None)
    errors: dict[int, Exception] = {}
    good: dict[int, str] = {}

    def record(n: int) -> None:
        if n % 5 == 0:  # reuses an id another namespace holds: InputError, for this caller only
            episode = taken.model_copy(update={"namespace": "ns", "task": f"clash {n}"})
        else:
            episode = Episode(task=f"fine {n}", status="failure", namespace="ns")
        try:
            store.record_episode(episode, decision(), None)
            good[n] = episode.id
        except Exception as exc:
            errors[n] = exc

    run_threads(20, record)
    assert sorted(errors) == [0, 5, 10, 15]
    assert all(isinstance(exc, InputError) for exc in errors.values())
    recorded = {episode.id for episode, _ in open_url(store_url).recent_episodes("ns", limit=100)}
    assert recorded == set(good.values()) and len(recorded) == 16


def in_one_batch(
    committer: GroupCommit[Any, Any], calls: Sequence[Callable[[], object]]
) -> tuple[dict[int, object], int]:
    """Run ``calls[0]`` held inside its transaction until every other call has queued behind it, so
    those share the next batch; each call's answer (its result or its error), and how many batches
    the committer led for them."""
    hold, inside = threading.Event(), threading.Event()
    write_one = committer._write_one

    def held(item: object) -> object:
        if not inside.is_set():
            inside.set()
            assert hold.wait(30)
        return write_one(item)

    committer._write_one = held  # type: ignore[method-assign]
    answers: dict[int, object] = {}

    def call(n: int) -> None:
        try:
            answers[n] = calls[n]()
        except Exception as exc:
            answers[n] = exc

    first = threading.Thread(target=call, args=(0,))
    first.start()
    assert inside.wait(30)
    others = [threading.Thread(target=call, args=(n,)) for n in range(1, len(calls))]
    for thread in others:
        thread.start()
    while True:
        with committer._lock:
            if len(committer._queue) == len(others):
                break
        threading.Event().wait(0.001)
    batches, items = committer.batches, committer.items
    hold.set()
    for thread in [first, *others]:
        thread.join(30)
    committer._write_one = write_one  # type: ignore[method-assign]
    assert committer.items - items == len(calls)
    return answers, committer.batches - batches


def record_in_one_batch(
    store: Store, writes: Sequence[tuple[Episode, Decision, Job | None]]
) -> tuple[dict[int, object], int]:
    committer = store._episodes  # type: ignore[attr-defined]
    return in_one_batch(committer, [lambda w=write: store.record_episode(*w) for write in writes])


def sql_only(backend: str) -> None:
    if backend in ("memory", "redis"):
        pytest.skip("group commit is the SQL stores'")


@pytest.mark.parametrize("clash", [False, True])
def test_records_queued_behind_a_transaction_share_one_and_a_bad_one_fails_alone(
    store: Store, backend: str, clash: bool
) -> None:
    sql_only(backend)
    taken = Episode(task="held by another namespace", status="failure", namespace="other")
    store.record_episode(taken, decision(), None)
    episodes = [Episode(task=f"fine {n}", status="failure", namespace="ns") for n in range(12)]
    if clash:
        episodes[4] = taken.model_copy(update={"namespace": "ns", "task": "clash"})
    answers, batches = record_in_one_batch(store, [(episode, decision(), None) for episode in episodes])
    if clash:
        assert isinstance(answers.pop(4), InputError)
    assert all(isinstance(answer, Decision) for answer in answers.values())
    stored = {episode.id for episode, _ in store.recent_episodes("ns", limit=100)}
    assert stored == {episodes[n].id for n in answers}
    # the held one, then one batch for the eleven queued (with a clash: its shared transaction
    # rolled back and each was written alone)
    assert batches == 2


def test_a_batch_writes_each_job_and_gives_a_repeated_one_the_stored_job(store: Store, backend: str) -> None:
    sql_only(backend)
    reflect = Decision(reflect=True, trigger="failure", reflector="lesson", reason="failed")

    def job_of(episode: Episode, key: str) -> Job:
        return Job(namespace="ns", episode_id=episode.id, dedupe_key=key, payload={"trigger": "failure"})

    earlier = Episode(task="reflected already", status="failure", namespace="ns")
    earlier_job = job_of(earlier, "key-taken")
    store.record_episode(earlier, reflect.model_copy(update={"job_id": earlier_job.id}), earlier_job)
    episodes = [Episode(task=f"new {n}", status="failure", namespace="ns") for n in range(8)]
    jobs = [job_of(episode, "key-taken" if n == 5 else f"key-{n}") for n, episode in enumerate(episodes)]
    writes = [
        (episode, reflect.model_copy(update={"job_id": job.id}), job)
        for episode, job in zip(episodes, jobs, strict=True)
    ]
    answers, batches = record_in_one_batch(store, writes)
    assert batches == 2
    for n, answer in answers.items():
        assert isinstance(answer, Decision)
        if n == 5:  # same dedupe key as a stored job: not reflected again, pointed at that job
            assert (answer.reflect, answer.job_id) == (False, earlier_job.id)
        else:
            assert (answer.reflect, answer.job_id) == (True, jobs[n].id)
    queued = {job.id for job in store.list_jobs("ns", None, 100)}
    assert queued == {earlier_job.id} | {job.id for n, job in enumerate(jobs) if n != 5}
    stored = {
        episode.id: stored_decision for episode, stored_decision in store.recent_episodes("ns", limit=100)
    }
    assert set(stored) == {earlier.id} | {episode.id for episode in episodes}
    for n, episode in enumerate(episodes):
        assert stored[episode.id] == answers[n]  # what each caller got is what was stored


def test_a_batch_repeating_dedupe_keys_decides_as_writing_in_turn(store: Store, backend: str) -> None:
    sql_only(backend)
    reflect = Decision(reflect=True, trigger="failure", reflector="lesson", reason="failed")

    def job_of(episode: Episode, key: str) -> Job:
        return Job(namespace="ns", episode_id=episode.id, dedupe_key=key, payload={"trigger": "failure"})

    earlier = Episode(task="reflected already", status="failure", namespace="ns")
    earlier_job = job_of(earlier, "key-taken")
    store.record_episode(earlier, reflect.model_copy(update={"job_id": earlier_job.id}), earlier_job)
    episodes = [Episode(task=f"new {n}", status="failure", namespace="ns") for n in range(9)]
    # 1 and 3 share a new key (1 comes first, so 3 repeats it); 5, 6 and 7 repeat the stored key
    keys = {1: "key-new", 3: "key-new", 5: "key-taken", 6: "key-taken", 7: "key-taken"}
    jobs = [job_of(episode, keys.get(n, f"key-{n}")) for n, episode in enumerate(episodes)]
    writes: list[tuple[Episode, Decision, Job | None]] = [
        (episode, reflect.model_copy(update={"job_id": job.id}), job)
        for episode, job in zip(episodes, jobs, strict=True)
    ]
    writes[8] = (episodes[8], decision(), None)  # not reflected: no job
    answers, batches = record_in_one_batch(store, writes)
    assert batches == 2
    holder = {3: jobs[1].id, 5: earlier_job.id, 6: earlier_job.id, 7: earlier_job.id}
    for n, answer in answers.items():
        assert isinstance(answer, Decision)
        if n in holder:
            assert (answer.reflect, answer.job_id) == (False, holder[n])
            assert answer.reason.startswith("duplicate")
        elif n == 8:
            assert (answer.reflect, answer.job_id) == (False, None)
        else:
            assert (answer.reflect, answer.job_id) == (True, jobs[n].id)
    queued = {job.id for job in store.list_jobs("ns", None, 100)}
    assert queued == {earlier_job.id} | {jobs[n].id for n in (0, 1, 2, 4)}
    stored = {episode.id: decided for episode, decided in store.recent_episodes("ns", limit=100)}
    for n, episode in enumerate(episodes):
        assert stored[episode.id] == answers[n]  # what each caller got is what was stored


def test_repeats_of_one_episode_in_concurrent_calls_store_it_once(store: Store) -> None:
    episode = Episode(task="sent again by a retrying client", status="failure", namespace="ns")
    answers: list[Decision] = []
    run_threads(10, lambda n: answers.append(store.record_episode(episode, decision(), None)))
    assert len(answers) == 10 and all(answer.reason == "test" for answer in answers)
    assert [e.id for e, _ in store.recent_episodes("ns", limit=100)] == [episode.id]


def test_lessons_added_at_once_share_transactions_and_a_repeat_is_reinforced(
    store: Store, backend: str
) -> None:
    sql_only(backend)
    committer = store._lessons  # type: ignore[attr-defined]
    distinct = [f"When deploy {n} fails, read the rollout log of service {n} first" for n in range(24)]
    same = "Pin the terraform provider version before running plan in CI"
    results: dict[int, WriteResult] = {}

    def add(n: int) -> None:
        text = same if n >= len(distinct) else distinct[n]
        results[n] = store.write_lesson(Lesson(content=text, namespace="ns"))

    before = committer.items
    run_threads(len(distinct) + 8, add)
    assert committer.items - before == len(distinct) + 8
    stored = {lesson.content: lesson for lesson in store.list_lessons(LessonQuery("ns"), limit=100)}
    assert set(stored) == {*distinct, same}
    repeats = [results[n] for n in range(len(distinct), len(distinct) + 8)]
    assert sorted(result.action for result in repeats) == ["added"] + ["reinforced"] * 7
    assert {result.lesson.id for result in repeats} == {stored[same].id}
    assert stored[same].access_count == 7  # each repeat reinforced it once, none was lost


def test_lessons_queued_behind_a_transaction_share_one_and_a_bad_one_fails_alone(
    store: Store, backend: str
) -> None:
    sql_only(backend)
    taken = store.write_lesson(Lesson(content="A lesson another namespace holds", namespace="other")).lesson
    lessons = [
        Lesson(content=f"Check the {n}th migration before deploying", namespace="ns") for n in range(10)
    ]
    lessons[3] = Lesson(id=taken.id, content="Reuses an id held elsewhere", namespace="ns")
    answers, batches = in_one_batch(
        store._lessons,  # type: ignore[attr-defined]
        [lambda lesson=lesson: store.write_lesson(lesson) for lesson in lessons],
    )
    assert batches == 2
    assert isinstance(answers.pop(3), InputError)
    assert all(isinstance(answer, WriteResult) and answer.action == "added" for answer in answers.values())
    stored = {lesson.content for lesson in store.list_lessons(LessonQuery("ns"), limit=100)}
    assert stored == {lessons[n].content for n in answers}


# ---------------------------------------------------------------------- a process killed mid-write

RECORDER = """
import sys, threading
from lessonbank import Episode
from lessonbank.models import Decision
from lessonbank.stores import open_store

store = open_store(sys.argv[1])
lock = threading.Lock()

def run(n):
    step = 0
    while True:
        episode = Episode(task=f"thread {n} step {step}", status="failure", namespace="ns")
        store.record_episode(episode, Decision(reflect=False, reason="crash"), None)
        with lock:  # acknowledged: its caller has returned
            print(episode.id, flush=True)
        step += 1

for n in range(12):
    threading.Thread(target=run, args=(n,), daemon=True).start()
threading.Event().wait()
"""


@pytest.mark.slow
def test_every_record_acknowledged_before_a_kill_survives_it(
    store_url: str,
    backend: str,
    open_url: Callable[[str], Store],
) -> None:
    if backend in ("memory", "redis"):
        pytest.skip("group commit is the SQL stores'; memory does not outlive its process")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(RECORDER), store_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    acknowledged = []
    for line in proc.stdout:  # read until enough were acknowledged, then kill mid-stream
        acknowledged.append(line.strip())
        if len(acknowledged) >= 300:
            break
    proc.send_signal(signal.SIGKILL)
    rest, err = proc.communicate(timeout=60)
    acknowledged += [line for line in rest.split() if line]
    assert proc.returncode == -signal.SIGKILL, err
    stored = {episode.id for episode, _ in open_url(store_url).recent_episodes("ns", limit=1_000_000)}
    assert set(acknowledged) <= stored
    assert len(acknowledged) >= 300


def test_the_committer_keeps_no_thread_of_its_own() -> None:
    before = threading.active_count()
    ledger = Ledger()
    commit = GroupCommit(ledger.write_all, ledger.write_one)
    run_threads(8, lambda n: commit(n))
    assert threading.active_count() == before
    assert sorted(ledger.committed) == list(range(8))


def test_an_async_banks_concurrent_records_are_each_stored(store_url: str, backend: str) -> None:
    """A bank's callers go through the same committer: asyncio tasks recording at once (each in a
    thread of the default executor) all get their episode back, stored."""
    from lessonbank import AsyncLessonBank

    async def main() -> tuple[list[str], set[str]]:
        async with AsyncLessonBank(store_url, worker=False) as bank:
            recorded = await asyncio.gather(
                *(
                    bank.record({"task": f"async task {n}", "status": "failure", "error": "boom"})
                    for n in range(40)
                )
            )
            rows = await bank.decisions(limit=100)
        return [episode.id for episode in recorded], {row["episode_id"] for row in rows}

    ids, stored = asyncio.run(main())
    assert len(set(ids)) == 40 and set(ids) == stored
