"""RemoteBank and AsyncRemoteBank behave as LessonBank: the same scenarios run against an embedded bank
and against a real server (uvicorn on a free port of 127.0.0.1) give the same results, errors come
back as the same classes, and both clients offer every method of the embedded bank."""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from lessonbank import (
    AsyncLessonBank,
    AsyncRemoteBank,
    ConfigError,
    Episode,
    InputError,
    LessonBank,
    NotFoundError,
    RemoteBank,
    StoreError,
)
from lessonbank import errors as lb_errors
from lessonbank.llm import FakeLLM
from lessonbank.remote.calls import ERRORS
from lessonbank.server.app import create_app
from lessonbank.server.auth import KeyStore
from lessonbank.server.errors import CODES
from lessonbank.settings import Settings
from tests.conftest import SEED_004_REPLY

# The embedded bank's methods a remote client cannot have: a worker runs inside the server.
EMBEDDED_ONLY = {"new_worker"}
Serve = Callable[..., str]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Start a real server over a fresh SQLite file; returns its URL. Stopped after the test."""
    running: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(name: str = "served", keys: KeyStore | None = None, **bank_options: Any) -> str:
        settings = Settings(home=tmp_path / name, db=f"sqlite:///{tmp_path / f'{name}.db'}")
        app = create_app(settings, keys=keys, **bank_options)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        running.append((server, thread))
        for _ in range(3_000):  # a bounded wait for the server, not a timing check
            if server.started:
                break
            time.sleep(0.01)
        assert server.started, "the server did not start"
        return f"http://127.0.0.1:{sock.getsockname()[1]}"

    yield start
    for server, thread in running:
        server.should_exit = True
        thread.join(timeout=10)


def lesson_shape(lesson: Any) -> tuple[Any, ...]:
    """What two banks agree on for the same lesson (ids and times are each bank's own)."""
    return (
        lesson.kind,
        lesson.content,
        tuple(lesson.tags),
        lesson.status,
        lesson.source,
        lesson.access_count,
    )


def learning_scenario(bank: LessonBank | RemoteBank) -> dict[str, Any]:
    """Record, reflect in the background, add, recall, build a context, list, archive, restore, audit."""
    recorded = bank.record(
        Episode(task="refactor pkg/engine to extract Close", status="failure", error="provider timeout")
    )
    assert bank.flush(timeout=10)
    shown = bank.show(recorded.id)
    added = bank.add_lesson("when editing large Go files use Edit, not full rewrite", tags=["go"])
    hits = bank.recall("refactor a large go file", k=3)
    block = bank.context("split manager.go into smaller go files", budget_tokens=400)
    listed = bank.lessons(sort="created")
    archived = bank.archive(added.id, reason="outdated")
    after_archive = bank.lessons(kind="lesson", tags=["go"])
    restored = bank.restore(added.id)
    trail = bank.audit(lesson_id=added.id)
    return {
        "recorded": (recorded.task, recorded.status, recorded.error, recorded.namespace),
        "decision": (shown["decision"]["reflect"], shown["decision"]["trigger"], len(shown["reflections"])),
        "added": lesson_shape(added),
        "hits": [(lesson_shape(h.lesson), type(h.score)) for h in hits],
        "block": (block.text, block.tokens, len(block.lesson_ids), block.formats),
        "listed": sorted(lesson_shape(lesson) for lesson in listed),
        "archived": (archived.status, [lesson.id == added.id for lesson in after_archive]),
        "restored": restored.status,
        "audit": [(entry.action, entry.actor, entry.summary) for entry in trail],
        "pending": {k: v for k, v in bank.pending().items() if v},
        "jobs": [(job.kind, job.status) for job in bank.jobs()],
        "got": lesson_shape(bank.get_lesson(added.id)),
    }


def consolidation_scenario(bank: LessonBank | RemoteBank) -> dict[str, Any]:
    """Import two wordings of one lesson, consolidate, approve the merge, audit, revert (no LLM)."""
    counts = bank.import_lessons(
        [{"content": "Run the migrations before the deploy."}, {"content": "run migrations before a deploy"}]
    )
    dry = bank.consolidate(dry_run=True)
    proposal = bank.consolidate()
    assert proposal is not None and dry is not None
    listed = bank.proposals(status="pending")
    approved = bank.approve(proposal.id, actor="reviewer")
    live = bank.lessons()
    trail = bank.audit()
    reverted = bank.revert(proposal.id, actor="reviewer")
    return {
        "counts": counts,
        "dry": [op.kind for op in dry.operations],
        "proposal": ([op.kind for op in proposal.operations], proposal.status, proposal.summary),
        "listed": [p.id == proposal.id for p in listed],
        "approved": (approved.status, approved.decided_by),
        "live": sorted(lesson_shape(lesson) for lesson in live),
        "audit": sorted((entry.action, entry.actor) for entry in trail),
        "reverted": reverted.status,
        "after_revert": sorted(lesson_shape(lesson) for lesson in bank.lessons()),
        "dreams": [(run.outcome, run.trigger) for run in bank.dreams()],
        "core": bank.core_memory(),
    }


def test_learning_gives_the_same_results_embedded_and_remote(tmp_path: Path, serve: Serve) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'embedded.db'}", llm=FakeLLM([SEED_004_REPLY])) as bank:
        expected = learning_scenario(bank)
    url = serve(llm=FakeLLM([SEED_004_REPLY]))
    with RemoteBank(url) as remote:
        got = learning_scenario(remote)
    assert expected["decision"] == (True, "error", 1)
    assert len(expected["listed"]) == 2 and expected["archived"] == ("archived", [False])
    assert got == expected


def test_consolidation_gives_the_same_results_embedded_and_remote(tmp_path: Path, serve: Serve) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'embedded.db'}", worker=False) as bank:
        expected = consolidation_scenario(bank)
    with RemoteBank(serve(worker=False)) as remote:
        got = consolidation_scenario(remote)
    assert expected["proposal"][0] == ["merge"] and len(expected["live"]) == 1
    assert got == expected


def test_the_async_client_gives_the_same_results(tmp_path: Path, serve: Serve) -> None:
    async def scenario(bank: AsyncLessonBank | AsyncRemoteBank) -> tuple[Any, ...]:
        await bank.record(Episode(task="refactor pkg/engine", status="failure", error="timeout"))
        assert await bank.flush(timeout=10)
        added = await bank.add_lesson("when editing large Go files use Edit", tags=["go"])
        hits = await bank.recall("editing go files")
        block = await bank.context("edit a go file")
        archived = await bank.archive(added.id)
        return (
            [lesson_shape(h.lesson) for h in hits],
            block.text,
            archived.status,
            sorted(lesson_shape(lesson) for lesson in await bank.lessons()),
            [(entry.action, entry.actor) for entry in await bank.audit()],
        )

    async def both() -> tuple[Any, Any]:
        async with AsyncLessonBank(
            f"sqlite:///{tmp_path / 'embedded.db'}", llm=FakeLLM([SEED_004_REPLY])
        ) as bank:
            expected = await scenario(bank)
        async with AsyncRemoteBank(url) as remote:
            got = await scenario(remote)
        return expected, got

    url = serve(llm=FakeLLM([SEED_004_REPLY]))
    expected, got = asyncio.run(both())
    assert len(expected[0]) == 2
    assert got == expected


def test_export_to_writes_what_the_embedded_bank_writes(tmp_path: Path, serve: Serve) -> None:
    url = serve(worker=False)
    with RemoteBank(url) as remote:
        remote.add_lesson("pin the toolchain version in CI", tags=["ci"])
        remote.add_lesson("run the linter before committing", tags=["lint"])
        for fmt in ("json", "jsonl", "markdown"):
            path = tmp_path / f"export.{fmt}"
            assert remote.export_to(path, fmt) == 2
            assert path.read_text("utf-8").rstrip("\n") == remote.export(fmt).rstrip("\n")
        stream = io.StringIO()
        assert remote.export_to(stream, "jsonl") == 2
        async_path = tmp_path / "async.md"

        async def async_export() -> int:
            async with AsyncRemoteBank(url) as bank:
                return await bank.export_to(async_path, "markdown")

        assert asyncio.run(async_export()) == 2
        assert async_path.read_text("utf-8") == (tmp_path / "export.markdown").read_text("utf-8")
        # The export re-imports into another namespace as the same lessons.
        with RemoteBank(url, namespace="copy") as copy:
            counts = copy.import_lessons(line for line in _json_lines(stream.getvalue()))
            assert counts == {"added": 2, "reinforced": 0, "skipped": 0}
            assert sorted(lesson.content for lesson in copy.lessons()) == sorted(
                lesson.content for lesson in remote.lessons()
            )


def _json_lines(text: str) -> Iterator[dict[str, Any]]:
    for line in text.splitlines():
        record = json.loads(line)
        record.pop("namespace")
        yield record


def test_errors_are_the_embedded_banks_classes(tmp_path: Path, serve: Serve) -> None:
    keys = KeyStore(tmp_path / "keys.json")
    _, reader = keys.create("reader", role="read", namespaces=["team-a"])
    url = serve(keys=keys, worker=False)
    with RemoteBank(url, api_key=reader, namespace="team-a") as bank:
        with pytest.raises(NotFoundError) as missing:
            bank.get_lesson("les_nope")
        assert str(missing.value) == "no lesson with id 'les_nope'" and missing.value.record_id == "les_nope"
        assert missing.value.kind == "lesson"
        with pytest.raises(InputError) as too_many:
            bank.recall("deploy", k=10_000)
        assert too_many.value.field == "k"
        with pytest.raises(InputError):
            bank.recall("")
        with pytest.raises(ConfigError, match="may not write"):
            bank.add_lesson("a reader cannot write")
        with pytest.raises(NotFoundError):
            bank.proposal("prp_unknown")
    with RemoteBank(url, namespace="team-a") as anonymous, pytest.raises(ConfigError, match="API key"):
        anonymous.lessons()
    with RemoteBank(url, api_key=reader, namespace="team-b") as elsewhere, pytest.raises(ConfigError):
        elsewhere.lessons()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    with RemoteBank(f"http://127.0.0.1:{closed_port}", timeout=2) as nowhere, pytest.raises(StoreError):
        nowhere.stats()


def test_every_server_error_code_maps_to_the_class_the_bank_raised() -> None:
    for cls, code, _status in CODES:
        assert ERRORS[code] is cls, code
    assert issubclass(ERRORS["unauthorized"], lb_errors.ConfigError)


def test_a_bad_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        RemoteBank("127.0.0.1:8765")


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


@pytest.mark.parametrize(
    ("embedded", "remote"), [(LessonBank, RemoteBank), (AsyncLessonBank, AsyncRemoteBank)]
)
def test_every_bank_method_exists_with_the_same_parameters(embedded: type, remote: type) -> None:
    wanted = {n: s for n, s in public_methods(embedded).items() if n not in EMBEDDED_ONLY}
    offered = public_methods(remote)
    assert sorted(wanted) == sorted(offered)
    for name, signature in wanted.items():
        assert list(signature.parameters.values()) == list(offered[name].parameters.values()), name
        assert signature.return_annotation == offered[name].return_annotation, name
        assert inspect.iscoroutinefunction(getattr(remote, name)) == inspect.iscoroutinefunction(
            getattr(embedded, name)
        ), name


def test_what_cannot_be_sent_is_refused_before_any_request() -> None:
    with RemoteBank("http://127.0.0.1:9") as bank:  # nothing listens there: a request would be StoreError
        with pytest.raises(InputError, match="cannot be sent as JSON"):
            bank.record({"task": "deploy", "metadata": {"socket": object()}})
        with pytest.raises(InputError):
            bank.get_lesson("")
        with pytest.raises(InputError):
            bank.flush(timeout=-1)
        assert bank.import_lessons([{"content": object()}]) == {"added": 0, "reinforced": 0, "skipped": 1}


def editing_scenario(bank: LessonBank | RemoteBank) -> dict[str, Any]:
    lesson = bank.add_lesson("Never deploy on Fridays.", tags=["deploy"])
    pinned = bank.edit_lesson(lesson.id, pinned=True, tags=["deploy", "release"], importance=0.9, actor="ana")
    unchanged = bank.edit_lesson(lesson.id, pinned=True)  # nothing changes: no audit row
    refused = []
    for bad in ({}, {"importance": 2.0}):
        try:
            bank.edit_lesson(lesson.id, **bad)  # type: ignore[arg-type]
        except lb_errors.InputError:
            refused.append(True)
    [row] = [r for r in bank.audit(lesson_id=lesson.id) if r.action == "edit"]
    return {
        "pinned": (pinned.pinned, pinned.tags, pinned.importance, unchanged.updated_at == pinned.updated_at),
        "refused": refused,
        "audit": (row.actor.split(" (key")[0], row.summary.startswith("pinned False → True")),
    }


def test_editing_a_lesson_gives_the_same_results_embedded_and_remote(tmp_path: Path, serve: Serve) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'embedded.db'}", worker=False) as bank:
        expected = editing_scenario(bank)
    with RemoteBank(serve(worker=False)) as remote:
        got = editing_scenario(remote)
    assert expected == {
        "pinned": (True, ["deploy", "release"], 0.9, True),
        "refused": [True, True],
        "audit": ("ana", True),
    }
    assert got == expected


def test_expand_over_http_plans_then_writes_examples(serve: Serve) -> None:
    reply = "<examples>\nif result == None:\nwhile node != None: pass\n</examples>"
    url = serve(llm=FakeLLM([reply]))
    with RemoteBank(url) as bank:
        lesson = bank.add_lesson("Prefer the identity operator for singletons.")
        plan = bank.expand(dry_run=True).plan
        assert plan.lesson_ids == [lesson.id] and plan.model == "fake:scripted" and plan.input_tokens > 0
        report = bank.expand([lesson.id])
        assert report.expanded == {lesson.id: ["if result == None:", "while node != None: pass"]}
        assert "Example: if result == None:" in (bank.get_lesson(lesson.id).learned_from or "")
        with pytest.raises(InputError):
            bank.expand(lesson.id)  # type: ignore[arg-type]
        with pytest.raises(NotFoundError):
            bank.expand(["les_missing"])
