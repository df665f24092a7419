"""The OpenAI Agents SDK adapter against the real SDK: ``Runner.run`` with an ``OpenAIChatCompletionsModel``
over a local chat-completions server (``bench/_chat_server.py``), tracing off, nothing leaves the machine.

What the model is shown (the lessons in its system message), what is recorded (one episode per run, tool
errors, the outcome credited to the injected lessons), the loop closing through a scripted reflection,
and bad input.
"""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    MaxTurnsExceeded,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from bench._chat_server import ChatScript, chat_app
from openai import AsyncOpenAI

from lessonbank import AsyncLessonBank, ConfigError, InputError, LessonBank
from lessonbank.integrations.openai_agents import LessonBankHooks, lesson_instructions, task_text
from lessonbank.llm import FakeLLM
from tests.threaded_server import serving

MIGRATIONS = "when deploying the billing service run the database migrations first"
TASK = "deploy the billing service to staging"


def lesson_reply(situation: str, correction: str) -> str:
    return (
        f"<situation>{situation}</situation><mistake>deployed before checking disk space</mistake>"
        f"<correction>{correction}</correction><tags>deploy, disk</tags>"
    )


@pytest.fixture(autouse=True, scope="module")
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # traces would go to api.openai.com
    yield


class Server:
    """A scripted chat-completions server, and runs of an agent against it."""

    def __init__(self, script: ChatScript, url: str) -> None:
        self.script = script
        self.url = url

    def client(self) -> AsyncOpenAI:
        # One client per event loop: its connection pool belongs to the loop that opened it.
        return AsyncOpenAI(base_url=f"{self.url}/v1", api_key="test", max_retries=0)

    async def arun(self, agent: Agent[Any], input: Any, hooks: LessonBankHooks | None, **options: Any) -> Any:
        async with self.client() as client:
            bound = agent.clone(model=OpenAIChatCompletionsModel(model="local-model", openai_client=client))
            if "plain" in options:  # Runner.run itself, the hooks passed as any hooks are
                del options["plain"]
                return await Runner.run(bound, input, hooks=hooks, **options)
            assert hooks is not None
            return await hooks.run(bound, input, **options)

    def run(self, agent: Agent[Any], input: Any, hooks: LessonBankHooks | None, **options: Any) -> Any:
        return asyncio.run(self.arun(agent, input, hooks, **options))


@pytest.fixture
def server() -> Iterator[Server]:
    script = ChatScript()
    with serving(chat_app(script)) as url:
        yield Server(script, url)


@function_tool
def deploy(service: str) -> str:
    """Deploy a service to staging."""
    raise OSError(f"no space left on device while deploying {service}")


@function_tool
def status(service: str) -> str:
    """The status of a service."""
    return f"{service} is healthy"


def ops_agent(bank: Any, **options: Any) -> Agent[Any]:
    return Agent(
        name="ops",
        instructions=lesson_instructions(bank, "You deploy services.", **options),
        tools=[deploy, status],
    )


def last_episode(bank: LessonBank, hooks: LessonBankHooks) -> dict[str, Any]:
    episode: dict[str, Any] = bank.show(hooks.episodes[-1])["episode"]
    return episode


# ------------------------------------------------------------------ what the model sees, what is recorded


def test_lessons_reach_the_system_message_once_per_run_and_success_credits_them(
    db_url: str, server: Server
) -> None:
    server.script.tool_calls = [("status", {"service": "billing"})]
    with LessonBank(db_url) as bank:
        lesson = bank.add_lesson(MIGRATIONS)
        bank.add_lesson("rotate the on-call pager before holidays")  # unrelated: not injected
        hooks = LessonBankHooks(bank, task_type="deploy", tags=["staging"])
        result = server.run(ops_agent(bank), TASK, hooks)

        assert result.final_output == "done"
        first, second = server.script.system_messages()  # the tool call, then the answer
        assert first == second
        assert first.startswith("You deploy services.\n\n") and MIGRATIONS in first
        assert "pager" not in first
        episode = last_episode(bank, hooks)
        assert episode["task"] == TASK and episode["agent"] == "ops" and episode["status"] == "success"
        assert episode["task_type"] == "deploy" and episode["tags"] == ["staging"]
        assert episode["context_ids"] == [lesson.id] and episode["error"] is None
        assert episode["actions"] == [
            {
                "tool": "status",
                "status": "ok",
                "arguments": '{"service": "billing"}',
                "result": "billing is healthy",
            }
        ]
        assert episode["output"] == "done" and episode["duration_s"] >= 0
        stored = bank.get_lesson(lesson.id)
        assert stored.helpful == 1 and stored.harmful == 0
        assert stored.access_count == 1  # built once for the run's two model calls


def test_a_failing_tool_is_recorded_with_its_exception(db_url: str, server: Server) -> None:
    server.script.tool_calls = [("deploy", {"service": "billing"})]
    with LessonBank(db_url) as bank:
        hooks = LessonBankHooks(bank)
        server.run(ops_agent(bank), TASK, hooks)
        episode = last_episode(bank, hooks)
        assert episode["status"] == "partial"  # the run answered, a tool failed on the way
        assert episode["error"] == "deploy: OSError: no space left on device while deploying billing"
        assert episode["actions"][0]["tool"] == "deploy" and episode["actions"][0]["status"] == "error"
        # The model was told the SDK's default message, not the exception.
        (tool_message,) = [m for m in server.script.requests[-1]["messages"] if m["role"] == "tool"]
        assert "no space left" not in tool_message["content"]


def test_plain_runner_run_with_the_hooks_sees_tool_failures(db_url: str, server: Server) -> None:
    server.script.tool_calls = [("deploy", {"service": "billing"})]
    with LessonBank(db_url) as bank:
        hooks = LessonBankHooks(bank)
        agent = ops_agent(bank)
        server.run(agent, TASK, hooks, plain=True)
        plain = last_episode(bank, hooks)
        assert plain["status"] == "partial" and plain["error"].startswith("deploy: failed")

        # The tool's own failure_error_function gives the exception.
        traced = function_tool(_deploy, name_override="deploy", failure_error_function=hooks.tool_error)
        agent = agent.clone(tools=[traced, status])
        server.run(agent, TASK, hooks, plain=True)
        assert last_episode(bank, hooks)["error"] == "deploy: OSError: disk quota exceeded for billing"


def _deploy(service: str) -> str:
    """Deploy a service to staging."""
    raise OSError(f"disk quota exceeded for {service}")


def test_a_run_that_raises_is_recorded_as_a_failure_and_debits_the_lessons(
    db_url: str, server: Server
) -> None:
    server.script.tool_calls = [("status", {"service": "billing"})] * 5  # never answers within max_turns
    with LessonBank(db_url) as bank:
        lesson = bank.add_lesson(MIGRATIONS)
        hooks = LessonBankHooks(bank)
        with pytest.raises(MaxTurnsExceeded):
            server.run(ops_agent(bank), TASK, hooks, max_turns=2)
        episode = last_episode(bank, hooks)
        assert episode["status"] == "failure" and episode["error"].startswith("MaxTurnsExceeded: ")
        assert episode["context_ids"] == [lesson.id] and len(episode["actions"]) == 2
        assert bank.get_lesson(lesson.id).harmful == 1


def test_judge_decides_the_outcome(db_url: str, server: Server) -> None:
    with LessonBank(db_url) as bank:
        lesson = bank.add_lesson(MIGRATIONS)
        verdicts: list[Any] = [False, "partial", True]
        hooks = LessonBankHooks(bank, judge=lambda output: verdicts.pop(0))
        for _ in range(3):
            server.run(ops_agent(bank), TASK, hooks)
        statuses = [bank.show(i)["episode"]["status"] for i in hooks.episodes]
        assert statuses == ["failure", "partial", "success"]
        stored = bank.get_lesson(lesson.id)
        assert (stored.helpful, stored.harmful) == (1, 1)

        bad = LessonBankHooks(bank, judge=lambda output: "great")
        with pytest.raises(InputError, match="judge returned 'great'"):
            server.run(ops_agent(bank), TASK, bad)
        assert bad.episodes == []  # a broken judge is not the run's failure


# ------------------------------------------------------------------ the loop closes


def test_a_reflected_lesson_reaches_the_next_run(db_url: str, server: Server) -> None:
    correction = "check free disk space on the staging host before deploying billing"
    llm = FakeLLM([lesson_reply("deploying the billing service to staging", correction)])
    server.script.tool_calls = [("deploy", {"service": "billing"})]
    with LessonBank(db_url, llm=llm) as bank:
        hooks = LessonBankHooks(bank)
        server.run(ops_agent(bank), TASK, hooks)
        assert server.script.system_messages()[0] == "You deploy services."  # nothing learned yet
        assert bank.flush()
        (learned,) = bank.lessons()
        assert learned.correction == correction
        assert "no space left on device" in llm.calls[0].prompt  # the reflection saw the tool's error

        server.script.requests.clear()
        server.script.tool_calls = []
        server.run(ops_agent(bank), TASK, hooks)
        assert correction in server.script.system_messages()[0]
        assert last_episode(bank, hooks)["context_ids"] == [learned.id]
        assert bank.get_lesson(learned.id).helpful == 1


def test_async_bank(db_url: str, server: Server) -> None:
    async def scenario() -> tuple[list[str], dict[str, Any], int]:
        async with AsyncLessonBank(db_url) as bank:
            lesson = await bank.add_lesson(MIGRATIONS)
            hooks = LessonBankHooks(bank)
            await server.arun(ops_agent(bank), TASK, hooks)
            episode = (await bank.show(hooks.episodes[-1]))["episode"]
            return [lesson.id], episode, (await bank.get_lesson(lesson.id)).helpful

    ids, episode, helpful = asyncio.run(scenario())
    assert MIGRATIONS in server.script.system_messages()[0]
    assert episode["context_ids"] == ids and episode["status"] == "success" and helpful == 1


# ------------------------------------------------------------------ input


def test_a_list_of_input_items_is_read_as_the_task(db_url: str, server: Server) -> None:
    items: list[Any] = [
        {"role": "user", "content": [{"type": "input_text", "text": "deploy the billing service"}]},
        {"role": "assistant", "content": "Which environment?"},
        {"role": "user", "content": "staging"},
    ]
    with LessonBank(db_url) as bank:
        bank.add_lesson(MIGRATIONS)
        hooks = LessonBankHooks(bank)
        server.run(ops_agent(bank), items, hooks)
        assert MIGRATIONS in server.script.system_messages()[0]
        assert last_episode(bank, hooks)["task"] == "deploy the billing service\nstaging"


def test_task_text() -> None:
    assert task_text("fix it") == "fix it"
    assert task_text([{"role": "system", "content": "only this"}]) == "only this"
    assert task_text([]) is None
    assert task_text([{"type": "function_call_output", "call_id": "c1", "output": "ok"}]) == (
        '[{"type": "function_call_output", "call_id": "c1", "output": "ok"}]'
    )
    long = task_text("x" * 10_000)
    assert long is not None and len(long) <= 4_000 and long.endswith("…[truncated 6025 chars]")


def test_bad_input_gets_a_clear_error(db_url: str, server: Server) -> None:
    with LessonBank(db_url) as bank:
        with pytest.raises(InputError, match="instructions are empty"):
            lesson_instructions(bank, "  ")
        with pytest.raises(InputError, match="instructions is a int"):
            lesson_instructions(bank, 42)  # type: ignore[arg-type]
        with pytest.raises(InputError, match="unknown context option"):
            lesson_instructions(bank, "You deploy.", budget=10)
        with pytest.raises(InputError, match="budget_tokens must be a positive int"):
            lesson_instructions(bank, "You deploy.", budget_tokens=0)
        with pytest.raises(InputError, match="judge is a str"):
            LessonBankHooks(bank, judge="yes")  # type: ignore[arg-type]

        hooks = LessonBankHooks(bank)
        agent = ops_agent(bank)
        with pytest.raises(InputError, match="input item 1 is a int") as caught:
            asyncio.run(hooks.run(agent, [{"role": "user", "content": "deploy"}, 3]))
        assert caught.value.field == "input[1]"
        with pytest.raises(InputError, match="the run's input is empty"):
            asyncio.run(hooks.run(agent, "   "))
        with pytest.raises(InputError, match="drop hooks="):
            asyncio.run(hooks.run(agent, TASK, hooks=hooks))
        assert server.script.requests == [] and hooks.episodes == []


def test_callable_instructions_and_context_options(db_url: str, server: Server) -> None:
    async def own(context: Any, agent: Agent[Any]) -> str:
        return f"You are {agent.name}."

    with LessonBank(db_url) as bank:
        bank.add_lesson(MIGRATIONS, tags=["billing"])
        agent = Agent(name="ops", instructions=lesson_instructions(bank, own, tags=["other"]))
        server.run(agent, TASK, LessonBankHooks(bank))
        assert server.script.system_messages() == ["You are ops."]  # no lesson has the tag


def test_agent_rules_adds_the_running_agents_learned_rules(db_url: str, server: Server) -> None:
    rule = "IF a deploy fails on disk space THEN clean the build cache before retrying"
    with LessonBank(db_url) as bank:
        bank.add_lesson(MIGRATIONS)
        bank.add_lesson(rule, kind="principle", agent="ops")
        bank.add_lesson("IF a report is late THEN say so first", kind="principle", agent="writer")
        server.run(ops_agent(bank), TASK, LessonBankHooks(bank))
        server.run(ops_agent(bank, agent_rules=True), TASK, LessonBankHooks(bank))
        without, with_rules = server.script.system_messages()
        assert "## Learned Rules" not in without and MIGRATIONS in without
        assert "## Learned Rules" in with_rules and rule in with_rules and MIGRATIONS in with_rules
        assert "report is late" not in with_rules  # another agent's rule


# ------------------------------------------------------------------ packaging


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)  # what a missing package looks like to import
    monkeypatch.delitem(sys.modules, "lessonbank.integrations.openai_agents")
    with pytest.raises(ConfigError, match=r"pip install 'lessonbank\[openai-agents\]'"):
        importlib.import_module("lessonbank.integrations.openai_agents")


def test_importing_lessonbank_does_not_load_the_sdk() -> None:
    code = "import sys, lessonbank, lessonbank.integrations; print('agents' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False"


def test_a_streamed_run_is_recorded_when_it_finishes(db_url: str) -> None:
    from agents.testing import ScriptedModel, assistant_message

    model = ScriptedModel([[assistant_message("deployed")]])
    with LessonBank(db_url) as bank:
        lesson = bank.add_lesson(MIGRATIONS)
        agent = Agent(name="ops", instructions=lesson_instructions(bank, "You deploy."), model=model)
        hooks = LessonBankHooks(bank)

        async def stream() -> None:
            streamed = Runner.run_streamed(agent, TASK, hooks=hooks)
            async for _ in streamed.stream_events():
                pass

        asyncio.run(stream())
        assert model.first_call is not None and MIGRATIONS in (model.first_call.system_instructions or "")
        episode = last_episode(bank, hooks)
        assert episode["status"] == "success" and episode["context_ids"] == [lesson.id]


def test_remote_bank(tmp_path: Path, server: Server) -> None:
    from lessonbank import AsyncRemoteBank
    from lessonbank.server.app import create_app
    from lessonbank.settings import Settings

    app = create_app(Settings(home=tmp_path / "served", db=f"sqlite:///{tmp_path / 'served.db'}"))

    async def scenario(url: str) -> tuple[str, dict[str, Any], int]:
        async with AsyncRemoteBank(url) as bank:
            lesson = await bank.add_lesson(MIGRATIONS)
            hooks = LessonBankHooks(bank)
            await server.arun(ops_agent(bank), TASK, hooks)
            episode = (await bank.show(hooks.episodes[-1]))["episode"]
            return lesson.id, episode, (await bank.get_lesson(lesson.id)).helpful

    with serving(app) as url:
        lesson_id, episode, helpful = asyncio.run(scenario(url))
    assert MIGRATIONS in server.script.system_messages()[0]
    assert episode["context_ids"] == [lesson_id] and episode["status"] == "success" and helpful == 1
