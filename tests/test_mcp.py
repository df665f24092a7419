"""The MCP server, driven by the official SDK's own client over both transports: stdio (``lessonbank
mcp`` in a subprocess) and Streamable HTTP (``/mcp`` of a real uvicorn server on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from lessonbank import LessonBank
from lessonbank.llm import FakeLLM
from lessonbank.server.app import create_app
from lessonbank.server.auth import KeyStore
from lessonbank.settings import Settings
from tests.conftest import SEED_004_REPLY
from tests.threaded_server import serving

READ_ONLY = {
    "get_context",
    "recall_lessons",
    "show_lesson",
    "list_rules",
    "search_reflections",
    "list_proposals",
}
WRITING = {"record_episode", "finish_goal", "add_lesson", "consolidate", "archive_lesson"}
GO_LESSON = "When editing large Go files use Edit, not a full rewrite"


def run(test: Any) -> None:
    anyio.run(test)


# ---------------------------------------------------------------------------------------------- stdio


@asynccontextmanager
async def stdio_session(tmp_path: Path, *, replies: list[str] | None = None) -> AsyncIterator[ClientSession]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LESSONBANK_")}
    env["LESSONBANK_HOME"] = str(tmp_path / "home")
    args = ["-m", "lessonbank.cli", "mcp", "--db", f"sqlite:///{tmp_path / 'bank.db'}"]
    if replies is not None:
        env["LESSONBANK_FAKE_REPLIES"] = json.dumps(replies)
        args += ["--llm", "fake:scripted"]
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(tmp_path))
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def test_stdio_lists_every_tool_with_a_title_annotations_and_an_output_schema(tmp_path: Path) -> None:
    async def test() -> None:
        async with stdio_session(tmp_path) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == READ_ONLY | WRITING
            for name, tool in tools.items():
                assert tool.title and tool.annotations is not None and tool.annotations.title == tool.title
                assert tool.output_schema is not None and tool.output_schema["type"] == "object", name
                assert "namespace" in tool.input_schema["properties"], name
                assert tool.annotations.read_only_hint is (name in READ_ONLY), name
                if name in WRITING:
                    assert tool.annotations.destructive_hint is False, name
            assert "person approves" in (tools["archive_lesson"].description or "")
            assert tools["archive_lesson"].annotations.idempotent_hint is True

    run(test)


def test_stdio_record_then_recall_then_context(tmp_path: Path) -> None:
    async def test() -> None:
        async with stdio_session(tmp_path, replies=[SEED_004_REPLY]) as session:
            recorded = await session.call_tool(
                "record_episode",
                {
                    "task": "refactor a 1200-line Go file",
                    "status": "failure",
                    "error": "the rewrite lost code",
                },
            )
            assert not recorded.is_error
            assert recorded.structured_content is not None
            assert recorded.structured_content["reflect"] is True
            assert recorded.structured_content["reflector"] == "lesson"
            hits: list[dict[str, Any]] = []
            deadline = time.monotonic() + 20
            while not hits and time.monotonic() < deadline:  # the reflection runs on the server's worker
                recalled = await session.call_tool("recall_lessons", {"query": "refactor large Go file"})
                assert recalled.structured_content is not None
                hits = recalled.structured_content["hits"]
                await anyio.sleep(0.1)
            assert hits, "the reflection's lesson never came back"
            assert "Refactoring large Go files" in hits[0]["content"]
            context = await session.call_tool("get_context", {"task": "refactor a large Go file"})
            block = context.structured_content
            assert block is not None
            assert "## Long-term Memory" in block["text"] and hits[0]["id"] in block["lesson_ids"]
            assert block["tokens"] <= block["budget_tokens"] == 800
            # the same JSON as text, for clients that read only content
            assert json.loads(context.content[0].text)["lesson_ids"] == block["lesson_ids"]  # type: ignore[union-attr]

    run(test)


def test_stdio_archive_is_a_pending_proposal_that_leaves_the_lesson_in_use(tmp_path: Path) -> None:
    async def test() -> str:
        async with stdio_session(tmp_path) as session:
            added = await session.call_tool("add_lesson", {"text": GO_LESSON, "tags": ["go"]})
            assert added.structured_content is not None
            lesson_id = added.structured_content["lesson"]["id"]
            staged = await session.call_tool(
                "archive_lesson", {"lesson_id": lesson_id, "reason": "Go tools changed"}
            )
            assert not staged.is_error and staged.structured_content is not None
            proposal = staged.structured_content["proposal"]
            assert proposal["status"] == "pending"
            assert [(op["kind"], op["lesson_ids"], op["reason"]) for op in proposal["operations"]] == [
                ("archive", [lesson_id], "Go tools changed")
            ]
            again = await session.call_tool("archive_lesson", {"lesson_id": lesson_id, "reason": "again"})
            assert again.structured_content is not None
            assert again.structured_content["proposal"]["id"] == proposal["id"]
            shown = await session.call_tool("show_lesson", {"lesson_id": lesson_id})
            assert shown.structured_content is not None
            assert shown.structured_content["lesson"]["status"] == "active"
            context = await session.call_tool("get_context", {"task": "edit a large Go file"})
            assert (
                context.structured_content is not None
                and lesson_id in context.structured_content["lesson_ids"]
            )
            listed = await session.call_tool("list_proposals", {})
            assert listed.structured_content is not None
            assert [p["id"] for p in listed.structured_content["proposals"]] == [proposal["id"]]
            return str(proposal["id"])

    proposal_id = anyio.run(test)
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}", worker=False) as bank:
        (lesson,) = bank.lessons()
        assert lesson.status == "active"
        bank.approve(proposal_id, actor="alice")  # the person's decision applies it
        assert bank.get_lesson(lesson.id).status == "archived"


def test_stdio_resources_and_bad_arguments(tmp_path: Path) -> None:
    async def test() -> None:
        async with stdio_session(tmp_path) as session:
            added = await session.call_tool("add_lesson", {"text": GO_LESSON})
            assert added.structured_content is not None
            lesson = added.structured_content["lesson"]
            assert lesson["uri"] == f"lesson://default/{lesson['id']}"
            templates = {t.uri_template for t in (await session.list_resource_templates()).resource_templates}
            assert templates == {"lesson://{namespace}/{lesson_id}", "lessons://{namespace}"}
            one = await session.read_resource(lesson["uri"])
            assert json.loads(one.contents[0].text)["content"] == GO_LESSON  # type: ignore[union-attr]
            listing = json.loads((await session.read_resource("lessons://default")).contents[0].text)  # type: ignore[union-attr]
            assert [item["uri"] for item in listing["lessons"]] == [lesson["uri"]]
            with pytest.raises(MCPError, match="no lesson 'les_missing'"):
                await session.read_resource("lesson://default/les_missing")

            wrong_type = await session.call_tool("recall_lessons", {"query": "go", "k": "many"})
            assert wrong_type.is_error and "k" in wrong_type.content[0].text  # type: ignore[union-attr]
            missing = await session.call_tool("record_episode", {"status": "failure"})
            assert missing.is_error and "task" in missing.content[0].text  # type: ignore[union-attr]
            unknown = await session.call_tool("show_lesson", {"lesson_id": "les_missing"})
            assert unknown.is_error
            assert "not_found: no lesson with id 'les_missing'" in unknown.content[0].text  # type: ignore[union-attr]
            # the server is still there
            assert not (await session.call_tool("recall_lessons", {"query": "Go files"})).is_error

    run(test)


# ---------------------------------------------------------------------------------------------- HTTP


@dataclass
class Served:
    url: str
    keys: KeyStore
    app: Any


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    settings = Settings.from_env(db=f"sqlite:///{tmp_path / 'bank.db'}", namespace="team-a")
    keys = KeyStore(tmp_path / "keys.json")
    app = create_app(settings, keys=keys, llm=FakeLLM([SEED_004_REPLY]))
    with serving(app) as base:
        yield Served(f"{base}/mcp", keys, app)


@asynccontextmanager
async def http_session(
    url: str, token: str | None, *, header: str = "bearer"
) -> AsyncIterator[ClientSession]:
    headers = (
        {}
        if token is None
        else {"X-API-Key": token}
        if header == "x-api-key"
        else {"Authorization": f"Bearer {token}"}
    )
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def test_http_tools_with_a_write_key_on_its_namespace(served: Served) -> None:
    _, token = served.keys.create("agent", role="write", namespaces=["team-a"])

    async def test() -> None:
        async with http_session(served.url, token) as session:
            tools = (await session.list_tools()).tools
            assert {tool.name for tool in tools} == READ_ONLY | WRITING
            recorded = await session.call_tool(
                "record_episode",
                {"task": "refactor a 1200-line Go file", "status": "failure", "error": "lost code"},
            )
            assert (
                recorded.structured_content is not None
                and recorded.structured_content["namespace"] == "team-a"
            )
            assert recorded.structured_content["reflect"] is True
            bank: LessonBank = served.app.state.banks.get("team-a")
            assert await anyio.to_thread.run_sync(bank.flush)
            recalled = await session.call_tool("recall_lessons", {"query": "refactor large Go file"})
            assert recalled.structured_content is not None
            (hit,) = recalled.structured_content["hits"]
            assert hit["uri"] == f"lesson://team-a/{hit['id']}"
            context = await session.call_tool(
                "get_context", {"task": "refactor a large Go file", "budget_tokens": 400}
            )
            assert context.structured_content is not None
            assert context.structured_content["lesson_ids"] == [hit["id"]]
            added = await session.call_tool("add_lesson", {"text": GO_LESSON, "namespace": "team-a"})
            assert added.structured_content is not None
            resource = await session.read_resource(added.structured_content["lesson"]["uri"])
            assert json.loads(resource.contents[0].text)["namespace"] == "team-a"  # type: ignore[union-attr]
            consolidated = await session.call_tool("consolidate", {})
            assert (
                consolidated.structured_content is not None
                and consolidated.structured_content["queued"] is True
            )

    run(test)


def test_http_key_for_namespace_a_is_refused_namespace_b(served: Served) -> None:
    _, token = served.keys.create("agent-a", role="write", namespaces=["team-a"])
    served.app.state.banks.get("team-b").add_lesson("team B keeps its own secrets")

    async def test() -> None:
        async with http_session(served.url, token, header="x-api-key") as session:
            for name, arguments in (
                ("recall_lessons", {"query": "secrets", "namespace": "team-b"}),
                ("add_lesson", {"text": "planted", "namespace": "team-b"}),
                ("list_proposals", {"namespace": "team-b"}),
            ):
                refused = await session.call_tool(name, arguments)
                assert refused.is_error, name
                text = refused.content[0].text  # type: ignore[union-attr]
                assert "forbidden: key 'agent-a' may not" in text and "namespace 'team-b'" in text
            with pytest.raises(MCPError, match="forbidden"):
                await session.read_resource("lessons://team-b")
            assert not (await session.call_tool("recall_lessons", {"query": "secrets"})).is_error

    run(test)
    assert [lesson.content for lesson in served.app.state.banks.get("team-b").lessons()] == [
        "team B keeps its own secrets"
    ]


def test_http_read_key_may_read_but_not_write(served: Served) -> None:
    _, token = served.keys.create("viewer", role="read", namespaces=["*"])

    async def test() -> None:
        async with http_session(served.url, token) as session:
            assert not (await session.call_tool("get_context", {"task": "anything"})).is_error
            refused = await session.call_tool("archive_lesson", {"lesson_id": "les_x", "reason": "stale"})
            assert refused.is_error
            assert "forbidden: key 'viewer' may not write namespace 'team-a'" in refused.content[0].text  # type: ignore[union-attr]

    run(test)


def test_http_without_a_valid_key_is_401_before_any_session(served: Served) -> None:
    served.keys.create("agent", role="write")
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in ({}, {"Authorization": "Bearer lbk_nope_nope"}):
        response = httpx.post(served.url, json=initialize, headers={**accept, **headers})
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"


def test_http_open_server_answers_only_requests_addressed_to_localhost(served: Served) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    accept = {"Accept": "application/json, text/event-stream"}
    rebound = httpx.post(served.url, json=ping, headers={**accept, "Host": "attacker.example"})
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "forbidden"
    from_page = httpx.post(served.url, json=ping, headers={**accept, "Origin": "http://attacker.example"})
    assert from_page.status_code == 403

    async def test() -> None:
        async with http_session(served.url, None) as session:  # no keys: the local user may do anything
            assert not (
                await session.call_tool("add_lesson", {"text": GO_LESSON, "namespace": "any"})
            ).is_error

    run(test)
