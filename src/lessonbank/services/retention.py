"""Retention: episodes, reflections and done jobs deleted once older than the settings say.

``episode_retention_days``, ``reflection_retention_days`` and ``done_job_retention_days``
(``LESSONBANK_*_RETENTION_DAYS``) are unset by default: keeping data is the safe default, and the
operator opts in. The store applies the rule (``RetentionStore.purge_old``):

- a reflection goes by its age (created_at), a done job by the time it finished;
- an episode goes by its age, unless a job that is not done (queued, leased, waiting, dead) still
  points at it: that job may still run (a dead one can be retried) and needs its episode;
- lessons are never deleted here: they keep their own text, so a lesson whose episode or
  reflection is gone still reads whole (its provenance ids then name nothing). Lessons expire by
  ``expires_at`` and the pool caps instead;
- dead jobs are kept for the operator (``lessonbank jobs purge --dead`` removes them).

Deleting old reflections also drops their token and cost counts from ``stats()``. Deleting a done
job frees its dedupe key, as ``jobs purge`` does: the same episode recorded again may be reflected on again.
"""

from __future__ import annotations

import math

from lessonbank.errors import InputError
from lessonbank.ports import RetentionCutoffs
from lessonbank.services.scope import Scope

DAY_S = 86_400.0


class Retention:
    """Applies the retention settings (or one age for every kind) to the bank's namespace."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def cutoffs(self, older_than_days: float | None = None) -> RetentionCutoffs:
        """The cut-off times: ``older_than_days`` for every kind when given, else each kind's setting
        (None or 0 keeps that kind forever)."""
        settings, now = self.scope.settings, self.scope.clock()
        if older_than_days is not None:
            if (
                isinstance(older_than_days, bool)
                or not isinstance(older_than_days, int | float)
                or not 0 < older_than_days < math.inf
            ):
                raise InputError(
                    f"older_than_days must be a number of days > 0, got {older_than_days!r}",
                    field="older_than_days",
                )
            when = now - older_than_days * DAY_S
            return RetentionCutoffs(when, when, when)

        def cut(days: float | None) -> float | None:
            return now - days * DAY_S if days else None

        return RetentionCutoffs(
            episodes_before=cut(settings.episode_retention_days),
            reflections_before=cut(settings.reflection_retention_days),
            done_jobs_before=cut(settings.done_job_retention_days),
        )

    def apply(self, *, older_than_days: float | None = None, dry_run: bool = False) -> dict[str, int]:
        """Delete what is past retention in this namespace (with ``dry_run``, only count it).

        Returns how many ``episodes``, ``reflections`` and done ``jobs`` went (or would go)."""
        if not isinstance(dry_run, bool):
            raise InputError(f"dry_run must be true or false, got {dry_run!r}", field="dry_run")
        cutoffs = self.cutoffs(older_than_days)
        return self.scope.store.purge_old(self.scope.namespace, cutoffs, dry_run=dry_run).as_dict()
