"""The table of operations is what every surface serves: each REST route, MCP tool and remote client
method comes from its record, with the record's request model, title and role.

Roles are walked by the security suite (``tests/security/test_authorization.py``: every operation,
every role, every surface its record names); here, that each surface reads the role from the table
and that each surface's shape is the record's.
"""

from __future__ import annotations

import inspect
from typing import Any, get_args

import anyio
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from lessonbank import AsyncLessonBank, LessonBank
from lessonbank import requests as rq
from lessonbank.cli.app import COMMANDS, GROUPS
from lessonbank.operations import BY_MCP_TOOL, BY_REQUEST, OPERATIONS, mcp_hints
from lessonbank.ports import LessonSort
from lessonbank.remote import AsyncRemoteBank, RemoteBank
from lessonbank.server.app import create_app
from lessonbank.server.auth import OPEN
from lessonbank.server.banks import Banks
from lessonbank.server.mcp_tools import Access, build_server
from lessonbank.server.rest import router
from lessonbank.services.consolidation.decay import Tier
from lessonbank.services.expansion import MAX_LIMIT as MAX_EXPAND
from lessonbank.services.transfer import ExportFormat
from lessonbank.settings import Settings

PREFIX = "/api/v1"
SERVED = [op for op in OPERATIONS.values() if op.rest is not None]
# Remote methods that are not one operation's call: a streamed export to a file, and closing.
REMOTE_ONLY = {"export_to", "close"}


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("ops")
    settings = Settings(home=home / "home", db=f"sqlite:///{home / 'bank.db'}")
    with TestClient(create_app(settings, worker=False), base_url="http://127.0.0.1") as client:
        found: dict[str, Any] = client.get("/openapi.json").json()
    return found


def test_every_operation_has_a_request_model_of_its_own() -> None:
    for op in SERVED:
        assert op.request is not None and BY_REQUEST[op.request] is op, op.name
        assert set(op.path_ids) <= set(op.request.model_fields), op.name


@pytest.mark.parametrize("op", SERVED, ids=lambda op: op.name)
def test_every_rest_operation_is_served_at_its_route_with_its_request_model(
    op: Any, spec: dict[str, Any]
) -> None:
    method, path = op.rest
    [route] = [r for r in router.routes if isinstance(r, APIRoute) and r.name == op.name]
    assert route.path == path and route.methods == {method}
    served = spec["paths"][PREFIX + path][method.lower()]
    assert served["summary"] == op.summary
    params = {p["name"]: p["in"] for p in served.get("parameters", []) if p["in"] != "header"}
    fields = set(op.request.model_fields) - set(op.path_ids)
    assert {name for name, where in params.items() if where == "path"} == {"namespace", *op.path_ids}
    if op.in_query:
        assert {name for name, where in params.items() if where == "query"} == fields
        assert "requestBody" not in served
    else:
        assert not [name for name, where in params.items() if where == "query"]
        if not fields:
            assert "requestBody" not in served
            return
        ref = served["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        schema = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
        # An unknown field is refused, except where the model takes a payload that grows (Claude Code's hooks).
        open_ = op.request.model_config.get("extra") == "allow"
        assert set(schema["properties"]) == fields and schema["additionalProperties"] is open_


def test_every_route_under_the_api_names_an_operation() -> None:
    # The route's name is how the REST role check (server.deps.Bank) finds the role in the table.
    names = [r.name for r in router.routes if isinstance(r, APIRoute)]
    assert sorted(names) == sorted(op.name for op in SERVED)


def test_every_mcp_tool_is_the_tables() -> None:
    server = build_server(Access(Banks(Settings()), "default", lambda request: OPEN))
    tools = {tool.name: tool for tool in anyio.run(server.list_tools)}
    assert sorted(tools) == sorted(BY_MCP_TOOL)
    for name, op in BY_MCP_TOOL.items():
        tool = tools[name]
        assert tool.title == op.mcp_title and tool.annotations is not None
        assert tool.annotations.title == op.mcp_title
        assert tool.annotations.read_only_hint is (op.role == "read"), name
        for hint, value in mcp_hints(op).items():
            assert getattr(tool.annotations, hint) == value, (name, hint)


def _parameters(function: Any) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name != "self"]


@pytest.mark.parametrize("client", [RemoteBank, AsyncRemoteBank])
def test_every_remote_method_is_one_operation_with_its_request_models_arguments(client: type) -> None:
    methods = {n for n, m in inspect.getmembers(client, inspect.isfunction) if not n.startswith("_")}
    for name in methods - REMOTE_ONLY:
        op = OPERATIONS[name]  # a method the table does not know is a KeyError
        assert op.request is not None and op.rest is not None, name
        wanted = list(op.request.model_fields)
        if name == "import_lessons":  # sent in batches: the records, then {"lessons": batch} per request
            assert _parameters(getattr(client, name)) == ["records"] and wanted == ["lessons"]
        elif name == "flush":  # waits in requests of at most MAX_FLUSH_S each
            assert _parameters(getattr(client, name)) == wanted == ["timeout"]
        else:
            assert _parameters(getattr(client, name)) == wanted, name
    exposed = {op.name for op in SERVED if hasattr(LessonBank, op.name)}
    assert exposed <= methods


@pytest.mark.parametrize("op", SERVED, ids=lambda op: op.name)
def test_a_request_models_fields_are_its_bank_methods_parameters(op: Any) -> None:
    for bank in (LessonBank, AsyncLessonBank):
        method = getattr(bank, op.name, None)
        if method is None:  # read beside the bank's methods (analytics, a proposal's Markdown, a hook)
            assert op.name in ("analytics", "proposal_markdown", "claude_hook")
            continue
        fields = list(op.request.model_fields)
        expected = ["records"] if op.name == "import_lessons" else fields
        assert _parameters(method) == expected, (bank.__name__, op.name)


def test_every_cli_command_the_table_names_is_registered() -> None:
    commands = {command.name for command in (*COMMANDS, *GROUPS)}
    named = [op.cli for op in OPERATIONS.values() if op.cli]
    assert len(named) >= 30
    for cli in named:
        assert cli.split()[0] in commands, cli


def test_the_request_models_spell_the_banks_vocabularies() -> None:
    assert get_args(rq.LessonSort) == get_args(LessonSort)
    assert get_args(rq.Tier) == get_args(Tier)
    assert get_args(rq.ExportFormat) == get_args(ExportFormat)
    assert rq.MAX_EXPAND_LESSONS == MAX_EXPAND


def test_a_request_reads_one_string_as_the_bank_does() -> None:
    assert rq.AddLessonRequest(text="x", tags=" Deploy ").tags == ["deploy"]
    assert rq.PurgeJobsRequest(statuses="dead").statuses == ["dead"]
    with pytest.raises(ValueError):
        rq.FinishGoalRequest(goal_id="g", outputs="one string is not a list of outputs")  # type: ignore[arg-type]
    assert rq.result_of(rq.RecallRequest) == list[rq.Hit]


def test_a_request_is_made_of_a_methods_arguments_by_name() -> None:
    def edit_lesson(
        lesson_id: str, *, pinned: bool | None = None, actor: str = "api"
    ) -> rq.EditLessonRequest:
        tags, importance = None, 0.5  # read by name, like the parameters
        return rq.EditLessonRequest.of(locals())

    request = edit_lesson("les_1", pinned="yes")  # type: ignore[arg-type]
    # Every field read from the arguments, nothing else; not validated (the bank checks, in its words).
    assert (request.lesson_id, request.pinned, request.tags, request.importance, request.actor) == (
        "les_1",
        "yes",
        None,
        0.5,
        "api",
    )
    assert set(request.model_fields_set) == set(rq.EditLessonRequest.model_fields)
