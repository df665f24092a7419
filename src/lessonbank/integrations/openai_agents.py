"""OpenAI Agents SDK adapter: lessons in an agent's instructions, one episode recorded per run.

    hooks = LessonBankHooks(bank)
    agent = Agent(name="coder", instructions=lesson_instructions(bank, "You fix bugs."), tools=[...])
    result = await hooks.run(agent, "the login test fails on CI")  # Runner.run(..., hooks=hooks) also works

How a run is followed. The SDK builds one ``RunContextWrapper`` per ``Runner.run`` and every context it
hands out during that run (to the instructions callable, to the hooks, the ``ToolContext`` of each tool
call) shares that wrapper's ``usage`` object. The adapter keeps its state for a run (the task, the
injected lesson ids, the tool calls, the errors) under that object, so ``lesson_instructions`` and
``LessonBankHooks`` need not be wired to each other, concurrent runs never mix, and the state goes
away with the run. The run's input is read from ``context.turn_input``, which the SDK sets before it
asks for the system prompt.

Invariants:

- context is built once per run and agent (the SDK asks for instructions on every turn): one injection,
  counted once as use;
- the episode carries the ids of every lesson injected in the run (``context_ids``), so its outcome
  credits them (success: helpful +1, failure: harmful +1, partial: neither);
- one episode per run, recorded when the run ends (``on_agent_end``), or, through ``hooks.run``, when it
  raises; ``bank.record`` only writes the episode and its job: reflection happens in the background.
"""

from __future__ import annotations

import contextvars
import copy
import inspect
import json
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from lessonbank.errors import ConfigError, InputError
from lessonbank.models import Status, truncated

try:
    from agents import Agent, RunConfig, RunContextWrapper, RunHooks, Runner, RunResult
    from agents.run_config import ToolErrorFormatterArgs
    from agents.run_context import AgentHookContext
    from agents.tool import Tool, default_tool_error_function
except ImportError as exc:  # the extra is not installed
    raise ConfigError(
        "the OpenAI Agents SDK is not installed: pip install 'lessonbank[openai-agents]'"
    ) from exc

if TYPE_CHECKING:
    from lessonbank.bank import AsyncLessonBank, LessonBank
    from lessonbank.remote import AsyncRemoteBank, RemoteBank

    Bank = LessonBank | AsyncLessonBank | RemoteBank | AsyncRemoteBank

__all__ = ["LessonBankHooks", "lesson_instructions", "task_text"]

T = TypeVar("T")
Instructions = str | Callable[[RunContextWrapper[Any], Agent[Any]], "str | Awaitable[str]"]
Judge = Callable[[Any], "Status | bool"]

CONTEXT_OPTIONS = ("goal_id", "agent", "task_type", "formats", "kind", "tags")
TASK_CHARS = 4_000  # the episode's task: long inputs are summarised by their head
TEXT_CHARS = 500  # a tool's arguments and result as stored in the episode (the final output: 4 times)
# What the SDK's default tool failure handler tells the model: a result equal to it is a failed call
# (the exception itself is only seen by ``tool_error_formatter`` / ``tool_error``).
SDK_TOOL_ERROR = default_tool_error_function(RunContextWrapper(context=None), Exception())


@dataclass
class _Run:
    """What the adapter knows of one run."""

    task: str | None
    agent: str | None = None  # the agent the run started with
    current: str | None = None
    started: float = field(default_factory=time.monotonic)
    blocks: dict[str, str] = field(default_factory=dict)  # agent name -> context block injected
    injected: list[str] = field(default_factory=list)
    actions: list[str | dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    tool_errors: dict[str, str] = field(default_factory=dict)  # call id -> error, until its tool ends
    recorded: bool = False


_RUNS: dict[int, _Run] = {}
# Set by ``LessonBankHooks.run``: the runs started under it, so a run that raises is still recorded.
_STARTED: contextvars.ContextVar[list[_Run] | None] = contextvars.ContextVar("lessonbank_runs", default=None)


def _run_of(context: RunContextWrapper[Any]) -> _Run:
    """The state of the run ``context`` belongs to (made on first sight, dropped with the run)."""
    usage = context.usage
    key = id(usage)
    run = _RUNS.get(key)
    if run is None:
        run = _Run(task=task_text(context.turn_input, strict=False))
        _RUNS[key] = run
        # The id stays unique while the usage object lives; the entry goes when it dies.
        weakref.finalize(usage, _RUNS.pop, key, None)
        started = _STARTED.get()
        if started is not None:
            started.append(run)
    return run


async def _resolve(value: T | Awaitable[T]) -> T:
    """A sync bank answers, an async one returns a coroutine: the same call serves both."""
    if inspect.isawaitable(value):
        return await value
    return value


def task_text(items: str | Sequence[Any], *, strict: bool = True) -> str | None:
    """The task a run's input asks for: the string itself, or the text of its user messages (else of
    any message), else the items as JSON; None when there is nothing to read.

    ``strict``: raise :class:`InputError` for an input the SDK would not take (a list item that is not a
    mapping, a blank string) instead of reading what can be read.
    """
    if isinstance(items, str):
        if strict and not items.strip():
            raise InputError("the run's input is empty; pass the task as a string or input items")
        return truncated(items, TASK_CHARS) if items.strip() else None
    if not isinstance(items, Sequence):
        raise InputError(
            f"the run's input is a {type(items).__name__}; pass a string or a list of input items"
        )
    for index, item in enumerate(items):
        if strict and not isinstance(item, Mapping):
            raise InputError(
                f"input item {index} is a {type(item).__name__}, not an input item; pass a string or "
                "dicts such as {'role': 'user', 'content': 'fix the failing test'}",
                field=f"input[{index}]",
            )
    messages = [item for item in items if isinstance(item, Mapping) and "content" in item]
    for wanted in ("user", None):
        texts = [_content_text(m["content"]) for m in messages if wanted is None or m.get("role") == wanted]
        text = "\n".join(t for t in texts if t.strip())
        if text.strip():
            return truncated(text, TASK_CHARS)
    if not items:
        return None
    return truncated(json.dumps(list(items), default=str, ensure_ascii=False), TASK_CHARS)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # parts: {"type": "input_text", "text": ...}
        return "\n".join(
            str(p["text"]) for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    return ""


def lesson_instructions(
    bank: Bank,
    instructions: Instructions,
    *,
    budget_tokens: int = 800,
    agent_rules: bool = False,
    **context_options: Any,
) -> Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str]]:
    """Instructions for ``Agent(instructions=...)``: ``instructions`` (a string, or the SDK's
    ``(context, agent) -> str`` callable) followed by the bank's context block for the run's input.

    ``context_options`` go to ``bank.context`` (``goal_id``, ``agent``, ``task_type``, ``formats``,
    ``kind``, ``tags``). ``agent_rules``: pass the running agent's name as ``agent`` (unless given), which
    adds that agent's learned rules as a section of its own (each section gets an equal share of the
    budget). The block is built once per run and agent; its lesson ids are credited with the run's
    outcome by :class:`LessonBankHooks`. An input with no text gets the instructions alone.
    """
    if isinstance(instructions, str):
        if not instructions.strip():
            raise InputError(
                "instructions are empty; give the agent's own instructions", field="instructions"
            )
    elif not callable(instructions):
        raise InputError(
            f"instructions is a {type(instructions).__name__}; pass a string or a (context, agent) callable",
            field="instructions",
        )
    unknown = sorted(set(context_options) - set(CONTEXT_OPTIONS))
    if unknown:
        raise InputError(
            f"unknown context option(s) {', '.join(unknown)}; use any of {', '.join(CONTEXT_OPTIONS)}",
            field=unknown[0],
        )
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens <= 0:
        raise InputError(
            f"budget_tokens must be a positive int, not {budget_tokens!r}", field="budget_tokens"
        )

    async def build(context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
        own = instructions if isinstance(instructions, str) else await _resolve(instructions(context, agent))
        run = _run_of(context)
        block = run.blocks.get(agent.name)
        if block is None:
            block = ""
            if run.task is not None:
                options = {"agent": agent.name, **context_options} if agent_rules else context_options
                got = await _resolve(bank.context(run.task, budget_tokens=budget_tokens, **options))
                block = got.text
                run.injected += [i for i in got.lesson_ids if i not in run.injected]
            run.blocks[agent.name] = block
        return f"{own}\n\n{block}" if block.strip() else own

    return build


class LessonBankHooks(RunHooks[Any]):
    """Run hooks that record one lessonbank episode per run: the task (the run's input), the agent it
    started with, each tool call as an action (handoffs too), tool errors, the outcome and duration.

    The status is ``judge(final_output)`` when given (a status, or a bool for success / failure); else
    ``success``, or ``partial`` when a tool failed on the way; ``failure`` when the run raised (seen only
    through :meth:`run`). Works with ``LessonBank``, ``AsyncLessonBank`` and the remote banks.
    """

    def __init__(
        self,
        bank: Bank,
        *,
        task_type: str | None = None,
        tags: Sequence[str] = (),
        judge: Judge | None = None,
    ) -> None:
        if judge is not None and not callable(judge):
            raise InputError(f"judge is a {type(judge).__name__}; pass a callable", field="judge")
        self.bank = bank
        self.task_type = task_type
        self.tags = list(tags)
        self.judge = judge
        self.episodes: list[str] = []  # ids of the episodes recorded, oldest first (the last 100)

    async def run(self, agent: Agent[Any], input: str | list[Any], **runner_options: Any) -> RunResult:
        """``Runner.run(agent, input, hooks=self, ...)`` that also records a run that raises, and sees
        each tool exception (``RunConfig.tool_error_formatter``, unless ``run_config`` sets its own)."""
        if "hooks" in runner_options:
            raise InputError("hooks.run passes itself as the run's hooks; drop hooks=", field="hooks")
        task_text(input)  # a clear error for an input the SDK would not take
        config = runner_options.pop("run_config", None) or RunConfig()
        if config.tool_error_formatter is None:
            config = copy.copy(config)
            config.tool_error_formatter = self.tool_error_formatter
        started: list[_Run] = []
        token = _STARTED.set(started)
        try:
            return await Runner.run(agent, input, hooks=self, run_config=config, **runner_options)
        except Exception as exc:
            run = started[0] if started else _Run(task=task_text(input, strict=False), agent=agent.name)
            if not run.recorded:
                run.agent = run.agent or agent.name
                await self._record(run, status="failure", error=f"{type(exc).__name__}: {exc}", output=None)
            raise
        finally:
            _STARTED.reset(token)

    def tool_error_formatter(self, args: ToolErrorFormatterArgs[Any]) -> str | None:
        """A ``RunConfig.tool_error_formatter``: notes the error for the episode; the model gets the
        SDK's default message (None)."""
        error = f"{type(args.error).__name__}: {args.error}" if args.error is not None else args.kind
        _run_of(args.run_context).tool_errors[args.call_id] = f"{args.tool_name}: {error}"
        return None

    def tool_error(self, context: RunContextWrapper[Any], error: Exception) -> str:
        """A ``failure_error_function`` for ``function_tool``: notes the error, answers the model the
        SDK's default message."""
        name = getattr(context, "tool_name", "tool")
        call_id = getattr(context, "tool_call_id", None)
        message = f"{name}: {type(error).__name__}: {error}"
        run = _run_of(context)
        if call_id is not None:
            run.tool_errors[call_id] = message
        else:
            run.errors.append(message)
        return SDK_TOOL_ERROR

    async def on_agent_start(self, context: AgentHookContext[Any], agent: Agent[Any]) -> None:
        run = _run_of(context)
        if run.agent is None:
            run.agent = agent.name
        elif run.current != agent.name:
            run.actions.append({"handoff": agent.name})
        run.current = agent.name

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        run = _run_of(context)
        call_id = getattr(context, "tool_call_id", None)
        error = run.tool_errors.pop(call_id, None) if call_id is not None else None
        if error is None and result == SDK_TOOL_ERROR:
            error = f"{tool.name}: failed (the exception is seen through hooks.run or hooks.tool_error)"
        action: dict[str, Any] = {"tool": tool.name, "status": "error" if error else "ok"}
        arguments = getattr(context, "tool_arguments", None)
        if isinstance(arguments, str) and arguments:
            action["arguments"] = truncated(arguments, TEXT_CHARS)
        action["result"] = truncated(str(result), TEXT_CHARS)
        run.actions.append(action)
        if error is not None:
            run.errors.append(truncated(error, TEXT_CHARS * 2))

    async def on_agent_end(self, context: AgentHookContext[Any], agent: Agent[Any], output: Any) -> None:
        run = _run_of(context)
        if run.recorded:
            return
        try:
            status = self._status(output, run)
        except Exception:
            run.recorded = True  # a judge that fails says nothing about the run: record nothing
            raise
        await self._record(run, status=status, error=None, output=output)

    def _status(self, output: Any, run: _Run) -> Status:
        if self.judge is None:
            return "partial" if run.errors else "success"
        verdict = self.judge(output)
        if isinstance(verdict, bool):
            return "success" if verdict else "failure"
        if verdict not in ("success", "failure", "partial"):
            raise InputError(f"judge returned {verdict!r}; return success, failure, partial or a bool")
        return verdict

    async def _record(self, run: _Run, *, status: Status, error: str | None, output: Any) -> None:
        run.recorded = True  # before the write: a failed write is not retried by the exception path
        errors = [*run.errors, *([error] if error else [])]
        episode: dict[str, Any] = {
            "task": run.task or "(a run with no text input)",
            "agent": run.agent,
            "task_type": self.task_type,
            "status": status,
            "error": "\n".join(errors) or None,
            "output": None if output is None else truncated(str(output), TEXT_CHARS * 4),
            "actions": run.actions,
            "duration_s": max(0.0, time.monotonic() - run.started),
            "tags": self.tags,
            "metadata": {"integration": "openai-agents"},
        }
        recorded = await _resolve(self.bank.record(episode, context_ids=run.injected))
        self.episodes = [*self.episodes[-99:], recorded.id]
