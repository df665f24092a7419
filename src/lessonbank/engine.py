"""The engine both bank facades share: settings, store, LLMs, reflectors, and every operation.

It is synchronous and thread-safe through the store; LessonBank calls it directly and
AsyncLessonBank from a thread, so the two can never drift apart in behaviour.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from lessonbank import routing
from lessonbank.config import Settings
from lessonbank.context import (
    FORMATS,
    LONG_TERM_HEADER,
    LONG_TERM_MEMORY,
    SECTION_SEPARATOR,
    empty_block,
    learned_section,
    pack_section,
    render_lesson,
)
from lessonbank.errors import ConfigError, InputError, NotFoundError
from lessonbank.jobs import NO_LLM_DETAIL, JobResult, Worker
from lessonbank.llm import LLM, get_llm
from lessonbank.llm.pricing import cost_of
from lessonbank.models import (
    LEARNED_FROM_MAX_CHARS,
    LESSON_KINDS,
    LESSON_STATUSES,
    MAX_CONTEXT_IDS,
    ContextBlock,
    Decision,
    Episode,
    Hit,
    Job,
    Lesson,
    LessonKind,
    Reflection,
)
from lessonbank.policy import (
    HISTORY_LIMIT,
    OFF,
    decide_all,
    decision_rows,
    dedupe_key,
    history_of,
    history_since,
    manual_decision,
    manual_reflector,
    needs_history,
)
from lessonbank.redact import redact, redact_value
from lessonbank.reflectors.base import Reflector, reflect
from lessonbank.reflectors.dual import DualReflector
from lessonbank.reflectors.insight import InsightReflector, goal_episode
from lessonbank.reflectors.lesson import LessonReflector
from lessonbank.reflectors.reflexion import ReflexionReflector
from lessonbank.retrieval import HyDE, Retriever
from lessonbank.retrieval.dedup import place_by_vector
from lessonbank.stores import open_store
from lessonbank.stores.base import LessonQuery, Store, WriteResult
from lessonbank.text import TokenCounter, estimate_tokens

if TYPE_CHECKING:
    from lessonbank.retrieval.embedders import Embedder

log = logging.getLogger("lessonbank")

CONTEXT_CANDIDATES = 12
BUILT_IN_REFLECTORS = ("lesson", "insight", "dual", "reflexion")
MANUAL_TAGS = ("reflexion", "trigger:manual", "user-supplied")
ExportFormat = Literal["json", "jsonl", "markdown"]


class Engine:
    """Everything both facades share; synchronous, thread-safe through the store."""

    def __init__(
        self,
        db: str | None = None,
        *,
        llm: str | LLM | None = None,
        namespace: str | None = None,
        reflection_llm: str | LLM | None = None,
        settings: Settings | None = None,
        token_counter: TokenCounter | None = None,
        clock: Callable[[], float] | None = None,
        worker: bool | None = None,
        embedder: str | Embedder | None = None,
        hyde: bool | None = None,
    ) -> None:
        base = settings or Settings.from_env()
        self.settings = base.with_overrides(
            db=db,
            namespace=namespace,
            worker=worker,
            embedder=embedder if isinstance(embedder, str) else None,
            hyde=hyde,
            llm=llm if isinstance(llm, str) else None,
            reflection_llm=reflection_llm if isinstance(reflection_llm, str) else None,
        )
        if not self.settings.namespace.strip():
            raise ConfigError("namespace is empty; pass a name such as 'default' or 'team-a'")
        self.namespace = self.settings.namespace
        self.clock = clock or time.time
        self.count_tokens = token_counter or estimate_tokens
        self.llm = get_llm(llm if llm is not None and not isinstance(llm, str) else self.settings.llm)
        chosen = (
            reflection_llm
            if reflection_llm is not None and not isinstance(reflection_llm, str)
            else self.settings.reflection_llm
        )
        self.reflection_llm = get_llm(chosen) or self.llm
        self.reflectors: dict[str, Reflector] = {"lesson": LessonReflector()}
        self.reflectors["insight"] = InsightReflector()
        self.reflectors["dual"] = DualReflector()
        self.reflectors["reflexion"] = ReflexionReflector()
        for situation, name in self.settings.routes().items():
            if name != OFF and name not in self.reflectors and name not in BUILT_IN_REFLECTORS:
                raise ConfigError(
                    f"route {situation} names reflector {name!r}, which is not registered; use one of "
                    f"{', '.join(sorted(set(self.reflectors) | set(BUILT_IN_REFLECTORS)))} or {OFF!r} "
                    f"(LESSONBANK_ROUTE_{situation.upper()})"
                )
        self.store: Store = open_store(self.settings.db_url, clock=self.clock)
        self.retriever = self._new_retriever(embedder)
        self._last_context = LastContexts()

    def _new_retriever(self, embedder: str | Embedder | None) -> Retriever:
        spec = embedder if embedder is not None and not isinstance(embedder, str) else self.settings.embedder
        chosen: Embedder | None = None
        if isinstance(spec, str):
            from lessonbank.retrieval.embedders import make_embedder  # numpy and models load only when asked

            chosen = make_embedder(spec)
        elif spec is not None:
            missing = [a for a in ("name", "dim", "embed_documents", "embed_query") if not hasattr(spec, a)]
            if missing:
                raise ConfigError(
                    f"embedder {type(spec).__name__} lacks {', '.join(missing)}; pass a name such as 'minilm' "
                    "or an object with name, dim, embed_documents() and embed_query()"
                )
            chosen = spec
        if self.settings.hyde and self.reflection_llm is None:
            raise ConfigError(
                "HyDE (LESSONBANK_HYDE) needs an LLM to write hypothetical answers; set LESSONBANK_LLM"
            )
        # With an LLM, HyDE is available per call (recall(..., hyde=True)); the setting is the default.
        hyde = HyDE(self.reflection_llm) if self.reflection_llm is not None else None
        return Retriever(
            self.store,
            embedder=chosen,
            hyde=hyde,
            hyde_default=self.settings.hyde,
            default_mode=self.settings.recall_mode,
            lexical_weight=self.settings.hybrid_lexical_weight,
        )

    @property
    def embedder(self) -> Embedder | None:
        return self.retriever.embedder

    # --------------------------------------------------------------- write path

    def _record(
        self, episode: Episode | dict[str, Any], context_ids: Sequence[str] | None
    ) -> tuple[Episode, Job | None]:
        episode = self._prepare_episode(episode, context_ids)
        history = None
        if needs_history(episode, self.settings):
            recent = self.store.recent_episodes(
                self.namespace,
                agent=episode.agent,
                since=history_since(episode, self.settings),
                limit=HISTORY_LIMIT,
            )
            history = history_of(episode, recent, self.settings)
        decision, *more = decide_all(episode, self.settings, history)
        return self._store_episode(episode, decision, more)

    def _prepare_episode(
        self, episode: Episode | dict[str, Any], context_ids: Sequence[str] | None
    ) -> Episode:
        if isinstance(episode, dict):
            episode = Episode.model_validate(episode)
        elif not isinstance(episode, Episode):
            raise InputError(f"record() takes an Episode or a dict, got {type(episode).__name__}")
        if episode.namespace not in (None, self.namespace):
            raise InputError(
                f"episode belongs to namespace {episode.namespace!r} but this bank serves "
                f"{self.namespace!r}; open LessonBank(namespace={episode.namespace!r}) for it",
                field="namespace",
            )
        # Redaction only replaces text inside strings, so the redacted copy stays valid: no second validation.
        updates: dict[str, Any] = {"namespace": self.namespace}
        for name in ("task", "error", "attempt", "output", "goal_title", "agent", "task_type"):
            value = getattr(episode, name)
            cleaned = redact(value) if value else value
            if cleaned != value:
                updates[name] = cleaned
        for name in ("actions", "metadata", "tags"):
            value = getattr(episode, name)
            if value:
                updates[name] = redact_value(value)
        if episode.verification:
            updates["verification"] = [
                check.model_copy(
                    update={
                        "stderr": redact(check.stderr or "") or None,
                        "errors": redact_value(check.errors),
                    }
                )
                for check in episode.verification
            ]
        if context_ids is not None:
            updates["context_ids"] = check_context_ids(context_ids)
        elif not episode.context_ids and self.settings.attribution:
            remembered = self._last_context.take(episode.agent, episode.task, episode.task_type)
            if remembered:
                updates["context_ids"] = remembered
        return episode.model_copy(update=updates)

    def _store_episode(
        self, episode: Episode, decision: Decision, more: Sequence[Decision] = (), *, credit: bool = True
    ) -> tuple[Episode, Job | None]:
        job = None
        if decision.reflect:
            assert decision.trigger is not None and decision.reflector is not None
            job = self._new_job(
                episode, dedupe_key(episode, decision.trigger), decision.trigger, decision.reflector
            )
            decision = decision.model_copy(update={"job_id": job.id})
        # Further reflections (max_reflections_per_episode > 1): one job each, named in the decision.
        extra = [
            self._new_job(
                episode, dedupe_key(episode, f"{d.trigger}:{d.reflector}"), str(d.trigger), str(d.reflector)
            )
            for d in more
        ]
        if extra:
            also = ", ".join(
                f"{job.payload['reflector']} on {job.payload['trigger']} ({job.id})" for job in extra
            )
            decision = decision.model_copy(update={"reason": f"{decision.reason}; also {also}"})
        final = self.store.record_episode(episode, decision, job, credit=credit and self.settings.attribution)
        if not final.reflect:
            return episode, None
        for other in extra:
            self.store.enqueue_job(other)
        return episode, job

    def _now(self) -> datetime:
        """The bank's clock as a datetime: every record the bank stamps uses it, so tests can move time."""
        return datetime.fromtimestamp(self.clock(), UTC)

    def _new_job(self, episode: Episode, key: str, trigger: str, reflector: str) -> Job:
        """A reflection job stamped with the bank's clock, waiting if no LLM is set."""
        now = self._now()
        return Job(
            namespace=episode.namespace or self.namespace,
            episode_id=episode.id,
            dedupe_key=key,
            status="queued" if self.reflection_llm else "waiting",
            detail=None if self.reflection_llm else NO_LLM_DETAIL,
            max_attempts=self.settings.job_max_attempts,
            payload={"trigger": trigger, "reflector": reflector},
            run_after=now,
            created_at=now,
            updated_at=now,
        )

    def _reflect(self, episode_id: str, reflector: str | None = None) -> tuple[Decision, Job | None]:
        episode, _ = self.store.get_episode(episode_id)
        name = reflector or manual_reflector(episode, self.settings)
        if name not in self.reflectors:
            raise InputError(
                f"unknown reflector {name!r}; use one of {', '.join(sorted(self.reflectors))}",
                field="reflector",
            )
        job = self._new_job(episode, f"{dedupe_key(episode, 'manual')}:{self.clock()}", "manual", name)
        self.store.enqueue_job(job)
        return manual_decision(name).model_copy(update={"job_id": job.id}), job

    def _finish_goal(
        self,
        goal_id: str,
        *,
        title: str | None,
        status: str,
        outputs: Sequence[str],
        errors: Sequence[str],
        agent: str | None,
    ) -> tuple[Episode, Job | None]:
        """A goal's terminal state as an episode: the policy routes it to the insight reflector."""
        episode = goal_episode(
            goal_id, title=title, status=status, outputs=outputs, errors=errors, agent=agent, now=self._now()
        )
        return self._record(episode, None)

    def _insights(self, goal_id: str | None) -> list[Lesson]:
        return routing.insights(self.store, self.namespace, goal_id, fallback=False)

    def _rules(self, agent: str | None, stream: str | None) -> list[Lesson]:
        return routing.list_rules(self.store, self.namespace, agent, stream)

    def _replay(self, task: str | None, task_type: str | None, k: int) -> list[Lesson]:
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InputError(f"k must be a whole number ≥ 0, got {k!r}", field="k")
        return routing.replay(self.store, self.namespace, task=task, task_type=task_type, k=k)

    def _decisions(self, agent: str | None, limit: int) -> list[dict[str, Any]]:
        """The policy's latest decisions, newest first: reflect (trigger, reflector, job) or skip and why."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InputError(f"limit must be a whole number ≥ 1, got {limit!r}", field="limit")
        return decision_rows(self.store.recent_episodes(self.namespace, agent=agent, limit=limit))

    def _confirm_rule(self, rule_id: str) -> Lesson:
        """Mark a rule helpful: one more confirmation (see :mod:`lessonbank.routing`)."""
        return routing.confirm_rule_by_id(self.store, self.namespace, rule_id, self.clock())

    def _add_lesson(
        self,
        text: str,
        *,
        tags: Iterable[str],
        kind: LessonKind,
        task_type: str | None,
        agent: str | None,
        goal_id: str | None,
        importance: float,
        pinned: bool,
        learned_from: str | None = None,
    ) -> Lesson:
        if not isinstance(text, str) or not text.strip():
            raise InputError(
                "lesson text is empty; write the lesson, e.g. "
                "'when editing large Go files use Edit, not full rewrite'",
                field="text",
            )
        if isinstance(tags, str):
            raise InputError("tags must be a list of strings, not one string", field="tags")
        if learned_from is not None:
            _check_text_arg(learned_from, "learned_from")
        tags = [redact(tag) for tag in tags]
        lesson = Lesson(
            namespace=self.namespace,
            kind=kind,
            content=redact(text),
            trigger="manual",
            tags=[*MANUAL_TAGS, *tags],
            task_type=task_type,
            agent=agent,
            goal_id=goal_id,
            importance=importance,
            confidence=0.8,
            source="manual",
            pinned=pinned,
            created_at=self._now(),
            updated_at=self._now(),
            learned_from=learned_from,
        )
        [result] = self._write_lessons([lesson])
        return result.lesson

    def _write_lessons(self, lessons: Sequence[Lesson]) -> list[WriteResult]:
        """Write lessons outside a job: vector dedup first (with an embedder), then their vectors."""
        duplicate_of: dict[str, str] = {}
        if self.embedder is not None and lessons:
            lessons = place_by_vector(self.retriever, lessons, duplicate_of, self.settings.dedup_cosine)
        results = [
            self.store.write_lesson(lesson, duplicate_of=duplicate_of.get(lesson.id)) for lesson in lessons
        ]
        self._embed_written(results)
        return results

    def _embed_written(self, results: Sequence[WriteResult]) -> None:
        """Vectors for lessons just written; a failure is logged, and ``embed_missing`` catches up."""
        if self.embedder is None or not results:
            return
        try:
            self.retriever.embed_lessons([result.lesson for result in results])
        except Exception as exc:
            log.warning(
                "embedding %d lesson(s) failed (%s: %s); run embed_missing() later",
                len(results),
                type(exc).__name__,
                exc,
            )

    def _embed_missing(self, batch: int = 1_000) -> int:
        """Embed every lesson of the namespace that has no vector for the configured embedder."""
        if self.embedder is None:
            raise ConfigError(
                "no embedder configured; open the bank with embedder='minilm' or set LESSONBANK_EMBEDDER"
            )
        done = 0
        while missing := self.store.lessons_missing_vectors(self.namespace, self.embedder.name, batch):
            written = self.retriever.embed_lessons(missing)
            done += written
            if written == 0:  # every one was skipped (deleted meanwhile): do not spin
                break
        return done

    def _import(self, records: Iterable[Lesson | dict[str, Any]]) -> dict[str, int]:
        lessons, skipped = [], 0
        for index, record in enumerate(records):
            try:
                lessons.append(self._imported(record))
            except (ValueError, TypeError) as exc:
                skipped += 1
                log.warning("import: record %d skipped: %s", index + 1, " ".join(str(exc).split())[:300])
        added, reinforced = self.store.import_lessons(lessons)
        counts = {"added": added, "reinforced": reinforced, "skipped": skipped}
        if self.embedder is not None and added:
            counts["embedded"] = self._embed_missing()
        return counts

    def _imported(self, record: Lesson | dict[str, Any]) -> Lesson:
        """A record to import, validated once, moved into this namespace, secrets redacted."""
        if isinstance(record, Lesson):
            return record.model_copy(update={"namespace": self.namespace, "content": redact(record.content)})
        if not isinstance(record, dict):
            raise TypeError(f"a lesson to import is a dict or a Lesson, not {type(record).__name__}")
        data = {key: value for key, value in record.items() if value is not None and key != "content_hash"}
        data["namespace"] = self.namespace
        if isinstance(data.get("content"), str):
            data["content"] = redact(data["content"])
        data.setdefault("source", "import")
        return Lesson.model_validate(data)

    # --------------------------------------------------------------- read path

    def _query(
        self,
        *,
        kind: str | Sequence[str] | None = None,
        tags: Sequence[str] = (),
        task_type: str | None = None,
        agent: str | None = None,
        goal_id: str | None = None,
        status: str | Sequence[str] = "active",
    ) -> LessonQuery:
        kinds = [kind] if isinstance(kind, str) else kind
        statuses = [status] if isinstance(status, str) else list(status)
        for value, name, allowed in ((kinds, "kind", LESSON_KINDS), (statuses, "status", LESSON_STATUSES)):
            unknown = sorted(set(value or ()) - set(allowed))
            if unknown:
                raise InputError(f"unknown {name} {unknown}; use one of {', '.join(allowed)}", field=name)
        if isinstance(tags, str):
            tags = [tags]
        return LessonQuery(
            self.namespace,
            kinds=kinds,
            tags=[t.strip().lower() for t in tags],
            task_type=task_type,
            agent=agent,
            goal_id=goal_id,
            statuses=statuses,
        )

    def _recall(
        self, query: str, k: int, filters: LessonQuery, mode: str | None = None, hyde: bool | None = None
    ) -> list[Hit]:
        _check_text_arg(query, "query")
        if not query.strip():
            raise InputError("recall query is empty; pass the task you are about to do", field="query")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InputError(f"k must be a whole number ≥ 0, got {k!r}", field="k")
        if mode is not None:
            _check_text_arg(mode, "mode")
        return self.retriever.recall(query, filters, k=k, now=self.clock(), mode=mode, hyde=hyde)

    def _context(
        self,
        task: str | None,
        budget_tokens: int,
        formats: Sequence[str] | None,
        filters: LessonQuery,
        *,
        goal_id: str | None = None,
        agent: str | None = None,
        task_type: str | None = None,
    ) -> ContextBlock:
        """Each requested section in turn gets an equal share of the budget that is left."""
        chosen = list(formats) if formats is not None else [LONG_TERM_MEMORY]
        if isinstance(formats, str):
            raise InputError("formats must be a list of section names, not one string", field="formats")
        unknown = [name for name in chosen if name not in FORMATS]
        if unknown:
            raise InputError(
                f"unknown context format(s) {unknown}; known: {', '.join(FORMATS)}", field="formats"
            )
        if task is not None:
            _check_text_arg(task, "task")
        for value, name in ((goal_id, "goal_id"), (agent, "agent"), (task_type, "task_type")):
            if value is not None:
                _check_text_arg(value, name)
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 0:
            raise InputError(
                f"budget_tokens must be a whole number ≥ 0, got {budget_tokens!r}", field="budget_tokens"
            )
        if budget_tokens == 0:
            return empty_block(budget_tokens, chosen)
        texts: list[str] = []
        section_ids: list[list[str]] = []
        separator = self.count_tokens(SECTION_SEPARATOR)
        for index, name in enumerate(chosen):
            used = self.count_tokens(SECTION_SEPARATOR.join(texts)) + (separator if texts else 0)
            share = (budget_tokens - used) // (len(chosen) - index)
            text, used_ids = self._section(name, task, share, filters, goal_id, agent, task_type)
            if text:
                texts.append(text)
                section_ids.append(used_ids)
        while texts and self.count_tokens(SECTION_SEPARATOR.join(texts)) > budget_tokens:
            # A counter that is not additive: drop whole sections until it fits, and their ids with
            # them, so only what the prompt holds is touched and credited.
            texts.pop()
            section_ids.pop()
        text = SECTION_SEPARATOR.join(texts)
        ids = list(dict.fromkeys(i for used_ids in section_ids for i in used_ids))
        self.store.touch_lessons(ids)
        if task and self.settings.attribution:
            self._last_context.remember(agent, task, task_type, ids)
        return ContextBlock(
            text=text,
            lesson_ids=ids,
            tokens=self.count_tokens(text),
            budget_tokens=budget_tokens,
            formats=chosen,
        )

    def _section(
        self,
        name: str,
        task: str | None,
        budget: int,
        filters: LessonQuery,
        goal_id: str | None,
        agent: str | None,
        task_type: str | None,
    ) -> tuple[str, list[str]]:
        if budget <= 0:
            return "", []
        if name != LONG_TERM_MEMORY:
            return learned_section(
                name,
                self.store,
                self.namespace,
                budget,
                self.count_tokens,
                task=task,
                goal_id=goal_id,
                agent=agent,
                task_type=task_type,
            )
        if not task or not task.strip():
            return "", []
        if filters.kinds is None:  # the other kinds have sections of their own
            filters = replace(filters, kinds=["lesson"])
        hits = self._recall(task, CONTEXT_CANDIDATES, filters)
        return pack_section(LONG_TERM_HEADER, [hit.lesson for hit in hits], budget, self.count_tokens)

    def _export(self, fmt: str) -> str:
        lessons = self._all_lessons()
        if fmt == "json":
            return json.dumps(
                [lesson.model_dump(mode="json") for lesson in lessons], indent=2, ensure_ascii=False
            )
        if fmt == "jsonl":
            return "".join(lesson.model_dump_json() + "\n" for lesson in lessons)
        if fmt == "markdown":
            parts = [f"# Lessons — namespace `{self.namespace}`", ""]
            for lesson in lessons:
                parts += [
                    f"## {lesson.id} · {lesson.kind} · confidence {lesson.confidence:.2f}",
                    "",
                    render_lesson(lesson),
                    "",
                    f"tags: {', '.join(lesson.tags)}",
                    "",
                ]
            return "\n".join(parts)
        raise InputError(f"unknown export format {fmt!r}; use json, jsonl or markdown", field="format")

    def _all_lessons(self) -> list[Lesson]:
        query = self._query(status=("active", "pending", "archived", "quarantined"))
        out: list[Lesson] = []
        while batch := self.store.list_lessons(query, limit=1000, offset=len(out)):
            out.extend(batch)
        return out

    def _stats(self) -> dict[str, Any]:
        stats = self.store.stats(self.namespace).as_dict()
        stats["llm"] = self.reflection_llm.model if self.reflection_llm else None
        return stats

    def _pending(self) -> dict[str, int]:
        return self.store.count_jobs([self.namespace])

    # --------------------------------------------------------------- worker side

    def _new_worker(self, namespaces: Sequence[str] | None) -> Worker:
        return Worker(
            self.store, self._handle, self.settings, namespaces=namespaces, on_written=self._embed_written
        )

    async def _handle(self, job: Job) -> JobResult:
        if self.reflection_llm is None:
            raise ConfigError("no LLM configured, set LESSONBANK_LLM")
        episode, _ = await asyncio.to_thread(self.store.get_episode, job.episode_id or "")
        trigger = str(job.payload.get("trigger", "manual"))
        name = str(job.payload.get("reflector", "lesson"))
        if name not in self.reflectors:  # the job waits (parked) until a bank with that reflector runs it
            raise ConfigError(f"reflector {name!r} is not registered in this bank; cannot run job {job.id}")
        reflector = self.reflectors[name]
        run = await reflect(reflector, self.reflection_llm, episode, trigger)
        skip = run.parsed.skip_reason
        reflection = Reflection(
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
            created_at=self._now(),
        )
        lessons = (
            []
            if skip
            else [
                lesson.model_copy(
                    update={
                        "reflection_id": reflection.id,
                        "content": redact(lesson.content),
                        "learned_from": lesson.learned_from or provenance(episode.task),
                        "created_at": reflection.created_at,
                        "updated_at": reflection.created_at,
                    }
                )
                for lesson in reflector.lessons(run.parsed, episode, trigger)
            ]
        )
        if not self.settings.persist:
            for lesson in lessons:
                log.info(
                    "reflection (not persisted, LESSONBANK_REFLEXION_PERSIST=false) for %s:\n%s",
                    episode.id,
                    lesson.content,
                )
            summary = "; ".join(lesson.content.replace("\n", " | ") for lesson in lessons) or f"skip: {skip}"
            return JobResult(reflection=None, lessons=[], detail=f"persist off, logged only: {summary}")
        lessons = await asyncio.to_thread(routing.place, self.store, lessons, self.clock())
        duplicate_of: dict[str, str] = {}
        if self.embedder is not None and lessons:
            lessons = await asyncio.to_thread(
                place_by_vector, self.retriever, lessons, duplicate_of, self.settings.dedup_cosine
            )
        detail = f"skipped by {name}: {skip}" if skip else f"reflected by {name}: {len(lessons)} lesson(s)"
        return JobResult(reflection=reflection, lessons=lessons, detail=detail, duplicate_of=duplicate_of)

    def _show(self, record_id: str) -> dict[str, Any]:
        """Any record by id, with what belongs to it (an episode's decision and reflections)."""
        if not isinstance(record_id, str) or not record_id.strip():
            raise InputError("give the id of a lesson, episode, job or reflection", field="id")
        lookups: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
            ("les_", lambda i: {"lesson": self.store.get_lesson(i).model_dump(mode="json")}),
            ("ep_", self._show_episode),
            ("job_", lambda i: {"job": self.store.get_job(i).model_dump(mode="json")}),
            ("ref_", lambda i: {"reflection": self.store.get_reflection(i).model_dump(mode="json")}),
        ]
        # The id's prefix says where to look first; ids chosen by the caller have none.
        lookups.sort(key=lambda item: not record_id.startswith(item[0]))
        for _, lookup in lookups:
            try:
                return lookup(record_id)
            except NotFoundError:
                continue
        raise NotFoundError("record", record_id)

    def _show_episode(self, episode_id: str) -> dict[str, Any]:
        episode, decision = self.store.get_episode(episode_id)
        return {
            "episode": episode.model_dump(mode="json"),
            "decision": decision.model_dump(mode="json") if decision else None,
            "reflections": [
                r.model_dump(mode="json") for r in self.store.reflections_for_episode(episode_id)
            ],
        }


def provenance(task: str) -> str | None:
    """Where a lesson was learned, as indexed with it: the episode's task, whitespace folded, capped."""
    return " ".join(task.split())[:LEARNED_FROM_MAX_CHARS] or None


class LastContexts:
    """The lesson ids of the last context built per (agent, task) and per (agent, task_type).

    Lets ``record(episode)`` credit the lessons that were injected for that task even when the
    caller does not pass ``context_ids``. Bounded, in-process; explicit ids always win.
    """

    def __init__(self, size: int = 1_024) -> None:
        self.size = size
        self._ids: OrderedDict[tuple[str, str, str], list[str]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _keys(agent: str | None, task: str | None, task_type: str | None) -> list[tuple[str, str, str]]:
        keys = []
        if task:
            keys.append((agent or "", "task", " ".join(task.lower().split())))
        if task_type:
            keys.append((agent or "", "type", task_type))
        return keys

    def remember(
        self, agent: str | None, task: str | None, task_type: str | None, ids: Sequence[str]
    ) -> None:
        remembered = list(ids)  # one list under every key, so taking it by one key forgets it by all
        with self._lock:
            for key in self._keys(agent, task, task_type):
                self._ids[key] = remembered
                self._ids.move_to_end(key)
            while len(self._ids) > self.size:
                self._ids.popitem(last=False)

    def take(self, agent: str | None, task: str | None, task_type: str | None) -> list[str]:
        """The ids remembered for this task (else its task type), forgotten once taken under every key
        they were remembered by: one injection is credited once."""
        with self._lock:
            for key in self._keys(agent, task, task_type):
                ids = self._ids.pop(key, None)
                if ids is not None:
                    for other in [k for k, v in self._ids.items() if v is ids]:
                        del self._ids[other]
                    return list(ids)
        return []


def check_context_ids(value: object) -> list[str]:
    """The lesson ids a caller says were injected, as a list of distinct strings, or an InputError."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InputError(
            f"context_ids must be a list of lesson ids (ContextBlock.lesson_ids), not {type(value).__name__}",
            field="context_ids",
        )
    ids = list(value)
    for index, item in enumerate(ids):
        if not isinstance(item, str) or not item.strip():
            raise InputError(
                f"context_ids[{index}] must be a lesson id (a non-empty string), got {item!r:.60}",
                field="context_ids",
            )
    ids = list(dict.fromkeys(ids))
    if len(ids) > MAX_CONTEXT_IDS:
        raise InputError(
            f"context_ids holds {len(ids)} ids; a context injects far fewer (at most {MAX_CONTEXT_IDS})",
            field="context_ids",
        )
    return ids


def _check_text_arg(value: object, name: str) -> None:
    """Refuse a non-string or a string that is not valid UTF-8, naming the argument."""
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string, got {type(value).__name__}", field=name)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{name} is not valid UTF-8 (undecodable byte at position {exc.start})", field=name
        ) from None
