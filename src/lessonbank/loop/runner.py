"""The Reflexion loop (seed 001): actor → evaluator → (failed) self-reflection → retry.

Semantics, per iteration ``i`` (0-based):

- the actor gets the task and its :class:`Memory`: the Ω window of the loop's reflections
  (rendered and as records) and, from the start, lessons recalled from the bank for the task
  (prior knowledge from earlier loops);
- the evaluator verifies; on success the loop stops (no reflection);
- on a failed verification the reflexion reflector runs (one LLM call, plus one repair call on
  malformed output, through :func:`lessonbank.reflectors.base.reflect` with the bank's
  reflection LLM); the last allowed iteration gets its final reflection, then the loop aborts;
- a critical error (the actor raises, the evaluator cannot run) gets an error reflection and
  aborts the loop.

Each iteration is recorded in the bank as an Episode (``loop_id`` + ``iteration``) carrying its
AIWG record. The reflection already ran in the loop, so the iteration is stored with the
policy's decision replaced by a skip that says so: the background worker never reflects an
iteration a second time. ``lessons_learned`` are written as lessons at once, so a later loop
recalls them. With ``records_dir``, each iteration's record is also written as it runs, to
``records_dir/<loop-id>/NNN.json`` numbered from 001 (seed 001's ``.aiwg/ralph/reflections``).

Ω: without ``omega``, the preset of the evaluator's verification type (seed 001: unit tests, type
check and lint 1; integration tests and combined 3; manual review 5; anything else 3), taken
from what the evaluator declares until an evaluation says which type it verified.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from lessonbank.errors import EvaluatorError, InputError, LessonbankError
from lessonbank.llm.base import run_sync
from lessonbank.llm.pricing import cost_of
from lessonbank.loop.evaluators import CheckResult, Evaluation, Evaluator, verification_type_of
from lessonbank.loop.records import (
    check_loop_id,
    iso,
    new_loop_id,
    performance_delta,
    schema_action,
    write_live_record,
)
from lessonbank.loop.window import (
    WINDOW_BUDGET_TOKENS,
    check_omega,
    render_window,
    resolve_omega,
    select_window,
)
from lessonbank.models import Decision, Episode
from lessonbank.ports import LessonQuery
from lessonbank.reflectors.base import reflect
from lessonbank.reflectors.reflexion import ReflexionReflector
from lessonbank.services.wiring import Services
from lessonbank.services.writing import stamp_reflected

T = TypeVar("T")
log = logging.getLogger("lessonbank")
PRIOR_LESSONS = 5
MAX_ITERATIONS_LIMIT = 100
SKIP_REFLECTED = "skip: reflected in the loop by reflexion (one call, recorded on the iteration)"
SKIP_PASSED = "skip: loop iteration passed (Reflexion reflects only after a failed verification)"


@dataclass
class ActorOutput:
    """What the actor did in one iteration (the seed's ActorOutput)."""

    actions: list[str | dict[str, Any]] = field(default_factory=list)
    rationale: str = ""
    strategy: str = ""
    files_modified: list[str] = field(default_factory=list)
    output: str = ""

    @classmethod
    def coerce(cls, value: Any) -> ActorOutput:
        if isinstance(value, ActorOutput):
            return value
        if not isinstance(value, dict):
            raise InputError(f"the actor returned {type(value).__name__}; return an ActorOutput or a dict")
        unknown = set(value) - {
            "actions",
            "rationale",
            "strategy",
            "files_modified",
            "output",
            "total_changes",
        }
        if unknown:  # total_changes is recomputed from the actions; other extras are not kept
            log.warning("actor output: ignoring unknown field(s) %s", sorted(unknown))
        actions = value.get("actions", [])
        if not isinstance(actions, list) or not all(isinstance(a, str | dict) for a in actions):
            raise InputError("actions must be a list of strings or dicts")
        files = value.get("files_modified", [])
        if not isinstance(files, list):
            raise InputError("files_modified must be a list of paths")
        return cls(
            actions=list(actions),
            rationale=str(value.get("rationale") or ""),
            strategy=str(value.get("strategy") or ""),
            files_modified=[str(path) for path in files],
            output=str(value.get("output") or ""),
        )

    def as_aiwg(self) -> dict[str, Any]:
        actions = [schema_action(action, index) for index, action in enumerate(self.actions)]
        changes = [a.get("changes", {}) for a in actions]
        return {
            "actions": actions,
            "rationale": self.rationale,
            "strategy": self.strategy,
            "files_modified": self.files_modified,
            "total_changes": {
                "files_changed": len(self.files_modified),
                "lines_added": sum(int(c.get("additions", 0)) for c in changes),
                "lines_deleted": sum(int(c.get("deletions", 0)) for c in changes),
            },
        }


@dataclass
class Memory:
    """What the actor sees: the Ω window (``text`` rendered, ``reflections`` as records) and prior knowledge."""

    loop_id: str
    iteration: int
    reflections: list[dict[str, Any]]
    prior_knowledge: list[str]
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass
class LoopResult:
    loop_id: str
    passed: bool
    status: str  # completed | aborted (max iterations) | error (critical)
    iterations: int
    rewards: list[float]
    reflections: list[dict[str, Any]]  # the self_reflection objects, in iteration order
    records: list[dict[str, Any]]
    episode_ids: list[str]
    prior_lesson_ids: list[str]
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


Actor = Callable[[str, Memory], "ActorOutput | dict[str, Any]"]


class HasServices(Protocol):
    """A bank (``LessonBank`` or ``AsyncLessonBank``): the loop uses its services."""

    @property
    def services(self) -> Services: ...


class ReflexionLoop:
    """``ReflexionLoop(bank, actor=fn, evaluator=CommandEvaluator([...], cwd=...), max_iterations=5)``.

    ``omega``: an int 1..10, ``"auto"`` (from failure-category diversity), a preset name
    (``unit_tests``, ``type_check``, ``lint``, ``integration_tests``, ``combined``,
    ``manual_review``), or None (default): the preset of the evaluator's verification type.
    ``records_dir``: also write each iteration's AIWG record there as the loop runs
    (``<records_dir>/<loop-id>/001.json`` …, e.g. ``records_dir=".aiwg/ralph/reflections"``);
    None (default) writes nothing.
    """

    def __init__(
        self,
        bank: HasServices,
        *,
        actor: Actor,
        evaluator: Evaluator,
        omega: int | str | None = None,
        max_iterations: int = 5,
        agent: str | None = None,
        window_budget_tokens: int = WINDOW_BUDGET_TOKENS,
        prior_lessons: int = PRIOR_LESSONS,
        records_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if not callable(actor):
            raise InputError("actor must be a callable actor(task, memory)", field="actor")
        if not hasattr(evaluator, "evaluate"):
            raise InputError("evaluator must have an evaluate(output) method", field="evaluator")
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise InputError(f"max_iterations must be an int, got {max_iterations!r}", field="max_iterations")
        if not 1 <= max_iterations <= MAX_ITERATIONS_LIMIT:
            raise InputError(f"max_iterations must be 1..{MAX_ITERATIONS_LIMIT}", field="max_iterations")
        # A LessonBank and an AsyncLessonBank have the same synchronous services: the loop calls those.
        self.bank = bank
        self.services = bank.services
        self.actor = actor
        self.evaluator = evaluator
        self.omega = check_omega(omega)
        self.max_iterations = max_iterations
        self.agent = agent
        self.window_budget_tokens = window_budget_tokens
        self.prior_lessons = prior_lessons
        self.records_dir = records_dir
        self.reflector = ReflexionReflector()

    # ------------------------------------------------------------------ run

    def run(self, task: str, *, task_type: str | None = None, loop_id: str | None = None) -> LoopResult:
        if not isinstance(task, str) or not task.strip():
            raise InputError("task is empty; describe what the loop should achieve", field="task")
        loop_id = (
            check_loop_id(loop_id) if loop_id is not None else new_loop_id(task, suffix=os.urandom(4).hex())
        )
        prior_ids, prior = self._prior_knowledge(task, task_type)
        memory: list[dict[str, Any]] = []  # {"iteration", "self_reflection"} of failed iterations
        categories: list[str] = []
        records: list[dict[str, Any]] = []
        episode_ids: list[str] = []
        usage = {"tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0}
        status, last_type = "aborted", verification_type_of(self.evaluator)
        for iteration in range(self.max_iterations):
            omega = resolve_omega(self.omega, verification_type=last_type, categories=categories)
            window = select_window(memory, omega, budget_tokens=self.window_budget_tokens)
            view = Memory(
                loop_id=loop_id,
                iteration=iteration,
                reflections=window,
                prior_knowledge=prior,
                text=_render_memory(window, prior),
            )
            started = time.monotonic()
            output, evaluation, critical = self._attempt(task, view)
            if critical is None:  # a critical error's evaluation says nothing of the evaluator
                last_type = evaluation.verification_type
            final = evaluation.passed or critical is not None or iteration == self.max_iterations - 1
            status = "completed" if evaluation.passed else ("error" if critical else "aborted")
            episode = self._episode(
                task, task_type, loop_id, iteration, output, evaluation, critical, window, prior_ids, started
            )
            reflection, run_info = (None, {}) if evaluation.passed else self._reflect(episode, critical)
            if reflection is not None:
                memory.append({"iteration": iteration, "self_reflection": reflection})
                categories.append(reflection["credit_assignment"]["failure_category"])
            for key in usage:
                usage[key] += run_info.get(key) or 0
            # The window the next attempt sees, with the Ω that this evaluation decides.
            omega = resolve_omega(self.omega, verification_type=last_type, categories=categories)
            after = select_window(memory, omega, budget_tokens=self.window_budget_tokens)
            record: dict[str, Any] = {
                "loop_id": loop_id,
                "iteration": iteration,
                "timestamp": iso(self.services.scope.now()),
                "task_description": task,
                "actor_output": output.as_aiwg(),
                "evaluator_output": evaluation.as_aiwg(),
                "self_reflection": reflection or {"reflection_text": ""},
                "memory_metadata": {
                    "omega_capacity": omega,
                    "current_memory_size": len(after),
                    "reflections_in_context": [int(item["iteration"]) for item in after],
                    "window_policy": "fifo",
                    "total_reflections_generated": len(memory),
                },
                "context_injected": bool(window),
                "previous_reflections_used": [int(item["iteration"]) for item in window],
            }
            delta = performance_delta(
                records[-1]["evaluator_output"] if records else None, record["evaluator_output"]
            )
            if delta is not None:
                record["performance_delta"] = delta
                # The seed's fourth low-quality indicator needs the next attempt: the previous
                # reflection had confidence < 0.5 and this attempt did not improve.
                previous = next((m for m in memory if m["iteration"] == iteration - 1), None)
                weak = (
                    previous is not None and float(previous["self_reflection"].get("confidence", 1.0)) < 0.5
                )
                if weak and not delta["is_improvement"]:
                    run_info = {**run_info, "previous_reflection_low_quality": iteration - 1}
            notes = _notes(evaluation.passed, critical, run_info, final)
            if notes:
                record["notes"] = notes
            run_info = {
                **run_info,
                "loop_status": status if final else "running",
                "prior_lesson_ids": prior_ids,
            }
            stored = self._store(episode, record, run_info, reflection is not None, final=final)
            records.append(stored.metadata["reflexion"])
            episode_ids.append(stored.id)
            if self.records_dir is not None:
                write_live_record(self.records_dir, records[-1])
            if final:
                break
        rewards = [float(r["evaluator_output"]["reward_signal"]) for r in records]
        return LoopResult(
            loop_id=loop_id,
            passed=status == "completed",
            status=status,
            iterations=len(records),
            rewards=rewards,
            reflections=[item["self_reflection"] for item in memory],
            records=records,
            episode_ids=episode_ids,
            prior_lesson_ids=prior_ids,
            tokens_in=int(usage["tokens_in"]),
            tokens_out=int(usage["tokens_out"]),
            cost_usd=float(usage["cost_usd"]),
        )

    # ------------------------------------------------------------------ steps

    def _prior_knowledge(self, task: str, task_type: str | None) -> tuple[list[str], list[str]]:
        """Lessons recalled for the task (kind ``lesson``), given to the actor from the start."""
        if self.prior_lessons <= 0:
            return [], []
        scope = self.services.scope
        filters = LessonQuery(scope.namespace, kinds=["lesson"])
        hits = self.services.context.recall(task, self.prior_lessons, filters)
        if hits:
            scope.store.touch_lessons([hit.lesson.id for hit in hits])
        return [hit.lesson.id for hit in hits], [hit.lesson.correction or hit.lesson.content for hit in hits]

    def _attempt(self, task: str, view: Memory) -> tuple[ActorOutput, Evaluation, str | None]:
        try:
            output = ActorOutput.coerce(self.actor(task, view))
        except Exception as exc:  # any actor failure is the loop's critical error, reflected on
            return ActorOutput(), _critical("actor", exc), f"actor raised {type(exc).__name__}: {exc}"
        try:
            evaluation = self.evaluator.evaluate(output)
        except Exception as exc:
            kind = "evaluator cannot run" if isinstance(exc, EvaluatorError) else "evaluator raised"
            return output, _critical("evaluator", exc), f"{kind}: {type(exc).__name__}: {exc}"
        if not isinstance(evaluation, Evaluation):
            exc = TypeError(f"evaluate() returned {type(evaluation).__name__}, not an Evaluation")
            return output, _critical("evaluator", exc), f"evaluator raised TypeError: {exc}"
        return output, evaluation, None

    def _episode(
        self,
        task: str,
        task_type: str | None,
        loop_id: str,
        iteration: int,
        output: ActorOutput,
        evaluation: Evaluation,
        critical: str | None,
        window: Sequence[dict[str, Any]],
        prior_ids: list[str],
        started: float,
    ) -> Episode:
        return Episode(
            namespace=self.services.scope.namespace,  # its lessons are the bank's namespace's too
            task=task,
            task_type=task_type,
            agent=self.agent,
            loop_id=loop_id,
            iteration=iteration,
            status="success" if evaluation.passed else "failure",
            error=critical,
            attempt="\n".join(part for part in (output.strategy, output.rationale) if part) or None,
            output=output.output or None,
            actions=list(output.actions),
            verification=evaluation.verification(),
            reward=evaluation.reward,
            duration_s=round(time.monotonic() - started, 3),
            context_ids=prior_ids,
            metadata={
                "previous_reflections": [
                    {
                        "iteration": item["iteration"],
                        "reflection_text": item["self_reflection"]["reflection_text"],
                        "lessons_learned": item["self_reflection"].get("lessons_learned", []),
                    }
                    for item in window
                ]
            },
        )

    def _reflect(
        self, episode: Episode, critical: str | None
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """One reflexion call; an LLM or parse failure is noted and the loop goes on without it."""
        llm = self.services.reflection_llm
        if llm is None:
            return None, {"reflection_error": "no LLM configured (set LESSONBANK_LLM or pass llm=)"}
        trigger = "error" if critical else "failure"
        try:
            run = run_sync(reflect(self.reflector, llm, episode, trigger))
        except LessonbankError as exc:
            return None, {"reflection_error": f"{type(exc).__name__}: {exc}"}
        info: dict[str, Any] = {
            "model": run.model,
            "llm_calls": run.llm_calls,
            "tokens_in": run.usage.input_tokens,
            "tokens_out": run.usage.output_tokens,
            "cost_usd": cost_of(run.model, run.usage) or 0.0,
            "trigger": trigger,
        }
        if run.parsed.skip_reason:
            return None, {
                **info,
                "reflection_error": run.parsed.skip_reason,
                "raw_output": run.raw_output[:2000],
            }
        info["low_quality"] = run.parsed.fields["low_quality"]
        info["low_quality_indicators"] = run.parsed.fields["low_quality_indicators"]
        info["parsed"] = run.parsed
        return dict(run.parsed.fields["self_reflection"]), info

    def _store(
        self,
        episode: Episode,
        record: dict[str, Any],
        run_info: dict[str, Any],
        reflected: bool,
        *,
        final: bool,
    ) -> Episode:
        """Record the iteration (policy bypassed: it is already reflected) and write its lessons.

        The prior lessons are credited once per loop, with its outcome: on the final iteration only.
        """
        services = self.services
        parsed = run_info.pop("parsed", None)
        lessons = []
        if parsed is not None and services.scope.settings.persist:
            trigger = str(run_info.get("trigger", "failure"))
            made = self.reflector.lessons(parsed, episode, trigger)
            lessons = stamp_reflected(made, episode, services.scope.now())
        # Lessons first, so the stored iteration names them (lesson reuse is measured from that).
        written = services.intake.write_reflected(lessons)
        run_info["lesson_ids"] = [result.lesson.id for result in written]
        episode = episode.model_copy(
            update={"metadata": {**episode.metadata, "reflexion": record, "reflexion_run": run_info}}
        )
        prepared = services.recorder.prepare(episode, episode.context_ids)
        if run_info.get("reflection_error"):
            reason = f"skip: the loop's reflection failed ({str(run_info['reflection_error'])[:200]})"
        else:
            reason = SKIP_REFLECTED if reflected else SKIP_PASSED
        services.recorder.store(prepared, Decision(reflect=False, reason=reason), credit=final)
        return prepared


def _critical(where: str, exc: BaseException) -> Evaluation:
    message = f"{type(exc).__name__}: {exc}"[:1000]
    result = CheckResult(tool=where, kind="other", status="error", stderr=message, tests_failed=1)
    result.errors = [{"type": "runtime_error", "message": message, "severity": "error"}]
    return Evaluation(False, "heuristic", [result], list(result.errors), 0.0, {"tests_total": 0})


def _render_memory(window: Sequence[dict[str, Any]], prior: Sequence[str]) -> str:
    parts = []
    if prior:
        parts.append("## Prior Knowledge\n" + "\n".join(f"- {item}" for item in prior))
    rendered = render_window(window)
    if rendered:
        parts.append(rendered)
    return "\n\n".join(parts)


def _notes(passed: bool, critical: str | None, run_info: dict[str, Any], final: bool) -> str:
    notes = []
    if passed:
        notes.append(
            "verification passed: no reflection (Reflexion reflects only after a failed verification)"
        )
    if critical:
        notes.append(f"critical error, loop aborted: {critical[:300]}")
    elif final and not passed:
        notes.append("max iterations reached: final reflection, loop aborted")
    if run_info.get("reflection_error"):
        notes.append(f"reflection failed: {str(run_info['reflection_error'])[:300]}")
    if "previous_reflection_low_quality" in run_info:
        notes.append(
            f"reflection {run_info['previous_reflection_low_quality']} was low quality: "
            "confidence < 0.5 and no improvement followed"
        )
    if run_info.get("low_quality_indicators"):
        notes.append(f"low-quality reflection: {', '.join(run_info['low_quality_indicators'])}")
    return "; ".join(notes)
