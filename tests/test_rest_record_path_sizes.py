"""An episode's size limit counts each field as the JSON it is written as: the shortcuts that spare
a record a ``json.dumps`` per plain field (None, booleans, integers, empty lists and objects) count
exactly what ``json.dumps`` writes, and an episode over the limit is still refused over REST."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lessonbank.models import EPISODE_MAX_BYTES, _json_size
from lessonbank.server.app import create_app
from lessonbank.settings import Settings

VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    7,
    -12,
    10**40,
    1.5,
    -0.0,
    [],
    {},
    [None],
    {"a": [1, True]},
    "",
    "é",
]


@pytest.mark.parametrize("value", VALUES, ids=[repr(value)[:20] for value in VALUES])
def test_a_fields_size_is_the_json_it_is_written_as(value: Any) -> None:
    expected = len(json.dumps(value).encode()) if not isinstance(value, str) else len(value.encode())
    assert _json_size(value) == expected


def test_a_record_over_the_size_limit_is_refused_with_its_reason(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", db=f"sqlite:///{tmp_path / 'bank.db'}")
    app = create_app(settings, worker=False, max_body_bytes=4 * EPISODE_MAX_BYTES)
    third = "a" * (EPISODE_MAX_BYTES // 3 + 100)
    over = {"episode": {"task": "t", "attempt": third, "output": third, "error": third}}
    with TestClient(app, base_url="http://127.0.0.1") as client:
        answer = client.post("/api/v1/ns/default/episodes", json=over)
        assert answer.status_code == 422
        assert "limit" in answer.json()["error"]["message"]
        assert client.get("/api/v1/ns/default/stats").json()["episodes"] == 0
