"""When a consolidation cycle runs by itself, and when none may start (seed 002's triggers, seed 000's
dream mode).

Triggers: ``manual`` (``bank.consolidate()``, ``lessonbank consolidate``), ``session_end``
(``bank.end_session()``), and three automatic ones that ``lessonbank worker`` checks every
:data:`TICK_S` for each namespace it serves (the in-process worker of a bank checks none):

- ``schedule``: a cron expression (``LESSONBANK_CONSOLIDATION_SCHEDULE``, in the worker's local time,
  as cron reads it); one cycle per due time, and due times missed while no worker ran make one cycle;
- ``threshold``: N episodes recorded in the namespace since the last cycle started
  (``LESSONBANK_CONSOLIDATION_THRESHOLD``; 0 turns it off);
- ``inactivity`` (dream mode): no episode recorded for H hours (``LESSONBANK_CONSOLIDATION_INACTIVITY_H``;
  0 turns it off), then one cycle; the next needs a new episode and a new idle stretch.

A cycle records no episode, and its completion moves only ``last_reflection`` (where the threshold
counts from): a cycle never triggers another.

Guards, read from the dream log before a cycle starts:

- **daily caps**: once the namespace's cycles of the current UTC day used
  ``consolidation_daily_tokens`` (in + out; 0 turns it off) or ``consolidation_daily_cost_usd``, no
  cycle starts that day: a ``skipped`` dream row says why (once a day for unattended triggers, at each
  refused manual call, which also gets a :class:`~lessonbank.errors.BudgetExceededError`);
- **circuit breaker**: after ``consolidation_breaker`` failed or empty unattended cycles in a row
  (0 turns it off), unattended triggers stop asking for cycles in that namespace; the stop is one
  ``skipped`` dream row saying how to reset it, and shows in ``bank.stats()``. A manual cycle that
  proposes something resets it.

The keys this module keeps in the namespace's cycle state: ``schedule_from`` (the schedule is due
after it), ``dreamt_after`` (the newest episode when dream mode last asked for a cycle),
``capped_on`` (the UTC day a cap was last noted) and ``breaker_noted`` (the dream row of the stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from cronsim import CronSim, CronSimError

from lessonbank.errors import ConfigError, StoreError
from lessonbank.models import Job
from lessonbank.ports import Store
from lessonbank.proposals import CycleTrigger
from lessonbank.settings import Settings

if TYPE_CHECKING:
    from lessonbank.services.consolidation.cycle_queue import CycleQueue

log = logging.getLogger("lessonbank.consolidation")

TICK_S = 30.0  # how often `lessonbank worker` checks the automatic triggers
AUTOMATIC: tuple[CycleTrigger, ...] = ("schedule", "threshold", "inactivity")
# Triggers no person pulled at that moment: the breaker counts their cycles and stops them.
UNATTENDED: tuple[CycleTrigger, ...] = (*AUTOMATIC, "session_end")
# How far back the guards read the dream log (skipped rows included).
DAY_ROWS = 1_000
BREAKER_ROWS = 200


def _parse(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


# ----------------------------------------------------------------- guards


@dataclass(frozen=True)
class DailyCap:
    """A daily cap the namespace's cycles of today reached: ``budget`` and what was ``used``."""

    reason: str
    budget: float
    used: float


def spent_today(store: Store, namespace: str, now: datetime) -> tuple[int, float]:
    """Tokens (in + out) and dollars the namespace's cycles started this UTC day used."""
    start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    tokens, cost = 0, 0.0
    for run in store.dreams(namespace, limit=DAY_ROWS):  # newest first
        if run.started_at < start:
            break
        tokens += run.tokens_in + run.tokens_out
        cost += run.cost_usd or 0.0
    return tokens, round(cost, 6)


def daily_cap(store: Store, namespace: str, settings: Settings, now: datetime) -> DailyCap | None:
    """The daily cap today's cycles reached, if any (nothing used reaches no cap)."""
    tokens, cost = spent_today(store, namespace, now)
    limit = settings.consolidation_daily_tokens
    if limit and tokens >= limit:
        return DailyCap(
            f"daily token cap reached: today's cycles (UTC) used {tokens:,} of "
            f"{limit:,} tokens; no cycle starts before tomorrow unless "
            "LESSONBANK_CONSOLIDATION_DAILY_TOKENS is raised",
            limit,
            tokens,
        )
    dollars = settings.consolidation_daily_cost_usd
    if dollars is not None and cost > 0 and cost >= dollars:
        return DailyCap(
            f"daily cost cap reached: today's cycles (UTC) cost ${cost:.4f} of ${dollars:.4f}; "
            "no cycle starts before tomorrow unless LESSONBANK_CONSOLIDATION_DAILY_COST_USD is raised",
            dollars,
            cost,
        )
    return None


@dataclass(frozen=True)
class Breaker:
    """The circuit breaker of a namespace: ``failures`` failed or empty unattended cycles in a row
    (newest first, up to ``limit``); ``open`` stops unattended triggers. ``limit`` 0: off."""

    open: bool
    failures: int
    limit: int

    def reason(self) -> str:
        return (
            f"automatic cycles stopped: the last {self.failures} unattended cycles failed or proposed "
            "nothing (see `lessonbank dreams`). A manual cycle that proposes something resets this: "
            "`lessonbank consolidate --wait` or bank.consolidate(); or raise "
            "LESSONBANK_CONSOLIDATION_BREAKER (0 turns the breaker off)"
        )

    @property
    def state(self) -> str:
        return "off" if self.limit <= 0 else ("open" if self.open else "closed")


def breaker(store: Store, namespace: str, settings: Settings) -> Breaker:
    """The breaker as the dream log has it: a proposing cycle (of any trigger) ends the streak;
    skipped rows and manual cycles that proposed nothing neither count nor reset it."""
    limit = settings.consolidation_breaker
    if limit <= 0:
        return Breaker(False, 0, 0)
    failures = 0
    for run in store.dreams(namespace, limit=BREAKER_ROWS):
        if run.outcome == "proposed":
            break
        if run.outcome == "skipped" or run.trigger not in UNATTENDED:
            continue
        failures += 1
        if failures >= limit:
            break
    return Breaker(failures >= limit, failures, limit)


def guard_status(store: Store, namespace: str, settings: Settings, now: datetime) -> dict[str, Any]:
    """The guards of ``namespace`` as ``bank.stats()["consolidation"]`` shows them."""
    stop = breaker(store, namespace, settings)
    tokens, cost = spent_today(store, namespace, now)
    cap = daily_cap(store, namespace, settings, now)
    return {
        "breaker": stop.state,
        "failed_or_empty_in_a_row": stop.failures,
        "breaker_limit": stop.limit,
        **({"breaker_reason": stop.reason()} if stop.open else {}),
        "tokens_today": tokens,
        "cost_usd_today": cost,
        "daily_cap": cap.reason if cap is not None else None,
    }


# ----------------------------------------------------------------- the automatic triggers


def check_schedule(expression: str) -> str:
    """``expression`` if cron can read it, else ConfigError saying what to set."""
    try:
        CronSim(expression, datetime.now().astimezone())
    except CronSimError as exc:
        raise ConfigError(
            f"LESSONBANK_CONSOLIDATION_SCHEDULE {expression!r} is not a cron expression ({exc}); "
            "use five fields, e.g. '0 3 * * *' for 03:00 every day"
        ) from None
    return expression


def next_due(expression: str, after: datetime) -> datetime:
    """The first time of the cron ``expression`` after ``after``, read in the local time zone."""
    return next(CronSim(expression, after.astimezone()))


@dataclass
class Due:
    """What the automatic triggers say for one namespace now: the triggers that fire (the first one
    names the cycle) and the cycle-state keys to set once the cycle was asked for."""

    triggers: list[CycleTrigger]
    marks: dict[str, Any]


def due_triggers(store: Store, namespace: str, settings: Settings, now: datetime) -> Due:
    """The automatic triggers of ``namespace`` at ``now`` (nothing is written)."""
    state = store.cycle_state(namespace)
    due = Due([], {})
    if settings.consolidation_schedule:
        since = _parse(state.get("schedule_from"))
        if since is None:  # the first look: the schedule counts from now, no catching up on the past
            due.marks["schedule_from"] = now.isoformat()
        elif next_due(settings.consolidation_schedule, since) <= now:
            due.triggers.append("schedule")
            due.marks["schedule_from"] = now.isoformat()
    threshold = settings.consolidation_threshold
    if threshold > 0:
        last = _parse(state.get("last_reflection"))
        since_ts = last.timestamp() if last is not None else 0.0
        if len(store.recent_episodes(namespace, since=since_ts, limit=threshold)) >= threshold:
            due.triggers.append("threshold")
    hours = settings.consolidation_inactivity_h
    if hours > 0:
        newest = store.recent_episodes(namespace, limit=1)
        if newest:
            episode = newest[0][0]
            idle = now - episode.created_at
            if idle >= timedelta(hours=hours) and state.get("dreamt_after") != episode.id:
                due.triggers.append("inactivity")
                due.marks["dreamt_after"] = episode.id
    return due


def describe(settings: Settings) -> str:
    """Which automatic triggers are on, for the worker to say when it starts."""
    on = []
    if settings.consolidation_schedule:
        on.append(f"schedule {settings.consolidation_schedule!r} (local time)")
    if settings.consolidation_threshold > 0:
        on.append(f"threshold {settings.consolidation_threshold} new episodes")
    if settings.consolidation_inactivity_h > 0:
        on.append(f"inactivity {settings.consolidation_inactivity_h:g} h (dream mode)")
    return "automatic cycles: " + (", ".join(on) if on else "off")


class Scheduler:
    """Checks the automatic triggers of the namespaces a worker serves and asks for their cycles
    (``namespaces=None``: every namespace in the store). Run by ``lessonbank worker`` only."""

    def __init__(self, cycles: CycleQueue, *, namespaces: Sequence[str] | None = None) -> None:
        self.cycles = cycles
        self.scope = cycles.scope
        self.namespaces = list(namespaces) if namespaces is not None else None
        if self.scope.settings.consolidation_schedule:
            check_schedule(self.scope.settings.consolidation_schedule)

    def tick(self) -> list[Job]:
        """One look at every namespace served; the cycle jobs asked for (new or already queued)."""
        store = self.scope.store
        try:
            served = self.namespaces if self.namespaces is not None else store.namespaces()
        except StoreError as exc:  # unreachable for now: the next tick looks again
            log.error("consolidation triggers: cannot list the namespaces: %s", exc)
            return []
        asked = []
        for namespace in served:
            try:
                job = self.check(namespace)
            except Exception as exc:  # one namespace's trouble must not stop the others' triggers
                log.error("consolidation triggers of %s: %s: %s", namespace, type(exc).__name__, exc)
                continue
            if job is not None:
                asked.append(job)
        return asked

    def check(self, namespace: str) -> Job | None:
        """Ask for ``namespace``'s cycle if an automatic trigger fires (None: none fired, or the
        breaker or a daily cap refused it)."""
        store, settings = self.scope.store, self.scope.settings
        due = due_triggers(store, namespace, settings, self.scope.now())
        job = None
        if due.triggers:
            job = self.cycles.request(due.triggers[0], namespace=namespace)
            log.info("namespace %s: %s cycle %s", namespace, due.triggers[0], job.id if job else "refused")
        if due.marks:
            # Read again just before writing: the cycle and decisions keep their own keys here.
            state = store.cycle_state(namespace)
            state.update(due.marks)
            store.set_cycle_state(namespace, state)
        return job

    async def run(
        self, stop: asyncio.Event, *, wake: Callable[[], None] | None = None, every_s: float = TICK_S
    ) -> None:
        """Tick every ``every_s`` (the first after ``every_s``: the caller ticks once at start) until
        ``stop`` is set; ``wake()`` after a tick that asked for cycles, so the worker looks at once."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)
            if stop.is_set():
                return
            try:
                asked = await asyncio.to_thread(self.tick)
            except Exception as exc:  # e.g. the store is unreachable: the next tick tries again
                log.error("consolidation triggers: %s: %s", type(exc).__name__, exc)
                continue
            if asked and wake is not None:
                wake()
