"""The job queue's state transitions, decided once here; every queue applies them.

A job moves ``queued → leased → done``; a failure sends it back to ``queued`` (with a later
``run_after``) or to ``dead``; a lease lost on the last attempt dead-letters it; a worker that
stops gives its job back (``queued``) and one whose setup is missing something parks it
(``waiting``, with a detail), neither spending an attempt; waiting jobs are released to
``queued`` when a worker starts; an operator requeues ``dead`` and ``waiting`` jobs with a fresh
attempt budget.

Each transition is a function returning the fields it sets (:data:`Changes`: a Job field → its
new value, times as Unix seconds) and, for the Python queues (Redis, memory), one returning the
new :class:`~lessonbank.models.Job`. The SQL queue (``stores/sql/queue.py``) keeps each transition
in one SQL statement, for its atomicity, and builds the ``SET`` list of that statement from the
same changes, so the two forms cannot drift:

=====================================  ==========================================================
function                               SQL statement in ``SQLJobQueue``
=====================================  ==========================================================
:func:`runnable`, :func:`leasing`      ``lease_job``: ``UPDATE … WHERE id = (SELECT … runnable …)``;
                                       ``attempts = attempts + 1`` stays an SQL expression
:func:`spent`, :func:`burying`         ``lease_job``: the second ``UPDATE`` (lease lost on the last
                                       attempt)
:func:`expiring`                       ``_expire_dead_local_leases``
:func:`finishing`                      ``mark_done`` (in the transaction that writes the result)
:func:`failing`                        ``fail_job``
:func:`giving_back`                    ``_give_back`` (release and park); ``attempts`` floored at
                                       0 stays an SQL expression
:func:`unparking`                      ``release_waiting``
:func:`retrying`, :data:`RETRYABLE`    ``retry_jobs``
=====================================  ==========================================================

Everything here is pure: no I/O, the clock value is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from lessonbank.models import Job, JobStatus, from_timestamp

QUEUED: JobStatus = "queued"
WAITING: JobStatus = "waiting"
LEASED: JobStatus = "leased"
DONE: JobStatus = "done"
DEAD: JobStatus = "dead"
STATUSES: tuple[JobStatus, ...] = (QUEUED, WAITING, LEASED, DONE, DEAD)
RETRYABLE: tuple[JobStatus, ...] = (DEAD, WAITING)  # what an operator's retry requeues

# Timestamps pass through datetime, which rounds to the microsecond (sometimes upwards): a job
# stamped "now" must be due "now" even under a frozen test clock, so due-ness allows this slack.
DUE_SLACK_S = 0.001
EXPIRED_AT = 0.0  # the lease expiry given to a lease whose holder is known to be gone
RETRY_DETAIL = "requeued by retry"

# A Job field → its new value; times (TIMES) as Unix seconds, as the SQL queue stores them.
Changes = dict[str, Any]
TIMES = frozenset({"run_after", "lease_expires_at", "updated_at", "finished_at"})


def apply(job: Job, changes: Mapping[str, Any]) -> Job:
    """``job`` with ``changes`` set (times turned into datetimes)."""
    update = {key: from_timestamp(value) if key in TIMES else value for key, value in changes.items()}
    return job.model_copy(update=update)


# ----------------------------------------------------------------- what is runnable


def due(job: Job, now: float) -> bool:
    """Whether the job's ``run_after`` has come (within :data:`DUE_SLACK_S`)."""
    return job.run_after.timestamp() <= now + DUE_SLACK_S


def lease_expired(job: Job, now: float) -> bool:
    """Whether ``job`` is leased and its lease has expired: another worker may take it over."""
    return (
        job.status == LEASED and job.lease_expires_at is not None and job.lease_expires_at.timestamp() <= now
    )


def runnable(job: Job, now: float) -> bool:
    """Whether a worker may lease ``job`` now: queued and due, or leased with an expired lease."""
    return (job.status == QUEUED and due(job, now)) or lease_expired(job, now)


# ----------------------------------------------------------------- leasing


@dataclass(frozen=True)
class Taken:
    """What leasing a runnable job did: ``leased`` it, or dead-lettered it (``dead``: the attempt
    it would have been was past its budget, so the previous holder lost it on its last one)."""

    action: Literal["leased", "dead"]
    job: Job


def leasing(owner: str, now: float, lease_s: float) -> Changes:
    """A lease to ``owner`` for ``lease_s`` seconds; it also spends one attempt (``attempts + 1``)."""
    return {
        "status": LEASED,
        "lease_owner": owner,
        "lease_expires_at": now + lease_s,
        "updated_at": now,
        "detail": None,
    }


def leased(job: Job, owner: str, now: float, lease_s: float) -> Job:
    return apply(job, {**leasing(owner, now, lease_s), "attempts": job.attempts + 1})


def spent(job: Job) -> bool:
    """Whether the just leased ``job`` is past its attempt budget (it must be dead-lettered)."""
    return job.attempts > job.max_attempts


def lost_error(last_error: str | None) -> str:
    return f"a worker lost the job on its last attempt (lease expired; last error: {last_error})"


def burying(job: Job, now: float) -> Changes:
    """Dead-lettering the just leased ``job`` whose attempts are :func:`spent`."""
    return {
        "status": DEAD,
        "finished_at": now,
        "updated_at": now,
        "lease_owner": None,
        "lease_expires_at": None,
        "last_error": lost_error(job.last_error),
    }


def take(job: Job, owner: str, now: float, lease_s: float) -> Taken:
    """Lease the runnable ``job`` to ``owner``, or dead-letter it when the attempt is past its budget."""
    taken = leased(job, owner, now, lease_s)
    if spent(taken):
        return Taken("dead", apply(taken, burying(taken, now)))
    return Taken("leased", taken)


def expiring() -> Changes:
    """The lease of a holder known to be gone (a dead process of this host) expires at once."""
    return {"lease_expires_at": EXPIRED_AT}


# ----------------------------------------------------------------- moving a leased job on


def _unleased(now: float) -> Changes:
    return {"updated_at": now, "lease_owner": None, "lease_expires_at": None}


def finishing(now: float, detail: str) -> Changes:
    """The leased job is done (its result is written in the same transaction)."""
    return {"status": DONE, "finished_at": now, "detail": detail, **_unleased(now)}


def done(job: Job, now: float, detail: str) -> Job:
    return apply(job, finishing(now, detail))


def failing(now: float, error: str, retry_at: float | None) -> Changes:
    """The leased job failed with ``error``: queued again at ``retry_at``, or dead when None (the
    worker decides, from the attempts left and the kind of error)."""
    changes: Changes = {"last_error": error, **_unleased(now)}
    if retry_at is None:
        changes.update(status=DEAD, finished_at=now)
    else:
        changes.update(status=QUEUED, run_after=retry_at)
    return changes


def failed(job: Job, now: float, error: str, retry_at: float | None) -> Job:
    return apply(job, failing(now, error, retry_at))


def giving_back(now: float, status: JobStatus, detail: str | None) -> Changes:
    """The leased job goes back as ``status`` (queued: released; waiting: parked) with ``detail``
    when given (else its detail is kept); the attempt it spent is refunded (never below 0)."""
    changes: Changes = {"status": status, **_unleased(now)}
    if detail is not None:
        changes["detail"] = detail
    return changes


def given_back(job: Job, now: float, status: JobStatus, detail: str | None) -> Job:
    return apply(job, {**giving_back(now, status, detail), "attempts": max(0, job.attempts - 1)})


def released(job: Job, now: float) -> Job:
    """Given back untouched (the worker stopped, the job did not fail): no attempt spent."""
    return given_back(job, now, QUEUED, None)


def parked(job: Job, now: float, detail: str) -> Job:
    """Set aside as ``waiting`` (its setup is missing something): no attempt spent."""
    return given_back(job, now, WAITING, detail)


# ----------------------------------------------------------------- waiting and admin retry


def unparking(now: float) -> Changes:
    """A waiting job is queued again (a worker started: the setup may be fixed); its detail cleared."""
    return {"status": QUEUED, "detail": None, "updated_at": now}


def unparked(job: Job, now: float) -> Job:
    return apply(job, unparking(now))


def can_retry(job: Job) -> bool:
    return job.status in RETRYABLE


def retrying(now: float) -> Changes:
    """An operator requeues a dead or waiting job: due now, with a fresh attempt budget."""
    return {
        "status": QUEUED,
        "attempts": 0,
        "run_after": now,
        "updated_at": now,
        "finished_at": None,
        "detail": RETRY_DETAIL,
    }


def retried(job: Job, now: float) -> Job:
    return apply(job, retrying(now))
