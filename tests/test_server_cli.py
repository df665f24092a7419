"""`lessonbank keys` and `lessonbank serve`: keys stored hashed, scoped by namespace and role; a
server without keys binds to 127.0.0.1 only and says so."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from lessonbank.server.auth import OPEN, KeyStore


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_keys_are_hashed_scoped_and_revocable(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    assert store.principal(None) is OPEN  # no key at all: open
    key, token = store.create("ci", role="write", namespaces=["team-a"])
    assert token.startswith("lbk_") and token not in (tmp_path / "keys.json").read_text()
    assert oct((tmp_path / "keys.json").stat().st_mode & 0o777) == "0o600"
    who = store.principal(token)
    assert who is not None and who.name == "ci"
    assert who.may("team-a", "write") and who.may("team-a", "read")
    assert not who.may("team-a", "admin") and not who.may("team-b", "read")
    assert store.principal(None) is None and store.principal("lbk_nope_nope") is None
    store.revoke(key.id)
    assert store.principal(token) is None
    assert store.principal(None) is None and store.required()  # revoking the last key does not open it


def test_the_keys_commands(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    made = json.loads(
        cli_in_process(
            "keys", "create", "agent-7", "--role", "admin", "--ns", "a", "--ns", "b", "--json"
        ).stdout
    )
    assert made["role"] == "admin" and made["namespaces"] == ["a", "b"] and made["token"].startswith("lbk_")
    listed = json.loads(cli_in_process("keys", "list", "--json").stdout)
    assert [(k["id"], k["name"]) for k in listed] == [(made["id"], "agent-7")]
    assert "digest" not in listed[0] and made["token"] not in cli_in_process("keys", "list").stdout.decode()
    assert b"revoked" in cli_in_process("keys", "revoke", made["id"]).stdout
    assert json.loads(cli_in_process("keys", "list", "--json").stdout)[0]["revoked_at"]
    bad = cli_in_process("keys", "create", "x", "--role", "root", ok=False)
    assert bad.returncode != 0 and b"unknown role" in bad.stderr


def test_serve_without_keys_refuses_a_public_address(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    refused = cli_in_process("--db", f"sqlite:///{tmp_path / 'b.db'}", "serve", "--host", "0.0.0.0", ok=False)
    assert refused.returncode != 0 and b"binds to 127.0.0.1 only" in refused.stderr


@pytest.mark.slow
def test_serve_answers_on_loopback_and_requires_a_key_once_one_exists(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LESSONBANK_")}
    env["LESSONBANK_HOME"] = str(tmp_path / "home")
    store = KeyStore(tmp_path / "home" / "keys.json")
    store.create("reader", role="read", namespaces=["default"])
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "lessonbank.cli",
        "--db",
        f"sqlite:///{tmp_path / 'b.db'}",
        "serve",
        "--port",
        str(port),
    ]
    server = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)
    try:
        for _attempt in range(150):  # until the server answers (a bounded number of tries, not a timing)
            try:
                docs = httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
                time.sleep(0.2)
        else:
            pytest.fail("the server never answered")
        assert docs.status_code == 200 and docs.json()["info"]["title"] == "lessonbank"
        missing = httpx.get(f"http://127.0.0.1:{port}/api/v1/ns/default/stats", timeout=5)
        assert missing.status_code in (401, 404)  # 401 once the REST routes are mounted
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=20)
    assert b"API keys required (1 active)" in stderr
