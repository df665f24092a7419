"""The record route's light path (:mod:`lessonbank.server.record_path`) answers as the FastAPI route does.

Every request below is sent twice over one app and one bank: through the app (where the light path
takes records) and straight to FastAPI's stack (the route as it always answered). Statuses, JSON and
the headers a client reads must be the same; the light path must itself have written the records it
accepted, and written nothing for a request it refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.types import Receive, Scope, Send

from lessonbank.llm.fake import FakeLLM
from lessonbank.models import NAMESPACE_MAX_CHARS
from lessonbank.server.app import create_app
from lessonbank.server.auth import KeyStore
from lessonbank.settings import Settings

LOCAL = "http://127.0.0.1"
EPISODES = "/api/v1/ns/{namespace}/episodes"
GOOD = {"episode": {"task": "build the wheel", "status": "failure", "error": "missing header"}}


@dataclass
class Pair:
    """One app reached two ways: ``light`` (as served) and ``route`` (FastAPI's stack only)."""

    app: FastAPI
    light: TestClient
    route: TestClient
    written: list[str]  # ids of the episodes the light path itself wrote

    def both(self, method: str, url: str, **options: Any) -> tuple[Any, Any]:
        return self.light.request(method, url, **options), self.route.request(method, url, **options)


def make_pair(tmp_path: Path, keys: KeyStore | None = None, **options: Any) -> Iterator[Pair]:
    settings = Settings(home=tmp_path / "home", db=f"sqlite:///{tmp_path / 'bank.db'}")
    app = create_app(settings, keys=keys, worker=False, embedder="hash", llm=FakeLLM([]), **options)
    assert app.record_path is not None  # type: ignore[attr-defined]
    written: list[str] = []
    act = app.record_path.act  # type: ignore[attr-defined]

    def counted(*arguments: Any) -> Any:
        episode = act(*arguments)
        written.append(episode.id)
        return episode

    app.record_path.act = counted  # type: ignore[attr-defined]

    async def route_only(scope: Scope, receive: Receive, send: Send) -> None:
        await FastAPI.__call__(app, scope, receive, send)

    with TestClient(app, base_url=LOCAL) as light:
        yield Pair(app, light, TestClient(route_only, base_url=LOCAL), written)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    yield from make_pair(tmp_path)


def same(light: Any, route: Any) -> None:
    """The two answers are the same to a client: status, JSON body and the headers it reads."""
    assert light.status_code == route.status_code, (light.text, route.text)
    assert light.headers.get("content-type") == route.headers.get("content-type")
    assert light.headers.get("www-authenticate") == route.headers.get("www-authenticate")
    assert light.json() == route.json()


def without_ids(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in answer.items() if key not in ("id", "created_at")}


def test_a_record_is_answered_by_the_light_path_as_by_the_route(pair: Pair) -> None:
    url = EPISODES.format(namespace="default")
    light, route = pair.both("POST", url, json=GOOD)
    assert light.status_code == route.status_code == 201
    assert light.headers["content-type"] == route.headers["content-type"] == "application/json"
    assert without_ids(light.json()) == without_ids(route.json())
    assert pair.written == [light.json()["id"]]
    stored = pair.light.get(f"/api/v1/ns/default/records/{light.json()['id']}").json()["episode"]
    assert stored == light.json()  # what the client got is what was stored
    # A body with every field the route reads, a charset and context ids: the same episode back.
    full = {
        "episode": {
            "id": "ep_given",
            "task": "deploy the service",
            "task_type": "ops",
            "agent": "bot",
            "status": "partial",
            "reward": 0.5,
            "tags": ["Deploy", "ops"],
            "actions": [{"tool": "kubectl", "args": ["apply"]}],
            "created_at": "2026-01-02T03:04:05Z",
        },
        "context_ids": [],
    }
    headers = {"content-type": "application/json; charset=utf-8"}
    light = pair.light.post(url, content=json.dumps(full), headers=headers)
    other = {**full, "episode": {**full["episode"], "id": "ep_b"}}
    route = pair.route.post(url, content=json.dumps(other), headers=headers)
    assert light.status_code == route.status_code == 201
    assert {**light.json(), "id": "ep_b"} == route.json()
    assert pair.written[-1] == "ep_given"
    # Recording the same id again is a repeat: the stored episode, nothing written twice.
    again = pair.light.post(url, content=json.dumps(full), headers=headers)
    assert again.status_code == 201 and again.json() == light.json()
    assert pair.light.get("/api/v1/ns/default/stats").json()["episodes"] == 4


BAD_BODIES: list[tuple[str, dict[str, str], bytes]] = [
    ("empty body", {"content-type": "application/json"}, b""),
    ("not JSON", {"content-type": "application/json"}, b"{'episode': "),
    ("JSON, not an object", {"content-type": "application/json"}, b"[1, 2]"),
    ("empty task", {"content-type": "application/json"}, b'{"episode": {"task": ""}}'),
    ("reward out of range", {"content-type": "application/json"}, b'{"episode": {"task": "x", "reward": 7}}'),
    ("unknown field", {"content-type": "application/json"}, b'{"episode": {"task": "x"}, "surprise": 1}'),
    ("no episode", {"content-type": "application/json"}, b'{"context_ids": []}'),
    ("bad status", {"content-type": "application/json"}, b'{"episode": {"task": "x", "status": "meh"}}'),
    (
        "too many tags",
        {"content-type": "application/json"},
        json.dumps(GOOD).encode()[:-2] + b', "tags": 5}}',
    ),
    ("not UTF-8", {"content-type": "application/json"}, b'{"episode": {"task": "\xff\xfe"}}'),
    ("no content type", {}, json.dumps(GOOD).encode()),
    ("text content type", {"content-type": "text/plain"}, json.dumps(GOOD).encode()),
    ("a JSON suffix type", {"content-type": "application/vnd.lessonbank+json"}, json.dumps(GOOD).encode()),
]


@pytest.mark.parametrize(("case", "headers", "content"), BAD_BODIES, ids=[case for case, *_ in BAD_BODIES])
def test_a_body_the_light_path_does_not_take_is_answered_by_the_route(
    pair: Pair, case: str, headers: dict[str, str], content: bytes
) -> None:
    light, route = pair.both("POST", EPISODES.format(namespace="default"), content=content, headers=headers)
    if route.status_code == 201:  # a type the route reads as JSON too: each wrote its own episode
        assert light.status_code == 201 and without_ids(light.json()) == without_ids(route.json())
    else:
        same(light, route)
    assert pair.written == []  # the light path wrote nothing: what was written, the route wrote
    if light.status_code == 422:
        assert light.json()["error"]["code"] == "invalid_input"


def test_namespaces_are_checked_as_on_the_route(pair: Pair) -> None:
    for namespace in ("%20", "x" * (NAMESPACE_MAX_CHARS + 1), "a%01b", "a%E2%80%8Bb"):
        light, route = pair.both("POST", EPISODES.format(namespace=namespace), json=GOOD)
        same(light, route)
        assert light.status_code == 422
    # An episode naming another namespace than the path's: the bank refuses it, in the same words.
    other = {"episode": {**GOOD["episode"], "namespace": "team-b"}}
    light, route = pair.both("POST", EPISODES.format(namespace="default"), json=other)
    same(light, route)
    assert light.status_code == 422 and light.json()["error"]["field"] == "namespace"
    assert pair.written == []
    # Another namespace's episode id is not taken over.
    taken = {"episode": {**GOOD["episode"], "id": "ep_taken"}}
    assert pair.light.post(EPISODES.format(namespace="team-a"), json=taken).status_code == 201
    light, route = pair.both("POST", EPISODES.format(namespace="default"), json=taken)
    same(light, route)
    assert light.status_code == 422


def test_other_methods_and_paths_go_to_the_app(pair: Pair) -> None:
    url = EPISODES.format(namespace="default")
    for method, path in (("GET", url), ("PUT", url), ("POST", url + "/"), ("POST", url + "/x")):
        light, route = pair.both(method, path, json=GOOD, follow_redirects=False)
        assert light.status_code == route.status_code != 201
    assert pair.written == []


@dataclass
class Keys:
    store: KeyStore
    tokens: dict[str, str]


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[Pair, Keys]]:
    keys = KeyStore(tmp_path / "keys.json")
    tokens = {}
    for name, role, namespaces in (
        ("reader", "read", ["team-a"]),
        ("writer", "write", ["team-a"]),
        ("elsewhere", "admin", ["team-b"]),
        ("everywhere", "write", ["*"]),
        ("gone", "admin", ["*"]),
    ):
        key, tokens[name] = keys.create(name, role=role, namespaces=namespaces)
        if name == "gone":
            keys.revoke(key.id)
    for pair in make_pair(tmp_path, keys):
        yield pair, Keys(keys, tokens)


def test_keys_are_checked_by_the_same_rule_as_on_the_route(keyed: tuple[Pair, Keys]) -> None:
    pair, keys = keyed
    url = EPISODES.format(namespace="team-a")
    cases: list[tuple[dict[str, str], int]] = [
        ({}, 401),
        ({"Authorization": "Bearer lbk_nothing_known"}, 401),
        ({"Authorization": f"Bearer {keys.tokens['gone']}"}, 401),
        ({"X-API-Key": keys.tokens["reader"]}, 403),
        ({"Authorization": f"Bearer {keys.tokens['elsewhere']}"}, 403),
    ]
    for headers, status in cases:
        light, route = pair.both("POST", url, json=GOOD, headers=headers)
        same(light, route)
        assert light.status_code == status
    assert pair.written == []
    for name in ("writer", "everywhere"):
        for headers in ({"Authorization": f"Bearer {keys.tokens[name]}"}, {"X-API-Key": keys.tokens[name]}):
            light, route = pair.both("POST", url, json=GOOD, headers=headers)
            assert light.status_code == route.status_code == 201
    assert len(pair.written) == 4
    # A key revoked while the server runs is refused at once, on the light path too.
    writer = next(key for key in keys.store.all() if key.name == "writer")
    keys.store.revoke(writer.id)
    light, route = pair.both("POST", url, json=GOOD, headers={"X-API-Key": keys.tokens["writer"]})
    same(light, route)
    assert light.status_code == 401 and len(pair.written) == 4


def test_a_key_file_gone_while_serving_refuses_records_with_503(keyed: tuple[Pair, Keys]) -> None:
    pair, keys = keyed
    keys.store.path.unlink()
    light, route = pair.both(
        "POST", EPISODES.format(namespace="team-a"), json=GOOD, headers={"X-API-Key": keys.tokens["writer"]}
    )
    same(light, route)
    assert light.status_code == 503 and pair.written == []


def test_the_body_limit_and_the_host_guard_hold_on_the_light_path(tmp_path: Path) -> None:
    for pair in make_pair(tmp_path, max_body_bytes=200):
        url = EPISODES.format(namespace="default")
        big = {"episode": {"task": "x" * 300}}
        light, route = pair.both("POST", url, json=big)
        same(light, route)
        assert light.status_code == 413
        # Streamed without a Content-Length: refused once the limit is passed.
        half = json.dumps(big).encode()[:150]
        light, route = (
            client.post(url, content=iter([half, half]), headers={"content-type": "application/json"})
            for client in (pair.light, pair.route)
        )
        same(light, route)
        assert light.status_code == 413
        small = pair.light.post(
            url,
            content=iter([b'{"episode": ', b'{"task": "streamed"}}']),
            headers={"content-type": "application/json"},
        )
        assert small.status_code == 201 and small.json()["task"] == "streamed"
        # An open server answers only requests addressed to this machine.
        light, route = pair.both("POST", url, json=GOOD, headers={"host": "evil.example"})
        same(light, route)
        assert light.status_code == 403
        assert pair.written == [small.json()["id"]]


def test_the_openapi_schema_still_lists_the_record_route(pair: Pair) -> None:
    schema = pair.light.get("/openapi.json").json()
    operation = schema["paths"][EPISODES]["post"]
    assert "201" in operation["responses"]
    assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("RecordRequest")
