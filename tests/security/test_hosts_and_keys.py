"""An open server answers only requests addressed to this machine; a closed one stays closed when its
key file is emptied, deleted or broken under it; a waiting flush holds no request thread; a key file
of the wrong shape is a clear error; every write path quarantines an untrusted agent's lesson."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from lessonbank import LessonBank
from lessonbank.llm import FakeLLM
from lessonbank.models import Episode
from lessonbank.server.app import create_app
from lessonbank.server.auth import KeyStore
from lessonbank.server.dashboard import CSRF_TOKEN
from lessonbank.settings import Settings
from tests.contract.conftest import backend, store_url  # noqa: F401 (fixtures)
from tests.threaded_server import free_port, serving

NS = "/api/v1/ns/default"
LESSON = {"text": "pin the toolchain version in CI"}


def settings_of(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", db=f"sqlite:///{tmp_path / 'bank.db'}")


@pytest.fixture
def open_app(tmp_path: Path) -> Any:
    return create_app(settings_of(tmp_path), worker=False)


def lesson_count(app: Any) -> int:
    return len(app.state.banks.get("default").lessons(limit=1000))


# ---------------------------------------------------------------------------------------------- Host


def test_an_open_server_refuses_a_foreign_host_on_every_route(open_app: Any) -> None:
    with TestClient(open_app, base_url="http://127.0.0.1:18799", follow_redirects=False) as client:
        added = client.post(f"{NS}/lessons", json=LESSON)
        assert added.status_code == 201
        lesson_id = added.json()["id"]
        evil = {"Host": "evil.example:18799"}
        for method, path, extra in (
            ("POST", f"{NS}/lessons", {"json": LESSON}),
            ("DELETE", f"{NS}/lessons/{lesson_id}", {}),
            ("GET", f"{NS}/lessons", {}),
            ("GET", "/login", {}),
            ("GET", "/", {}),
            ("POST", f"/lessons/{lesson_id}/forget", {"data": {"csrf": CSRF_TOKEN, "confirm": "yes"}}),
            ("POST", "/mcp", {"json": {"jsonrpc": "2.0", "id": 1, "method": "ping"}}),
            ("GET", "/openapi.json", {}),
        ):
            answer = client.request(method, path, headers=evil, **extra)
            assert answer.status_code == 403, (method, path, answer.text[:200])
            assert answer.json()["error"]["code"] == "forbidden"
            assert CSRF_TOKEN not in answer.text  # the sign-in page's token is not handed out
        assert lesson_count(open_app) == 1


def test_an_open_server_refuses_a_page_of_a_foreign_origin(open_app: Any) -> None:
    with TestClient(open_app, base_url="http://127.0.0.1:18799", follow_redirects=False) as client:
        lesson_id = client.post(f"{NS}/lessons", json=LESSON).json()["id"]
        form = {"csrf": CSRF_TOKEN, "confirm": "yes", "ns": "default"}
        foreign = client.post(
            f"/lessons/{lesson_id}/forget", data=form, headers={"Origin": "http://evil.example:18799"}
        )
        assert foreign.status_code == 403
        refused = client.post(f"{NS}/lessons", json=LESSON, headers={"Origin": "http://evil.example"})
        assert refused.status_code == 403
        assert lesson_count(open_app) == 1
        done = client.post(
            f"/lessons/{lesson_id}/forget", data=form, headers={"Origin": "http://127.0.0.1:18799"}
        )
        assert done.status_code == 303 and lesson_count(open_app) == 0


@pytest.mark.parametrize(
    "host", ["127.0.0.1:18799", "localhost:18799", "[::1]:18799", "LOCALHOST", "127.0.0.1"]
)
def test_an_open_server_answers_its_loopback_names(open_app: Any, host: str) -> None:
    with TestClient(open_app) as client:
        assert client.post(f"{NS}/lessons", json=LESSON, headers={"Host": host}).status_code == 201


def test_the_bound_address_and_allowed_names_are_answered(tmp_path: Path) -> None:
    app = create_app(
        settings_of(tmp_path), worker=False, bound_host="10.1.2.3", allow_hosts=["Bank.Internal"]
    )
    with TestClient(app) as client:
        for host in ("10.1.2.3:8765", "bank.internal", "bank.internal:8765"):
            assert client.get(f"{NS}/lessons", headers={"Host": host}).status_code == 200, host
        for host in ("10.1.2.4", "evil.bank.internal", "testserver"):
            assert client.get(f"{NS}/lessons", headers={"Host": host}).status_code == 403, host


def test_a_keyed_server_answers_any_host_with_a_key(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.json")
    _, token = keys.create("agent", role="write")
    app = create_app(settings_of(tmp_path), keys=keys, worker=False)
    with TestClient(app, base_url="http://lessons.example.com") as client:
        assert client.post(f"{NS}/lessons", json=LESSON).status_code == 401
        added = client.post(f"{NS}/lessons", json=LESSON, headers={"Authorization": f"Bearer {token}"})
        assert added.status_code == 201


@pytest.mark.slow
def test_serve_allow_host_adds_a_name(tmp_path: Path) -> None:
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("LESSONBANK_")}
    env["LESSONBANK_HOME"] = str(tmp_path / "home")
    argv = [sys.executable, "-m", "lessonbank.cli", "--db", f"sqlite:///{tmp_path / 'bank.db'}"]
    argv += ["serve", "--port", str(port), "--no-worker", "--allow-host", "bank.local"]
    server = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                httpx.get(f"{url}/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None, "lessonbank serve exited"
                time.sleep(0.1)
        assert (
            httpx.post(f"{url}{NS}/lessons", json=LESSON, headers={"Host": "bank.local"}).status_code == 201
        )
        assert (
            httpx.post(f"{url}{NS}/lessons", json=LESSON, headers={"Host": "evil.example"}).status_code == 403
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


# ---------------------------------------------------------------------------------------------- keys


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[TestClient, KeyStore, str]]:
    keys = KeyStore(tmp_path / "keys.json")
    _, token = keys.create("admin", role="admin")
    app = create_app(settings_of(tmp_path), keys=keys, worker=False)
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        yield client, keys, token


def _all_refused(client: TestClient, token: str) -> None:
    bearer = {"Authorization": f"Bearer {token}"}
    for headers in ({}, bearer):
        assert client.get(f"{NS}/lessons", headers=headers).status_code == 503
        assert client.post(f"{NS}/lessons", json=LESSON, headers=headers).status_code == 503
        assert client.delete(f"{NS}/lessons/les_x", headers=headers).status_code == 503
        assert client.get("/", headers=headers).status_code == 503
        mcp = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)
        assert mcp.status_code == 503
    login = client.post("/login", data={"csrf": CSRF_TOKEN, "key": token})
    assert login.status_code == 503


def test_emptying_the_key_file_does_not_open_a_running_server(
    keyed: tuple[TestClient, KeyStore, str], caplog: pytest.LogCaptureFixture
) -> None:
    client, keys, token = keyed
    bearer = {"Authorization": f"Bearer {token}"}
    assert client.get(f"{NS}/lessons", headers=bearer).status_code == 200
    saved = keys.path.read_text("utf-8")
    keys.path.write_text(json.dumps({"keys": []}), "utf-8")
    with caplog.at_level(logging.ERROR, logger="lessonbank.server"):
        _all_refused(client, token)
    assert any("holds no key" in record.getMessage() for record in caplog.records)
    answer = client.get(f"{NS}/lessons")
    assert "holds no key" in answer.json()["error"]["message"]
    keys.path.write_text(saved, "utf-8")  # restored: the key works again, and no key is still 401
    assert client.get(f"{NS}/lessons", headers=bearer).status_code == 200
    assert client.get(f"{NS}/lessons").status_code == 401


def test_deleting_or_breaking_the_key_file_does_not_open_a_running_server(
    keyed: tuple[TestClient, KeyStore, str],
) -> None:
    client, keys, token = keyed
    keys.path.unlink()
    _all_refused(client, token)
    assert "is missing" in client.delete(f"{NS}/lessons/les_x").json()["error"]["message"]
    keys.path.write_text("{not json", "utf-8")
    _all_refused(client, token)
    keys.path.write_text(json.dumps({"keys": [{"id": 1}]}), "utf-8")
    _all_refused(client, token)


def test_a_store_that_saw_a_key_stays_closed(tmp_path: Path) -> None:
    started_open = KeyStore(tmp_path / "keys.json")
    assert started_open.principal(None) is not None and not started_open.required()
    key, _ = started_open.create("ci", role="read")
    started_open.revoke(key.id)
    assert started_open.principal(None) is None  # revoking the last key leaves it closed
    started_open.path.unlink()
    from lessonbank.errors import ConfigError

    with pytest.raises(ConfigError, match="is missing"):
        started_open.principal(None)
    assert started_open.required()
    assert KeyStore(tmp_path / "keys.json").principal(None) is not None  # a new start with no file: open
    KeyStore(tmp_path / "keys.json").create("ci", role="read")
    restarted = KeyStore(tmp_path / "keys.json")  # started with a key on file, none asked for yet
    (tmp_path / "keys.json").unlink()
    with pytest.raises(ConfigError, match="is missing"):
        restarted.principal(None)


@pytest.mark.parametrize(
    "content",
    [
        '{"keys": [{"id": "abc"}]}',
        '["not", "an", "object"]',
        '{"keys": {"id": "abc"}}',
        '{"keys": [{"id": "a", "name": "n", "role": "root", "namespaces": ["*"], "digest": "d", "created_at": "t"}]}',
        "{broken",
    ],
)
def test_keys_list_on_a_key_file_of_the_wrong_shape_names_the_file(
    tmp_path: Path, cli: Any, content: str
) -> None:
    home = tmp_path / "clihome"
    home.mkdir(exist_ok=True)
    (home / "keys.json").write_text(content, "utf-8")
    result = cli("keys", "list", extra_env={"LESSONBANK_HOME": str(home)}, ok=False)
    output = (result.stdout + result.stderr).decode()
    assert result.returncode != 0
    assert str(home / "keys.json") in output and "Traceback" not in output


# ---------------------------------------------------------------------------------------------- flush


def test_waiting_flushes_do_not_hold_the_request_threads(tmp_path: Path) -> None:
    """45 clients wait in /flush (no worker: the queued job never runs) while another recalls: the
    recall is answered while every flush still waits. Before, the flushes held all 40 threads of the
    server's pool and the recall waited for the first flush to time out."""
    settings = settings_of(tmp_path)
    # With a model configured the job is queued for a worker (not parked for a model), and with no
    # worker running every flush waits its whole timeout.
    with LessonBank(settings=settings, worker=False, llm=FakeLLM([])) as bank:
        bank.add_lesson("pin the toolchain version in CI")
        bank.record(Episode(task="deploy the api", status="failure", error="timeout"))
        assert bank.pending().get("queued") == 1
    app = create_app(settings, worker=False, llm=FakeLLM([]))
    answers: list[Any] = []
    with serving(app) as base:
        url = f"{base}{NS}"

        def flush() -> None:
            answers.append(httpx.post(f"{url}/flush", json={"timeout": 5}, timeout=60).json())

        waiting = [threading.Thread(target=flush) for _ in range(45)]
        for each in waiting:
            each.start()
        time.sleep(0.5)  # let them reach the server; the check below is on order, not time
        recalled = httpx.post(f"{url}/recall", json={"query": "toolchain"}, timeout=60)
        still_waiting = sum(each.is_alive() for each in waiting)
        assert recalled.status_code == 200 and len(recalled.json()) == 1
        assert still_waiting == 45 and answers == []
        for each in waiting:
            each.join()
        assert answers == [{"done": False}] * 45


def test_a_remote_flush_timeout_is_capped(tmp_path: Path) -> None:
    with TestClient(create_app(settings_of(tmp_path), worker=False), base_url="http://127.0.0.1") as client:
        assert client.post(f"{NS}/flush", json={"timeout": 3600}).status_code == 422
        assert client.post(f"{NS}/flush", json={"timeout": 0}).json() == {"done": True}


# ---------------------------------------------------------------------------------------------- write paths


def test_every_write_path_quarantines_an_untrusted_agent(store_url: str) -> None:  # noqa: F811
    """add_lesson and import (dicts and Lesson records) quarantine as reflected lessons do."""
    from lessonbank.models import Lesson

    settings = Settings(db=store_url, untrusted_agents="evilbot")
    with LessonBank(settings=settings, worker=False) as bank:
        added = bank.add_lesson("cache the wheels between CI runs", agent="evilbot")
        counts = bank.import_lessons(
            [
                {"content": "run the linter before pushing", "kind": "lesson", "agent": "evilbot"},
                Lesson(namespace="elsewhere", content="pin the base image digest", agent="evilbot"),
                {"content": "bump the lockfile weekly", "kind": "lesson", "agent": "gooder"},
            ]
        )
        assert counts["added"] == 3
        stored = {lesson.content: lesson for lesson in bank.lessons(status=["active", "quarantined"])}
        assert added.status == "quarantined"
        for text in ("run the linter before pushing", "pin the base image digest"):
            assert stored[text].status == "quarantined", text
            assert stored[text].metadata["quarantine"] == "untrusted agent evilbot"
        assert stored["bump the lockfile weekly"].status == "active"
        assert [hit.lesson.content for hit in bank.recall("linter base image lockfile", k=10)] == [
            "bump the lockfile weekly"
        ]
