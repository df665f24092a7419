"""A real LangGraph StateGraph, compiled with ``store=LessonBankStore(bank)``, learns across runs:
``context_node`` puts the bank's lessons in the state, a model node sends them with the openai SDK
to a local OpenAI-compatible server, ``record_node`` records the run. A failing run becomes a
failure episode; once its reflection (a scripted FakeLLM) is flushed, the next run's prompt holds the
lesson, and that run's success credits it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import openai
import pytest
from fastapi import FastAPI, Request
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from lessonbank import AsyncLessonBank, LessonBank
from lessonbank.errors import InputError
from lessonbank.integrations.langgraph import LessonBankStore, context_node, record_node
from lessonbank.llm.fake import FakeLLM
from tests.threaded_server import serving

REFLECTION = (
    "<situation>migrating the orders table in production</situation>"
    "<mistake>ran the ALTER TABLE without a backup and lost rows</mistake>"
    "<correction>take a pg_dump backup of the table before any ALTER TABLE migration</correction>"
    "<tags>postgres, migration, backup</tags>"
)
TASK = "migrate the orders table to add a currency column"


class State(TypedDict, total=False):
    task: str
    lessons: str
    lesson_ids: list[str]
    output: str
    error: str
    episode_id: str


class ChatServer:
    """An OpenAI-compatible chat endpoint that answers like a model that follows the notes it is
    given: a backup first when its prompt mentions one, else the bare migration."""

    def __init__(self) -> None:
        self.prompts: list[list[dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self.complete)

    async def complete(self, request: Request) -> dict[str, Any]:
        body = await request.json()
        with self.lock:
            self.prompts.append(body["messages"])
        prompt = "\n".join(m["content"] for m in body["messages"])
        answer = (
            "pg_dump -t orders > orders.sql; ALTER TABLE orders ADD currency"
            if "pg_dump" in prompt
            else "ALTER TABLE orders ADD currency"
        )
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }


@pytest.fixture
def chat() -> Iterator[tuple[ChatServer, str]]:
    server = ChatServer()
    with serving(server.app) as url:
        yield server, url


def model_node(base_url: str) -> Any:
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="test-key", max_retries=0)

    def model(state: State, *, store: BaseStore) -> dict[str, Any]:
        system = "You run database changes.\n" + state.get("lessons", "")
        reply = client.chat.completions.create(
            model="local-model",
            messages=[{"role": "system", "content": system}, {"role": "user", "content": state["task"]}],
        )
        answer = reply.choices[0].message.content or ""
        store.put(("runs", "orders"), "last", {"text": answer})  # the graph's own memory, in the bank
        if "pg_dump" not in answer:
            return {"output": answer, "error": "the migration dropped 312 rows: no backup to restore from"}
        return {"output": answer}

    return model


def build(bank: Any, base_url: str) -> Any:
    graph = StateGraph(State)
    graph.add_node("context", context_node(bank))
    graph.add_node("model", model_node(base_url))
    graph.add_node("record", record_node(bank))
    graph.add_edge(START, "context")
    graph.add_edge("context", "model")
    graph.add_edge("model", "record")
    graph.add_edge("record", END)
    return graph.compile(store=LessonBankStore(bank))


def test_a_failed_run_teaches_the_next_one(tmp_path: Path, chat: tuple[ChatServer, str]) -> None:
    server, url = chat
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}", llm=FakeLLM([REFLECTION])) as bank:
        app = build(bank, url)

        first = app.invoke({"task": TASK})
        assert first["lesson_ids"] == [] and "error" in first
        episode = bank.show(first["episode_id"])
        assert episode["episode"]["status"] == "failure" and episode["episode"]["context_ids"] == []
        assert bank.flush()

        second = app.invoke({"task": TASK})
        assert "error" not in second and second["output"].startswith("pg_dump")
        assert "pg_dump backup of the table before any ALTER TABLE" in server.prompts[-1][0]["content"]
        assert "pg_dump" not in server.prompts[0][0]["content"]
        # Injected: the reflected lesson, and the item the first run put in the store (same namespace).
        injected = {bank.get_lesson(i).source: bank.get_lesson(i) for i in second["lesson_ids"]}
        assert sorted(injected) == ["llm", "manual"] and "langgraph" in injected["manual"].tags
        assert "pg_dump" in injected["llm"].content
        recorded = bank.show(second["episode_id"])["episode"]
        assert recorded["status"] == "success" and recorded["context_ids"] == second["lesson_ids"]
        learned = bank.get_lesson(injected["llm"].id)
        assert (learned.helpful, learned.harmful) == (1, 0)  # the success is credited to the injected lesson

        item = LessonBankStore(bank).get(("runs", "orders"), "last")
        assert item is not None and item.value == {"text": second["output"]}


def test_the_async_bank_gives_async_nodes(tmp_path: Path, chat: tuple[ChatServer, str]) -> None:
    _, url = chat

    async def run() -> None:
        async with AsyncLessonBank(f"sqlite:///{tmp_path / 'a.db'}", llm=FakeLLM([REFLECTION])) as bank:
            app = build(bank, url)
            first = await app.ainvoke({"task": TASK})
            assert "error" in first
            assert await bank.flush()
            second = await app.ainvoke({"task": TASK})
            assert "error" not in second and len(second["lesson_ids"]) == 2
            assert [(await bank.get_lesson(i)).helpful for i in second["lesson_ids"]] == [1, 1]

    asyncio.run(run())


def test_the_task_can_come_from_messages_or_a_function(tmp_path: Path) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}") as bank:
        bank.add_lesson("take a pg_dump backup before an ALTER TABLE migration")
        from_messages = context_node(bank)(
            {
                "messages": [
                    {"role": "user", "content": "ALTER TABLE migration on orders"},
                    {"role": "assistant", "content": "ok"},
                ]
            }
        )
        assert "pg_dump" in from_messages["lessons"] and len(from_messages["lesson_ids"]) == 1
        by_function = context_node(bank, task=lambda s: s["ticket"]["title"], context_key="notes")(
            {"ticket": {"title": "ALTER TABLE migration"}}
        )
        assert "pg_dump" in by_function["notes"]
        recorded = record_node(bank, outcome=lambda s: {"status": "partial", "output": "half done"})(
            {"task": "ALTER TABLE migration", "lesson_ids": by_function["lesson_ids"]}
        )
        assert bank.show(recorded["episode_id"])["episode"]["status"] == "partial"
        with pytest.raises(InputError, match="no task text"):
            context_node(bank)({"other": 1})
        with pytest.raises(InputError) as caught:
            record_node(bank)({"task": "t", "lesson_ids": "les_1"})
        assert caught.value.field == "lesson_ids"
