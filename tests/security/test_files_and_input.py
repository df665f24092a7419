"""Files lessonbank writes and input it takes, from a security review.

Files: ``export -o`` replaces a regular file (or a link's target) whole, keeping its mode; it writes
into a FIFO or a device instead of replacing it (as root, ``-o /dev/null`` must not turn the system
file into world-readable lessons); a new export, an SQLite bank (with its ``-wal`` and ``-shm``) and
the home folder are private. Input: a tag too long, an offset past every store's integers, an
unknown job status, a namespace holding a control character and an id longer than the routes read
are each the caller's 422 (or ConfigError), never a 500 that drops the kept-alive connection, and a
namespace is never checked as one name and stored as another.
"""

from __future__ import annotations

import http.client
import json
import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from lessonbank import LessonBank
from lessonbank.errors import ConfigError
from lessonbank.models import ID_MAX_CHARS, TAG_MAX_CHARS, Episode
from lessonbank.server.app import create_app
from lessonbank.settings import Settings
from tests.contract.conftest import backend, store_url  # noqa: F401 (the contract suite's stores)
from tests.threaded_server import serving

NS = "/api/v1/ns/default"
BAD_NAMESPACES = ["a\x00b", "a\x01b", "a\nb", "a\x1bb", "a\u200bb", "a\x7fb"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def private_umask() -> Iterator[None]:
    """A common umask (022), so a file made 0644 by default would show it."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


# ---------------------------------------------------------------------------------------------- export


@pytest.fixture
def filled(tmp_path: Path) -> Iterator[LessonBank]:
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}") as bank:
        bank.add_lesson("rotate the deploy key before it expires", tags=["ops"])
        yield bank


def _read_fifo_while(fifo: Path, write: Callable[[], Any]) -> bytes:
    """What ``write`` put into ``fifo``, read by another thread.

    A descriptor open read-write (Linux never blocks on it) lets the reader open at once; closing it
    once ``write`` returned gives the reader its end of file. An export that replaced the FIFO instead
    of writing into it leaves the reader with nothing."""
    keeper = os.open(fifo, os.O_RDWR)
    reader = open(fifo, "rb")  # noqa: SIM115 (read and closed by the thread)
    got: list[bytes] = []

    def read() -> None:
        with reader:
            got.append(reader.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        write()
    finally:
        os.close(keeper)
        thread.join(60)
    assert not thread.is_alive(), "the FIFO's reader never saw the end of the export"
    return got[0]


def test_export_into_a_fifo_streams_and_leaves_the_fifo(filled: LessonBank, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o600)
    data = _read_fifo_while(fifo, lambda: filled.export_to(fifo, "jsonl"))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [json.loads(line)["content"] for line in data.splitlines()] == [
        "rotate the deploy key before it expires"
    ]


def test_cli_export_into_a_fifo_streams(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("add", "rotate the deploy key before it expires")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o600)
    data = _read_fifo_while(fifo, lambda: cli("export", "-f", "jsonl", "-o", str(fifo)))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert b"rotate the deploy key" in data


def test_export_replaces_a_regular_file_keeping_its_mode(filled: LessonBank, tmp_path: Path) -> None:
    backup = tmp_path / "backup.json"
    backup.write_text("the last backup\n")
    os.chmod(backup, 0o640)
    filled.export_to(backup)
    assert _mode(backup) == 0o640 and stat.S_ISREG(os.lstat(backup).st_mode)
    assert json.loads(backup.read_text())[0]["content"] == "rotate the deploy key before it expires"
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "backup.json",
        "bank.db",
        "bank.db-shm",
        "bank.db-wal",
    ]


def test_export_through_a_link_replaces_its_target_and_keeps_the_link(
    filled: LessonBank, tmp_path: Path
) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "backup.json"
    target.write_text("the last backup\n")
    os.chmod(target, 0o604)
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    filled.export_to(link)
    assert link.is_symlink() and link.resolve() == target
    assert _mode(target) == 0o604 and "rotate the deploy key" in target.read_text()
    assert [path.name for path in (tmp_path / "real").iterdir()] == ["backup.json"]


def test_a_new_export_is_private(cli, tmp_path: Path, private_umask: None) -> None:  # type: ignore[no-untyped-def]
    cli("add", "rotate the deploy key before it expires")
    cli("export", "-o", str(tmp_path / "new.json"))
    assert _mode(tmp_path / "new.json") == 0o600


def test_export_dash_is_stdout_and_a_folder_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli("add", "rotate the deploy key before it expires")
    proc = cli("export", "-f", "jsonl", "-o", "-")
    assert b"rotate the deploy key" in proc.stdout
    assert not (Path.cwd() / "-").exists()
    refused = cli("export", "-o", str(tmp_path), ok=False)
    assert refused.returncode == 2 and b"directory" in refused.stderr and b"Traceback" not in refused.stderr


def test_export_to_a_character_device_writes_into_it(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A device is written into, never replaced: first a device of this test's own (as root, a null
    device made with mknod; else a FIFO), and only once that held, the system's /dev/null."""
    cli("add", "rotate the deploy key before it expires")
    own = tmp_path / "null"
    try:
        os.mknod(own, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        os.mkfifo(own, 0o600)
        _read_fifo_while(own, lambda: cli("export", "-o", str(own)))
        assert stat.S_ISFIFO(os.lstat(own).st_mode)
    else:
        os.chmod(own, 0o666)  # mknod's mode went through the umask
        cli("export", "-o", str(own))
        assert stat.S_ISCHR(os.lstat(own).st_mode) and _mode(own) == 0o666
    null = Path("/dev/null")
    if not os.access(null, os.W_OK) or not stat.S_ISCHR(os.stat(null).st_mode):
        pytest.skip("no writable /dev/null character device")
    before = os.stat(null)
    cli("export", "-o", str(null))
    after = os.stat(null)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino and after.st_mode == before.st_mode


# ---------------------------------------------------------------------------------------------- private files


def test_the_home_folder_and_an_sqlite_bank_are_private(tmp_path: Path, private_umask: None) -> None:
    home = Path(os.environ["LESSONBANK_HOME"])
    assert not home.exists()
    with LessonBank() as bank:  # the default bank: $LESSONBANK_HOME/lessons.db
        bank.add_lesson("rotate the deploy key before it expires")
        made = [home / name for name in ("lessons.db", "lessons.db-wal", "lessons.db-shm")]
        assert _mode(home) == 0o700
        assert {path.name: _mode(path) for path in made} == {path.name: 0o600 for path in made}
    elsewhere = tmp_path / "banks" / "team" / "bank.db"
    with LessonBank(f"sqlite:///{elsewhere}") as bank:
        bank.add_lesson("rotate the deploy key before it expires")
        assert _mode(elsewhere) == 0o600 and _mode(Path(f"{elsewhere}-wal")) == 0o600
        assert _mode(tmp_path / "banks") == 0o700 and _mode(elsewhere.parent) == 0o700
    os.chmod(elsewhere, 0o640)  # a file or folder that exists is the user's: it keeps its mode
    os.chmod(elsewhere.parent, 0o750)
    with LessonBank(f"sqlite:///{elsewhere}") as bank:
        assert len(bank.lessons()) == 1
    assert _mode(elsewhere) == 0o640 and _mode(elsewhere.parent) == 0o750


# ---------------------------------------------------------------------------------------------- REST input


def make_app(tmp_path: Path, **options: Any) -> FastAPI:
    settings = Settings(home=tmp_path / "home", db=f"sqlite:///{tmp_path / 'bank.db'}")
    return create_app(settings, worker=False, **options)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    # base_url: an open server (no keys) answers only requests addressed to this machine.
    with TestClient(
        make_app(tmp_path), base_url="http://127.0.0.1", raise_server_exceptions=False
    ) as test_client:
        yield test_client


def _refused(response: Any, field: str) -> str:
    assert response.status_code == 422, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "invalid_input" and field in (error["field"] or ""), error
    return str(error["message"])


def test_a_tag_too_long_is_422_on_add_and_edit(client: TestClient) -> None:
    long_tag = "x" * (TAG_MAX_CHARS + 1)
    message = _refused(client.post(f"{NS}/lessons", json={"text": "rotate keys", "tags": [long_tag]}), "tags")
    assert f"the limit is {TAG_MAX_CHARS}" in message
    lesson = client.post(f"{NS}/lessons", json={"text": "rotate keys", "tags": ["x" * TAG_MAX_CHARS]})
    assert lesson.status_code == 201 and lesson.json()["tags"][-1] == "x" * TAG_MAX_CHARS
    lesson_id = lesson.json()["id"]
    _refused(client.patch(f"{NS}/lessons/{lesson_id}", json={"tags": [long_tag]}), "tags")
    # Measured as the bank measures it: trimmed and lowercased first.
    edited = client.patch(f"{NS}/lessons/{lesson_id}", json={"tags": [f"  {'Y' * TAG_MAX_CHARS}  "]})
    assert edited.status_code == 200 and edited.json()["tags"] == ["y" * TAG_MAX_CHARS]


def test_an_offset_past_every_store_is_422(client: TestClient) -> None:
    _refused(client.get(f"{NS}/lessons", params={"offset": "100000000000000000000"}), "offset")
    _refused(client.get(f"{NS}/lessons", params={"offset": str(2**63)}), "offset")
    assert client.get(f"{NS}/lessons", params={"offset": "1000"}).json() == []


def test_an_unknown_job_status_is_422(client: TestClient) -> None:
    _refused(client.get(f"{NS}/jobs", params={"status": "bogus"}), "status")
    _refused(client.get(f"{NS}/jobs", params={"status": ["dead", "bogus"]}), "status")
    assert client.get(f"{NS}/jobs", params={"status": ["dead", "done"]}).json() == []


@pytest.mark.parametrize("namespace", BAD_NAMESPACES)
def test_a_namespace_with_a_control_character_is_422(client: TestClient, namespace: str) -> None:
    quoted = quote(namespace, safe="")
    base = f"/api/v1/ns/{quoted}"
    _refused(
        client.post(f"{base}/lessons", json={"text": "planted in a namespace nobody named"}), "namespace"
    )
    _refused(client.get(f"{base}/lessons"), "namespace")
    if "\x00" in namespace:  # nothing landed where stored text, which drops NUL, would have put it
        assert client.get(f"/api/v1/ns/{namespace.replace(chr(0), '')}/lessons").json() == []


def test_episode_ids_as_long_as_the_routes_read_and_no_longer(client: TestClient) -> None:
    longest = "ep_" + "x" * (ID_MAX_CHARS - 3)
    recorded = client.post(f"{NS}/episodes", json={"episode": {"id": longest, "task": "deploy"}})
    assert recorded.status_code == 201, recorded.text
    assert client.get(f"{NS}/records/{longest}").json()["episode"]["id"] == longest
    too_long = {"episode": {"id": longest + "x", "task": "deploy"}}
    _refused(client.post(f"{NS}/episodes", json=too_long), "episode.id")
    _refused(client.post(f"{NS}/episodes", json={"episode": {"id": "x" * 10_000, "task": "deploy"}}), "id")
    goal = {"episode": {"task": "deploy", "goal_id": "g" * (ID_MAX_CHARS + 1)}}
    _refused(client.post(f"{NS}/episodes", json=goal), "goal_id")


# ---------------------------------------------------------------------------------------------- a real server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, FastAPI]]:
    app = make_app(tmp_path)
    with serving(app, log_level="critical") as base:
        yield int(base.rsplit(":", 1)[1]), app


def test_bad_requests_keep_the_connection_alive(served: tuple[int, FastAPI]) -> None:
    port, _ = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.connect()
        local = conn.sock.getsockname()
        bad = [
            ("POST", f"{NS}/lessons", {"text": "rotate keys", "tags": ["x" * (TAG_MAX_CHARS + 1)]}),
            ("GET", f"{NS}/lessons?offset=100000000000000000000", None),
            ("GET", f"{NS}/jobs?status=bogus", None),
            ("GET", "/api/v1/ns/a%00b/lessons", None),
            ("POST", f"{NS}/episodes", {"episode": {"id": "x" * 10_000, "task": "deploy"}}),
        ]
        statuses = []
        for method, path, payload in bad:
            body = None if payload is None else json.dumps(payload)
            headers = {"Content-Type": "application/json"} if body else {}
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            statuses.append(response.status)
            # The next request goes over the same connection: the server did not drop it.
            conn.request("GET", f"{NS}/stats")
            ok = conn.getresponse()
            ok.read()
            assert ok.status == 200 and conn.sock is not None and conn.sock.getsockname() == local, path
        assert statuses == [422] * len(bad)
    finally:
        conn.close()


def test_mcp_tool_refuses_a_namespace_with_a_control_character(served: tuple[int, FastAPI]) -> None:
    port, app = served

    async def call() -> list[tuple[bool, str]]:
        async with (
            create_mcp_http_client() as http,
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            results = []
            for namespace in ("a\x00b", "a\nb"):
                result = await session.call_tool(
                    "add_lesson", {"text": "planted lesson", "namespace": namespace}
                )
                results.append((result.is_error, result.content[0].text))  # type: ignore[union-attr]
            return results

    for is_error, text in anyio.run(call):
        assert is_error and "invalid_input" in text and "control character" in text, text
    assert app.state.banks.get("ab").lessons() == []


# ---------------------------------------------------------------------------------------------- library and CLI


@pytest.mark.parametrize("namespace", ["a\x00b", "a\tb", "team\u202e", " ", "n" * 201])
def test_a_bank_refuses_a_namespace_it_could_not_keep_apart(namespace: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="namespace"):
        LessonBank(f"sqlite:///{tmp_path / 'bank.db'}", namespace=namespace)
    with pytest.raises(ConfigError, match="LESSONBANK_NAMESPACE"):
        Settings(namespace=namespace)


def test_cli_refuses_a_namespace_with_a_control_character(cli) -> None:  # type: ignore[no-untyped-def]
    for args, env in ((["--namespace", "a\x1bb"], None), ([], {"LESSONBANK_NAMESPACE": "a\x01b"})):
        proc = cli(*args, "add", "planted lesson", ok=False, extra_env=env)
        assert (
            proc.returncode != 0 and b"control character" in proc.stderr and b"Traceback" not in proc.stderr
        )
    assert b"no lessons" in cli("--namespace", "ab", "lessons").stdout


def test_namespace_and_id_rules_hold_on_every_store(store_url: str) -> None:  # noqa: F811
    for namespace in ("a\x00b", "a\nb"):
        with pytest.raises(ConfigError, match="control character"):
            LessonBank(store_url, namespace=namespace, worker=False)
    longest = "ep_" + "y" * (ID_MAX_CHARS - 3)
    with LessonBank(store_url, worker=False) as bank:
        bank.record(Episode(id=longest, task="deploy the service", goal_id="g" * ID_MAX_CHARS))
        assert bank.show(longest)["episode"]["goal_id"] == "g" * ID_MAX_CHARS
        for fields in (
            {"id": longest + "y"},
            {"goal_id": "g" * (ID_MAX_CHARS + 1)},
            {"loop_id": "l" * (ID_MAX_CHARS + 1)},
        ):
            with pytest.raises(ValueError, match="at most 200 characters"):
                bank.record({"task": "deploy the service", **fields})
        imported = bank.import_lessons([{"id": "les_" + "z" * ID_MAX_CHARS, "content": "an imported lesson"}])
        assert imported["added"] == 0 and bank.lessons() == []
