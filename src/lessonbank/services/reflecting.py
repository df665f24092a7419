"""The job handler a worker runs: one episode, one reflector, one LLM call, its lessons placed.

The handler only computes the job's result and writes nothing; the worker writes it (lessons placed
in their pools, a repeated rule confirmed, the reflection) in the transaction that marks the job
done (see :mod:`lessonbank.jobs`), so an attempt that loses its lease leaves no trace. A job whose reflector this bank does not know, or a
bank with no LLM, raises :class:`~lessonbank.errors.ConfigError`: the job waits (parked) until a
bank that can run it does.
"""

from __future__ import annotations

import logging
from dataclasses import KW_ONLY, dataclass
from functools import partial

from lessonbank.errors import ConfigError
from lessonbank.jobs import JobResult, offload
from lessonbank.llm import LLM
from lessonbank.llm.pricing import cost_of
from lessonbank.models import Job, Reflection
from lessonbank.ports import EpisodeStore
from lessonbank.redact import redact_reflection
from lessonbank.reflectors.base import Reflector, reflect
from lessonbank.retrieval import Retriever
from lessonbank.retrieval.dedup import place_by_vector
from lessonbank.services.pools import Pools
from lessonbank.services.scope import Scope
from lessonbank.services.writing import stamp_reflected, untrusted

log = logging.getLogger("lessonbank")


@dataclass(eq=False)
class ReflectionHandler:
    """Runs reflection jobs for one bank: ``await handler.handle(job)`` → the job's result."""

    scope: Scope
    _: KW_ONLY
    reflection_llm: LLM | None
    reflectors: dict[str, Reflector]
    retriever: Retriever
    pools: Pools

    async def handle(self, job: Job) -> JobResult:
        if self.reflection_llm is None:
            raise ConfigError("no LLM configured, set LESSONBANK_LLM")
        episodes: EpisodeStore = self.scope.store
        settings = self.scope.settings
        episode, _ = await offload(
            partial(episodes.get_episode, job.episode_id or "", namespace=job.namespace)
        )
        trigger = str(job.payload.get("trigger", "manual"))
        name = str(job.payload.get("reflector", "lesson"))
        if name not in self.reflectors:  # the job waits (parked) until a bank with that reflector runs it
            raise ConfigError(f"reflector {name!r} is not registered in this bank; cannot run job {job.id}")
        reflector = self.reflectors[name]
        run = await reflect(reflector, self.reflection_llm, episode, trigger)
        skip = run.parsed.skip_reason
        reflection = redact_reflection(
            Reflection(
                namespace=job.namespace,
                episode_id=episode.id,
                job_id=job.id,
                reflector=reflector.name,
                trigger=trigger,
                status="skipped" if skip else "ok",
                skip_reason=skip,
                raw_output=run.raw_output,
                parsed=run.parsed.fields,
                model=run.model,
                llm_calls=run.llm_calls,
                tokens_in=run.usage.input_tokens,
                tokens_out=run.usage.output_tokens,
                cost_usd=cost_of(run.model, run.usage),
                created_at=self.scope.now(),
            )
        )
        lessons = (
            []
            if skip
            else stamp_reflected(
                reflector.lessons(run.parsed, episode, trigger),
                episode,
                reflection.created_at,
                reflection_id=reflection.id,
            )
        )
        if not settings.persist:
            for lesson in lessons:
                log.info(
                    "reflection (not persisted, LESSONBANK_REFLEXION_PERSIST=false) for %s:\n%s",
                    episode.id,
                    lesson.content,
                )
            summary = "; ".join(lesson.content.replace("\n", " | ") for lesson in lessons) or f"skip: {skip}"
            return JobResult(reflection=None, lessons=[], detail=f"persist off, logged only: {summary}")
        lessons = [untrusted(lesson, settings.untrusted, agent=episode.agent) for lesson in lessons]
        if self.retriever.embedder is not None and lessons:
            lessons = await offload(place_by_vector, self.retriever, lessons, settings.dedup_cosine)
        detail = f"skipped by {name}: {skip}" if skip else f"reflected by {name}: {len(lessons)} lesson(s)"
        # Placed in their pools (expired purged, rules confirmed) in the transaction that finishes the job.
        return JobResult(reflection=reflection, lessons=lessons, detail=detail, place=self.pools.placement())
