"""Building a bank: settings, store, LLMs, reflectors, retriever, and the services over them.

Both facades call :func:`build_services` with their constructor's arguments, so there is one
place that turns ``LessonBank(db, llm=..., namespace=..., ...)`` into a working bank.

Opening a bank builds what every call needs and what can be wrong with the arguments (settings,
store, LLMs, reflectors, retriever); each service is built, and its module imported, on first use
(once, under a lock): a process that opens a bank to recall loads no consolidation, expansion,
import or export code.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Self, TypeVar, overload

from lessonbank.errors import ConfigError
from lessonbank.llm import LLM, get_llm
from lessonbank.policy import OFF
from lessonbank.reflectors.base import Reflector
from lessonbank.reflectors.registry import build_reflectors
from lessonbank.retrieval import HyDE, Retriever
from lessonbank.services.scope import Scope
from lessonbank.settings import Settings
from lessonbank.stores import open_store
from lessonbank.text import TokenCounter, estimate_tokens

if TYPE_CHECKING:
    from lessonbank.jobs import Worker
    from lessonbank.models import Lesson
    from lessonbank.retrieval.embedders import Embedder
    from lessonbank.services.attribution import LastContexts
    from lessonbank.services.catalog import Catalog
    from lessonbank.services.consolidation.cycle import Consolidator
    from lessonbank.services.consolidation.cycle_queue import CycleQueue
    from lessonbank.services.context import ContextBuilder
    from lessonbank.services.expansion import Expander
    from lessonbank.services.feedback import FeedbackHandler
    from lessonbank.services.lifecycle import Lifecycle
    from lessonbank.services.pools import Pools
    from lessonbank.services.recording import Recorder
    from lessonbank.services.reflecting import ReflectionHandler
    from lessonbank.services.retention import Retention
    from lessonbank.services.writing import LessonIntake

T = TypeVar("T")


class _built_once(cached_property[T]):
    """A service built on first use. The build holds the services' lock, so two threads asking at
    once get one object; once built, the instance attribute answers without the lock."""

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type[Any] | None = None) -> T: ...
    def __get__(self, instance: object, owner: type[Any] | None = None) -> T | Self:
        if instance is None:
            return self
        with instance._building:  # type: ignore[attr-defined]
            return super().__get__(instance, owner)


@dataclass
class Services:
    """One bank's services and what they share. Facades and the Reflexion loop call these."""

    scope: Scope
    llm: LLM | None
    reflection_llm: LLM | None
    reflectors: dict[str, Reflector]
    retriever: Retriever
    count_tokens: TokenCounter
    _building: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @_built_once
    def recorder(self) -> Recorder:
        from lessonbank.services.recording import Recorder

        return Recorder(
            self.scope,
            reflection_llm=self.reflection_llm,
            reflectors=self.reflectors,
            last_contexts=self.last_contexts,
        )

    @_built_once
    def reflections(self) -> ReflectionHandler:
        from lessonbank.services.reflecting import ReflectionHandler

        return ReflectionHandler(
            self.scope,
            reflection_llm=self.reflection_llm,
            reflectors=self.reflectors,
            retriever=self.retriever,
            pools=self.pools,
        )

    @_built_once
    def intake(self) -> LessonIntake:
        from lessonbank.services.writing import LessonIntake

        return LessonIntake(self.scope, retriever=self.retriever, pools=self.pools)

    @_built_once
    def context(self) -> ContextBuilder:
        from lessonbank.services.context import ContextBuilder

        return ContextBuilder(
            self.scope,
            retriever=self.retriever,
            count_tokens=self.count_tokens,
            last_contexts=self.last_contexts,
        )

    @_built_once
    def pools(self) -> Pools:
        from lessonbank.services.pools import Pools

        return Pools(self.scope)

    @_built_once
    def catalog(self) -> Catalog:
        from lessonbank.services.catalog import Catalog

        return Catalog(self.scope, reflection_llm=self.reflection_llm)

    @_built_once
    def retention(self) -> Retention:
        from lessonbank.services.retention import Retention

        return Retention(self.scope)

    @_built_once
    def lifecycle(self) -> Lifecycle:
        from lessonbank.services.lifecycle import Lifecycle

        return Lifecycle(self.scope)

    @_built_once
    def consolidation(self) -> Consolidator:
        from lessonbank.services.consolidation.cycle import Consolidator

        return Consolidator(
            self.scope, retriever=self.retriever, llm=self.reflection_llm, count_tokens=self.count_tokens
        )

    @_built_once
    def cycles(self) -> CycleQueue:
        from lessonbank.services.consolidation.cycle_queue import CycleQueue

        return CycleQueue(self.scope, self.consolidation)

    @_built_once
    def feedback(self) -> FeedbackHandler:
        from lessonbank.services.feedback import FeedbackHandler

        return FeedbackHandler(self.scope, reembed=_reembed(self.retriever))

    @_built_once
    def expansion(self) -> Expander:
        from lessonbank.services.expansion import Expander

        return Expander(
            self.scope,
            llm=self.reflection_llm,
            count_tokens=self.count_tokens,
            reembed=_reembed(self.retriever),
        )

    @_built_once
    def last_contexts(self) -> LastContexts:
        """The last contexts served, shared by the context builder (which writes them) and the
        recorder (which attributes an episode's outcome to them)."""
        from lessonbank.services.attribution import LastContexts

        return LastContexts()

    def new_worker(self, namespaces: Sequence[str] | None, *, only: str | None = None) -> Worker:
        """A worker running this bank's jobs (reflections and consolidation cycles), with the
        settings the bank has now; ``only`` a job id: that job alone."""
        from lessonbank.jobs import Worker

        return Worker(
            self.scope.store,
            {
                "reflect": self.reflections.handle,
                "consolidate": self.cycles.handle,
                "feedback": self.feedback.handle,
            },
            self.scope.settings,
            namespaces=namespaces,
            on_written=self.intake.embed_written,
            only=only,
            releases_waiting=self.reflection_llm is not None,
        )


def build_services(
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
) -> Services:
    """The services of a bank opened with these arguments (see :class:`lessonbank.LessonBank`)."""
    chosen_settings = (settings or Settings.from_env()).with_overrides(
        db=db,
        namespace=namespace,
        worker=worker,
        embedder=embedder if isinstance(embedder, str) else None,
        hyde=hyde,
        llm=llm if isinstance(llm, str) else None,
        reflection_llm=reflection_llm if isinstance(reflection_llm, str) else None,
    )
    if not chosen_settings.namespace.strip():
        raise ConfigError("namespace is empty; pass a name such as 'default' or 'team-a'")
    cap = chosen_settings.llm_max_reply_bytes
    main_llm = get_llm(
        llm if llm is not None and not isinstance(llm, str) else chosen_settings.llm, max_reply_bytes=cap
    )
    chosen_llm = (
        reflection_llm
        if reflection_llm is not None and not isinstance(reflection_llm, str)
        else chosen_settings.reflection_llm
    )
    reflecting_llm = get_llm(chosen_llm, max_reply_bytes=cap) or main_llm
    reflectors = _reflectors(chosen_settings)
    the_clock = clock or time.time
    scope = Scope(
        store=open_store(chosen_settings.db_url, clock=the_clock),
        namespace=chosen_settings.namespace,
        settings=chosen_settings,
        clock=the_clock,
    )
    try:
        retriever = _retriever(scope, embedder, reflecting_llm)
    except BaseException:
        scope.store.close()
        raise
    return Services(
        scope=scope,
        llm=main_llm,
        reflection_llm=reflecting_llm,
        reflectors=reflectors,
        retriever=retriever,
        count_tokens=token_counter or estimate_tokens,
    )


def _reembed(retriever: Retriever) -> Callable[[Sequence[Lesson]], object]:
    """The retriever's embed_lessons, or nothing to do when there is no embedder."""
    return retriever.embed_lessons if retriever.embedder is not None else (lambda lessons: 0)


def _reflectors(settings: Settings) -> dict[str, Reflector]:
    """The bank's reflectors (the registered ones); every route of the policy table must name one (or ``off``)."""
    reflectors = build_reflectors()
    for situation, name in settings.routes().items():
        if name != OFF and name not in reflectors:
            raise ConfigError(
                f"route {situation} names reflector {name!r}, which is not registered; use one of "
                f"{', '.join(sorted(reflectors))} or {OFF!r} (LESSONBANK_ROUTE_{situation.upper()})"
            )
    return reflectors


def _retriever(scope: Scope, embedder: str | Embedder | None, reflection_llm: LLM | None) -> Retriever:
    settings = scope.settings
    spec = embedder if embedder is not None and not isinstance(embedder, str) else settings.embedder
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
    if settings.hyde and reflection_llm is None:
        raise ConfigError(
            "HyDE (LESSONBANK_HYDE) needs an LLM to write hypothetical answers; set LESSONBANK_LLM"
        )
    # With an LLM, HyDE is available per call (recall(..., hyde=True)); the setting is the default.
    hyde = HyDE(reflection_llm) if reflection_llm is not None else None
    return Retriever(
        scope.store,
        embedder=chosen,
        hyde=hyde,
        hyde_default=settings.hyde,
        default_mode=settings.recall_mode,
        lexical_weight=settings.hybrid_lexical_weight,
        vector_floor=settings.vector_floor,
    )
