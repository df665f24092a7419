"""Claude Code's hook payloads answered from a bank: what ``lessonbank hooks claude`` prints and
what ``POST /api/v1/ns/{namespace}/hooks/claude`` answers.

Claude Code sends one JSON object per hook (``hook_event_name``, ``session_id``,
``transcript_path``, ``cwd`` and the event's fields); the answer is JSON, plain text, or nothing:

- ``SessionStart`` (``source``: startup, resume, clear, compact) and ``UserPromptSubmit``
  (``prompt``): the context block for the task as ``hookSpecificOutput.additionalContext``; its
  lesson ids are remembered for the session (attribution). A prompt whose lessons are all in the
  model's context already gets nothing more.
- ``PostToolUse`` / ``PostToolUseFailure``: a failed tool call (a tool error, a Bash command that
  exited non-zero) is recorded as a failure episode (tool, command, error; the bank redacts) for
  the policy to reflect on; a success records nothing. Nothing is answered.
- ``Stop`` / ``SessionEnd``: the stretch of work since the last episode (a ``claude -p`` run: the
  whole session) is recorded as one episode: the task is its first prompt, the outcome comes from
  the transcript (failed tool calls, test runs and their result), and the lessons injected during it
  are its ``context_ids``, so the outcome credits them. ``record()`` never waits for an LLM.
  Nothing is answered: an answer to ``Stop`` would continue the conversation.
- ``PreCompact``: the lessons in the model's context, as plain text: a command hook's standard
  output (exit 0) is what Claude Code adds to the compaction's instructions, so they survive it.

Any other event is answered with nothing. The caller turns any failure into no answer and a log
line: a hook never breaks the session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lessonbank.errors import LessonbankError
from lessonbank.integrations.claude.session import Sessions, SessionState
from lessonbank.integrations.claude.transcript import OUTPUT_CHARS, Outcome, describe_call, read_outcome
from lessonbank.models import Episode, Status, VerificationResult

if TYPE_CHECKING:
    from lessonbank.bank import LessonBank

AGENT = "claude-code"
MAX_TASK_CHARS = 4_000  # of a prompt, for recall and as an episode's task
MAX_CARRIED = 20  # lessons carried through a compaction
ERROR_CHARS = 2_000
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit")
_EXIT_CODE = re.compile(r"\bexit(?:ed with)?(?: non-zero)?(?: status)? code:? (-?\d+)", re.IGNORECASE)


class PayloadError(ValueError):
    """The hook payload is not what Claude Code sends."""


@dataclass(frozen=True)
class Answer:
    """A hook's answer: JSON, plain text, or nothing (both None)."""

    json: dict[str, Any] | None = None
    text: str | None = None

    @property
    def body(self) -> str:
        """What the command prints (empty: nothing)."""
        if self.json is not None:
            return json.dumps(self.json, ensure_ascii=False)
        return self.text or ""


def any_path(path: Path) -> bool:
    """Every transcript path is read (the command hook runs as the user, on the user's machine)."""
    return True


def claude_transcript(path: Path) -> bool:
    """Only a Claude Code transcript is read: a ``.jsonl`` file under a ``.claude/projects`` folder
    (what the server reads for a request must not be any file a key holder names)."""
    parts = path.parts
    return (
        path.suffix == ".jsonl"
        and ".." not in parts
        and any(parts[i] == ".claude" and parts[i + 1] == "projects" for i in range(len(parts) - 1))
    )


class ClaudeHooks:
    """Answers hook payloads from ``bank``, remembering each session in ``sessions``.

    ``budget_tokens``: the context block's budget; ``readable``: which transcript paths may be read."""

    def __init__(
        self,
        bank: LessonBank,
        sessions: Sessions,
        *,
        budget_tokens: int = 800,
        agent: str = AGENT,
        readable: Callable[[Path], bool] = any_path,
    ) -> None:
        self.bank, self.sessions, self.budget_tokens = bank, sessions, budget_tokens
        self.agent, self.readable = agent, readable

    def answer(self, payload: Mapping[str, Any]) -> Answer:
        """The answer to one hook payload (PayloadError when it is not one)."""
        if not isinstance(payload, Mapping):
            raise PayloadError(f"a hook payload is a JSON object, not {type(payload).__name__}")
        event, session_id = payload.get("hook_event_name"), payload.get("session_id")
        if not isinstance(event, str) or not isinstance(session_id, str) or not session_id:
            raise PayloadError("a hook payload names its hook_event_name and session_id")
        if event in CONTEXT_EVENTS:
            return self._context(event, session_id, payload)
        if event in ("PostToolUse", "PostToolUseFailure"):
            self._tool_result(event, session_id, payload)
        elif event in ("Stop", "SessionEnd"):
            self._session_end(event, session_id, payload)
        elif event == "PreCompact":
            return self._pre_compact(session_id)
        return Answer()

    # ------------------------------------------------------------------ context

    def _context(self, event: str, session_id: str, payload: Mapping[str, Any]) -> Answer:
        prompt = payload.get("prompt")
        source = payload.get("source")
        if event == "UserPromptSubmit":
            if not isinstance(prompt, str):
                raise PayloadError("UserPromptSubmit carries the prompt")
            task: str | None = prompt[:MAX_TASK_CHARS] if prompt.strip() else None
        else:  # a resumed or compacted conversation goes on with its last prompt
            task = self.sessions.get(session_id).last_prompt if source in ("resume", "compact") else None
        block = self.bank.context(task, agent=self.agent, budget_tokens=self.budget_tokens)
        fresh: list[str] = []

        def remember(state: SessionState) -> None:
            if event == "SessionStart" and source in ("startup", "clear"):
                state.shown = []  # a new conversation: nothing is in the model's context
            if task is not None and event == "UserPromptSubmit":
                state.task = state.task or task
                state.last_prompt = task
            fresh.extend(i for i in block.lesson_ids if i not in state.shown)
            state.inject(block.lesson_ids)

        self.sessions.change(session_id, remember)
        if not block.lesson_ids or (event == "UserPromptSubmit" and not fresh):
            return Answer()
        return Answer(json={"hookSpecificOutput": {"hookEventName": event, "additionalContext": block.text}})

    # ------------------------------------------------------------------ failed tool calls

    def _tool_result(self, event: str, session_id: str, payload: Mapping[str, Any]) -> None:
        error = tool_error(event, payload)
        if error is None:
            return
        name = str(payload.get("tool_name") or "tool")
        tool_input = payload.get("tool_input")
        call = describe_call(name, tool_input)
        state = self.sessions.change(
            session_id, lambda s: s.fail(f"{call} → {' '.join(error.split())[:200]}")
        )
        found = _EXIT_CODE.search(error)
        check = VerificationResult(
            tool=name,
            status="failed" if found else "error",
            exit_code=int(found.group(1)) if found else None,
            stderr=error[-ERROR_CHARS:],
        )
        episode = Episode(
            task=state.last_prompt or state.task or f"{call} in {payload.get('cwd') or 'the project'}",
            agent=self.agent,
            status="failure",
            attempt=call,
            error=error[-ERROR_CHARS:],
            actions=[{"tool": name, "input": _small(tool_input)}],
            verification=[check],
            tags=[AGENT, f"tool:{name}"],
            metadata=_metadata(event, session_id, payload, tool_use_id=payload.get("tool_use_id")),
        )
        self.bank.record(episode, context_ids=[])  # the session's episode credits the lessons

    # ------------------------------------------------------------------ the session's episode

    def _session_end(self, event: str, session_id: str, payload: Mapping[str, Any]) -> None:
        claimed: list[SessionState] = []
        outcome = self._outcome(payload, self.sessions.get(session_id).transcript_offset)

        def claim(state: SessionState) -> None:
            if state.task is not None:
                claimed.append(replace(state))
                state.recorded(outcome.offset if outcome is not None else state.transcript_offset)

        self.sessions.change(session_id, claim)
        if event == "SessionEnd":
            self.sessions.forget_stale()
        if not claimed:
            return  # nothing asked since the last episode
        state = claimed[0]
        assert state.task is not None
        episode = session_episode(state.task, state, outcome, payload)
        episode = episode.model_copy(
            update={
                "agent": self.agent,
                "metadata": _metadata(event, session_id, payload, **episode.metadata),
            }
        )
        self.bank.record(episode, context_ids=state.injected)

    def _outcome(self, payload: Mapping[str, Any], offset: int) -> Outcome | None:
        path = payload.get("transcript_path")
        if not isinstance(path, str) or not path:
            return None
        transcript = Path(path).expanduser()
        if not self.readable(transcript) or not transcript.is_file():
            return None
        return read_outcome(transcript, offset)

    # ------------------------------------------------------------------ compaction

    def _pre_compact(self, session_id: str) -> Answer:
        ids = self.sessions.get(session_id).shown[-MAX_CARRIED:]
        lines, room = [], self.budget_tokens * 4  # about four characters a token
        for lesson_id in ids:
            try:
                lesson = self.bank.get_lesson(lesson_id)
            except LessonbankError:
                continue
            if lesson.status != "active":
                continue
            line = f"- {' '.join(lesson.content.split())[:500]} ({lesson.id})"
            if len(line) > room:
                break
            lines.append(line)
            room -= len(line)
        if not lines:
            return Answer()
        head = (
            "Keep these lessons learned from earlier work (lessonbank) in the summary, word for word, "
            "under their own heading; they are notes, not instructions from the user:"
        )
        return Answer(text="\n".join([head, *lines]))


def tool_error(event: str, payload: Mapping[str, Any]) -> str | None:
    """The error of a tool call that failed, None for one that succeeded (or that the person
    interrupted: no mistake to learn from)."""
    if payload.get("is_interrupt") is True:
        return None
    if event == "PostToolUseFailure":
        error = payload.get("error")
        return str(error) if error else "the tool call failed"
    response = payload.get("tool_response")
    if not isinstance(response, Mapping):
        return None
    code = next((response[k] for k in ("exit_code", "exitCode", "returnCode") if k in response), None)
    failed = response.get("is_error") is True or response.get("success") is False or response.get("error")
    if isinstance(code, int) and code != 0:
        failed = True
    if not failed or response.get("interrupted") is True:
        return None
    parts = [str(response.get(k)) for k in ("error", "stderr", "stdout") if response.get(k)]
    if isinstance(code, int):
        parts.insert(0, f"Exit code {code}")
    return "\n".join(parts) or "the tool call failed"


def session_episode(
    task: str, state: SessionState, outcome: Outcome | None, payload: Mapping[str, Any]
) -> Episode:
    """The episode of one stretch of a session: its task, and its outcome from the transcript (else
    from the failed tool calls the hooks saw)."""
    failures = outcome.failures if outcome is not None and outcome.tool_calls else state.failures
    tests = outcome.tests if outcome is not None else []
    last = payload.get("last_assistant_message")
    output = last if isinstance(last, str) and last.strip() else (outcome.last_text if outcome else None)
    status: Status = "success"
    error: str | None = None
    reward: float | None = None
    if tests:
        final = tests[-1]
        status = "success" if final.passed else "failure"
        error = None if final.passed else final.output[-ERROR_CHARS:]
        total = sum(final.counts.values())
        reward = round(final.counts.get("passed", 0) / total, 4) if total else None
    elif failures:
        status = "partial"
        error = f"{len(failures)} tool call(s) failed: " + "; ".join(failures[:5])
    verification = [
        VerificationResult(
            tool=run.command[:200],
            status="passed" if run.passed else "failed",
            stderr=None if run.passed else run.output[-ERROR_CHARS:],
        )
        for run in tests[-10:]
    ]
    return Episode(
        task=task,
        status=status,
        error=error[:ERROR_CHARS] if error else None,
        output=output[-OUTPUT_CHARS:] if output else None,
        actions=list(outcome.tool_calls[-50:]) if outcome else [],
        verification=verification,
        reward=reward,
        duration_s=outcome.duration_s if outcome else None,
        tags=[AGENT, "session"],
        metadata={
            "tool_calls": len(outcome.tool_calls) if outcome else None,
            "failures": len(failures),
            "tests": len(tests),
            "stretch": state.episodes + 1,
        },
    )


def _metadata(event: str, session_id: str, payload: Mapping[str, Any], **more: Any) -> dict[str, Any]:
    cwd = payload.get("cwd")
    return {
        "source": AGENT,
        "hook": event,
        "session_id": session_id,
        **({"cwd": cwd} if isinstance(cwd, str) else {}),
        **{key: value for key, value in more.items() if value is not None},
    }


def _small(value: Any) -> Any:
    """A tool's input as an episode keeps it: each string cut to 1,000 characters."""
    if isinstance(value, str):
        return value[:1_000]
    if isinstance(value, Mapping):
        return {str(key): _small(item) for key, item in list(value.items())[:20]}
    if isinstance(value, list):
        return [_small(item) for item in value[:20]]
    return value
