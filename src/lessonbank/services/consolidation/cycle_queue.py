"""The consolidation cycle as a durable job: at most one cycle per namespace at a time.

A cycle runs as a ``consolidate`` job on the bank's queue, with leases, retries and dead letters as
for any job (:mod:`lessonbank.jobs` says which failures a cycle retries). The handler runs
``Consolidator.run`` in a thread and finishes the job with a detail naming the dream run, its
outcome and its proposal.

Identity: jobs are unique per (namespace, dedupe key) forever, so the key carries a generation: a
namespace's n-th cycle job has the key ``consolidate:<n>`` and an id derived from the namespace and
n. Asking for a cycle probes the generations from the last one seen (``cycle_job`` in the cycle
state, a hint only): a job that is queued, leased or waiting is the answer (so a second request
while a cycle is queued or running gets that job); one that finished (done or dead), or is gone,
sends the probe to the next generation, where the new job is inserted. Two requesters racing for a
new generation insert the same id and key: the store keeps one job and both get it.

Guards (:mod:`.triggers`): a daily cap refuses every cycle (a manual one with
:class:`~lessonbank.errors.BudgetExceededError`); the circuit breaker refuses unattended ones.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from functools import partial
from typing import Any

from lessonbank.errors import (
    BudgetExceededError,
    ConfigError,
    CycleFailedError,
    InputError,
    NotFoundError,
    StoreError,
)
from lessonbank.jobs import JobResult, Worker, WorkerThread, offload
from lessonbank.models import Job, JobKind
from lessonbank.proposals import CYCLE_TRIGGERS, CycleTrigger, DreamRun, Proposal
from lessonbank.services.consolidation.cycle import Consolidator
from lessonbank.services.consolidation.triggers import UNATTENDED, Breaker, DailyCap, breaker, daily_cap
from lessonbank.services.scope import Scope, check_text_arg

log = logging.getLogger("lessonbank.consolidation")

GENERATION = "cycle_job"  # cycle-state key: the generation of the namespace's latest cycle job
KIND: JobKind = "consolidate"
ACTIVE = ("queued", "leased", "waiting")
FINISHED = ("done", "dead")
WAIT_POLL_S = 0.02
# The detail a finished cycle job carries; wait() reads the proposal back from it.
_PROPOSAL = re.compile(r"\bproposal (prp_\S+)")


def check_wait(wait: object) -> None:
    if not isinstance(wait, bool):
        raise InputError(f"wait must be true or false, got {wait!r}", field="wait")


def cycle_job_id(namespace: str, generation: int) -> str:
    """The id of ``namespace``'s cycle job of ``generation``: the same for every requester."""
    digest = hashlib.sha256(f"{namespace}\0{generation}".encode()).hexdigest()[:24]
    return f"job_cycle_{digest}"


def cycle_detail(run: DreamRun) -> str:
    """A finished cycle job's detail: its outcome, dream run and proposal (if it made one)."""
    made = f", proposal {run.proposal_id}" if run.proposal_id else ""
    return f"{run.outcome}: dream run {run.id}{made}"


class CycleQueue:
    """Asks for cycles (deduplicated per namespace), runs them as jobs, and waits for them."""

    def __init__(self, scope: Scope, consolidator: Consolidator) -> None:
        self.scope = scope
        self.consolidator = consolidator

    # ------------------------------------------------------------------ asking

    def request(
        self,
        trigger: CycleTrigger,
        *,
        namespace: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> Job | None:
        """The namespace's queued or running cycle job, else a new one for ``trigger``; None when a
        guard refused an unattended cycle (the dream log says why). A manual cycle refused by a
        daily cap raises BudgetExceededError."""
        if trigger not in CYCLE_TRIGGERS:
            raise InputError(f"unknown trigger {trigger!r}; use one of {', '.join(CYCLE_TRIGGERS)}")
        ns = namespace or self.scope.namespace
        store = self.scope.store
        generation = int(store.cycle_state(ns).get(GENERATION, 0))
        while True:
            current = self._job_of(ns, generation)
            if current is None:
                if self._refused(ns, trigger):
                    return None
                current = self._insert(ns, generation, trigger, payload or {})
            if current.status in ACTIVE:
                self._remember(ns, generation)
                return current
            generation += 1  # that cycle finished: the next request is the next generation's

    def manual(self) -> Job:
        """The bank namespace's cycle job asked for by a person (BudgetExceededError over a daily cap)."""
        job = self.request("manual")
        assert job is not None  # only a daily cap refuses a manual cycle, and it raises
        return job

    def end_session(self, *, agent: str | None, session_id: str | None) -> Job | None:
        """A session ended: its cycle job (or the one already queued), None when a guard refused it."""
        for value, name in ((agent, "agent"), (session_id, "session_id")):
            if value is not None:
                check_text_arg(value, name)
        payload = {key: value for key, value in (("agent", agent), ("session_id", session_id)) if value}
        return self.request("session_end", payload=payload)

    def _job_of(self, namespace: str, generation: int) -> Job | None:
        try:
            return self.scope.store.get_job(cycle_job_id(namespace, generation), namespace=namespace)
        except NotFoundError:
            return None

    def _insert(self, namespace: str, generation: int, trigger: CycleTrigger, extra: dict[str, Any]) -> Job:
        now = self.scope.now()
        job = Job(
            id=cycle_job_id(namespace, generation),
            namespace=namespace,
            kind=KIND,
            dedupe_key=f"{KIND}:{generation}",
            max_attempts=self.scope.settings.job_max_attempts,
            payload={**extra, "trigger": trigger},
            run_after=now,
            created_at=now,
            updated_at=now,
        )
        try:
            self.scope.store.enqueue_job(job)
        except StoreError:
            # Another requester inserted this generation first (the store keeps one): it is ours
            # too. Anything else is a real failure, and reading the job back says so.
            stored = self._job_of(namespace, generation)
            if stored is None:
                raise
            return stored
        log.info("namespace %s: %s cycle queued as job %s", namespace, trigger, job.id)
        return job

    def _remember(self, namespace: str, generation: int) -> None:
        store = self.scope.store
        state = store.cycle_state(namespace)
        if int(state.get(GENERATION, 0)) < generation:
            state[GENERATION] = generation
            store.set_cycle_state(namespace, state)

    # ------------------------------------------------------------------ guards

    def cap(self, namespace: str | None = None) -> DailyCap | None:
        ns = namespace or self.scope.namespace
        return daily_cap(self.scope.store, ns, self.scope.settings, self.scope.now())

    def breaker(self, namespace: str | None = None) -> Breaker:
        return breaker(self.scope.store, namespace or self.scope.namespace, self.scope.settings)

    def _refused(self, namespace: str, trigger: CycleTrigger) -> bool:
        """Whether a guard refuses a new ``trigger`` cycle now (noted in the dream log; a manual cycle
        over a daily cap raises)."""
        cap = self.cap(namespace)
        if cap is not None:
            self._note_cap(namespace, trigger, cap)
            return True
        if trigger not in UNATTENDED:
            return False
        state = self.scope.store.cycle_state(namespace)
        stop = self.breaker(namespace)
        if not stop.open:
            if state.pop("breaker_noted", None) is not None:  # closed again: a new stop is noted again
                self.scope.store.set_cycle_state(namespace, state)
            return False
        if not state.get("breaker_noted"):
            run = self._skip(namespace, trigger, stop.reason())
            state["breaker_noted"] = run.id
            self.scope.store.set_cycle_state(namespace, state)
            log.warning("namespace %s: %s", namespace, stop.reason())
        return True

    def _note_cap(self, namespace: str, trigger: CycleTrigger, cap: DailyCap) -> None:
        """A cap noted in the dream log: at each manual call (which raises), once a day otherwise."""
        if trigger == "manual":
            self._skip(namespace, trigger, cap.reason)
            raise BudgetExceededError(cap.reason, budget=cap.budget, needed=cap.used)
        store = self.scope.store
        state, today = store.cycle_state(namespace), self.scope.now().strftime("%Y-%m-%d")
        if state.get("capped_on") != today:
            self._skip(namespace, trigger, cap.reason)
            state["capped_on"] = today
            store.set_cycle_state(namespace, state)
            log.warning("namespace %s: %s", namespace, cap.reason)

    def _skip(self, namespace: str, trigger: CycleTrigger, reason: str) -> DreamRun:
        run = DreamRun(
            namespace=namespace,
            trigger=trigger,
            started_at=self.scope.now(),
            outcome="skipped",
            summary=reason,
        )
        self.scope.store.save_dream(run)
        return run

    # ------------------------------------------------------------------ running

    async def handle(self, job: Job) -> JobResult:
        """The worker's handler of ``consolidate`` jobs: one cycle of the job's namespace."""
        trigger = job.payload.get("trigger", "manual")
        if trigger not in CYCLE_TRIGGERS:
            raise InputError(f"cycle job {job.id} has an unknown trigger {trigger!r}")
        cap = await offload(self.cap, job.namespace)
        if cap is not None:  # today's earlier cycles reached a cap since this one was queued
            run = await offload(self._skip, job.namespace, trigger, cap.reason)
            return JobResult(reflection=None, detail=f"skipped: dream run {run.id}: {cap.reason}")
        consolidator = self.consolidator.for_namespace(job.namespace)
        # The worker gives up on the job at job_timeout_s but cannot stop this thread: the cycle stops
        # itself a second before, between phases, so a timed-out job never writes a late proposal.
        deadline = time.monotonic() + max(1.0, self.scope.settings.job_timeout_s - 1.0)
        run, _ = await offload(partial(consolidator.run, trigger=trigger, deadline=deadline))
        return JobResult(reflection=None, detail=cycle_detail(run))

    # ------------------------------------------------------------------ waiting

    def wait(self, job: Job, *, worker: Worker | None = None) -> Proposal | None:
        """Wait until ``job`` finishes and return its proposal (None: nothing to propose).

        With ``worker`` (a bank with no worker of its own), that worker runs the namespace's jobs in
        this process meanwhile, on its own thread; another worker may still take the job first (the
        lease decides). Raises what stopped the cycle: :class:`CycleFailedError` (dead-lettered),
        ConfigError (it waits for a setup change), BudgetExceededError (a daily cap skipped it)."""
        helper = WorkerThread(worker) if worker is not None else None
        try:
            while True:
                current = self.scope.store.get_job(job.id, namespace=job.namespace)
                if current.status in FINISHED or current.status == "waiting":
                    return self.outcome(current)
                time.sleep(WAIT_POLL_S)
        finally:
            if helper is not None:
                helper.stop()

    def outcome(self, job: Job) -> Proposal | None:
        """The proposal a finished cycle job made, or the error that stopped it."""
        if job.status == "dead":
            raise CycleFailedError(
                f"consolidation cycle {job.id} failed: {job.last_error}; "
                "see `lessonbank dreams` and `lessonbank jobs failed`",
                record_id=job.id,
            )
        if job.status == "waiting":
            raise ConfigError(f"consolidation cycle {job.id} cannot run here: {job.detail}")
        detail = job.detail or ""
        if detail.startswith("skipped"):
            cap = self.cap(job.namespace)
            raise BudgetExceededError(
                detail.split(": ", 2)[-1],
                budget=cap.budget if cap else 0.0,
                needed=cap.used if cap else 0.0,
            )
        found = _PROPOSAL.search(detail)
        if found is None:
            return None
        return self.scope.store.get_proposal(found.group(1), namespace=job.namespace)
