"""What both facades share: the constructor that builds a bank's services, and its parts.

What differs between them is in :mod:`.flavours`; their operations are written once, in :mod:`.aio`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeVar

from lessonbank.llm import LLM
from lessonbank.models import Job
from lessonbank.ports import Store
from lessonbank.reflectors.base import Reflector
from lessonbank.retrieval import Retriever
from lessonbank.services.wiring import Services, build_services
from lessonbank.settings import Settings
from lessonbank.text import TokenCounter

if TYPE_CHECKING:
    from lessonbank.jobs import Worker  # asyncio and the worker load with the first worker
    from lessonbank.retrieval.embedders import Embedder

GoalState = Literal["completed", "failed"]
R = TypeVar("R")


class BankBase:
    """What both facades share: one constructor (the bank's services, built from its arguments)
    and the bank's parts, read from those services."""

    services: Services  # one object per concern; the Reflexion loop works through these

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
        self.services = build_services(
            db,
            llm=llm,
            namespace=namespace,
            reflection_llm=reflection_llm,
            settings=settings,
            token_counter=token_counter,
            clock=clock,
            worker=worker,
            embedder=embedder,
            hyde=hyde,
        )
        self._start()

    def _start(self) -> None:
        """Facade-specific set-up, once the services exist."""

    def _kick(self) -> None:
        """Start this namespace's worker if it is not running, and wake it (each facade runs its own)."""

    def _queued(self, written: tuple[R, Job | None]) -> R:
        """What a write returns; when the write queued a runnable job, the worker is woken for it (a
        reflection waiting for an LLM wakes nothing)."""
        result, job = written
        if job is not None and job.status != "waiting":
            self._kick()
        return result

    @property
    def _runs_worker(self) -> bool:
        """Whether this bank runs a worker of its own: with LESSONBANK_WORKER on, for reflections (an
        LLM is set) or for the feedback jobs of learning from use (no LLM needed)."""
        return self.settings.worker and (self.reflection_llm is not None or self.settings.learn_from_use)

    def _helper_worker(self, job: Job) -> Worker | None:
        """A worker to run the waited-for cycle ``job`` (and no other job) in this process, when the
        bank runs no worker of its own (see ``_runs_worker``)."""
        if self._runs_worker:
            return None
        return self.services.new_worker([self.namespace], only=job.id)

    @property
    def settings(self) -> Settings:
        return self.services.scope.settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        # Seen by every service, and by workers made from now on (the CLI tunes their concurrency).
        self.services.scope.settings = value

    @property
    def namespace(self) -> str:
        return self.services.scope.namespace

    @property
    def store(self) -> Store:
        return self.services.scope.store

    @property
    def clock(self) -> Callable[[], float]:
        return self.services.scope.clock

    @property
    def llm(self) -> LLM | None:
        return self.services.llm

    @property
    def reflection_llm(self) -> LLM | None:
        return self.services.reflection_llm

    @property
    def reflectors(self) -> dict[str, Reflector]:
        """The registered reflectors by name (the policy table's routes name them)."""
        return self.services.reflectors

    @property
    def retriever(self) -> Retriever:
        return self.services.retriever

    @property
    def embedder(self) -> Embedder | None:
        return self.services.retriever.embedder

    @property
    def count_tokens(self) -> TokenCounter:
        return self.services.count_tokens
