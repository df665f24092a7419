"""Bad input, bad paths, bad URLs and bad provider replies end in one `error:` line, never a traceback;
a command that only reads works on a read-only bank and does not wait behind another process's write."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from lessonbank.errors import LLMError
from lessonbank.llm.anthropic import AnthropicChat
from lessonbank.llm.openai import OpenAIChat

DEEP = 100_000


def _clean_error(proc: subprocess.CompletedProcess[bytes], code: int, text: bytes) -> None:
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")[-2000:]
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith(b"error: ") or b"\nerror: " in proc.stderr, proc.stderr
    assert text in proc.stderr, proc.stderr


def test_deeply_nested_json_on_record(cli_in_process) -> None:  # type: ignore[no-untyped-def]
    deep = ("[" * DEEP + "]" * DEEP).encode()
    _clean_error(cli_in_process("record", stdin=deep, ok=False), 2, b"nested too deeply")
    deep_object = ('{"task": ' * DEEP + "1" + "}" * DEEP).encode()
    _clean_error(cli_in_process("record", stdin=deep_object, ok=False), 2, b"nested too deeply")


def test_deeply_nested_json_on_import(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    array = tmp_path / "deep.json"
    array.write_text("[" * DEEP + "]" * DEEP)
    _clean_error(cli_in_process("import", str(array), ok=False), 2, b"nested too deeply")
    lines = tmp_path / "deep.jsonl"
    lines.write_text('{"content": "ok lesson"}\n' + '{"a": ' * DEEP + "1" + "}" * DEEP + "\n")
    proc = cli_in_process("import", str(lines), ok=False)
    assert b"Traceback" not in proc.stderr and b"nested too deeply" in proc.stderr, proc.stderr[-2000:]


def test_export_to_a_missing_folder_or_a_folder(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cli_in_process("add", "keep backups off the database host")
    _clean_error(
        cli_in_process("export", "-o", str(tmp_path / "missing" / "x.json"), ok=False), 2, b"cannot write"
    )
    _clean_error(cli_in_process("export", "-o", str(tmp_path), ok=False), 2, b"is a directory")


def test_sqlite_path_that_cannot_be_created(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "a-file").write_text("not a folder")
    proc = cli_in_process("--db", f"sqlite:///{tmp_path / 'a-file' / 'bank.db'}", "stats", ok=False)
    _clean_error(proc, 1, b"cannot create the folder")
    proc = cli_in_process("--db", "sqlite:////proc/no-such-dir/bank.db", "stats", ok=False)
    _clean_error(proc, 1, b"cannot create the folder")


def test_redis_database_index_out_of_range(cli_in_process) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 6379)) != 0:
            pytest.skip("no Redis on 127.0.0.1:6379")
    _clean_error(
        cli_in_process("--db", "redis://127.0.0.1:6379/9999", "stats", ok=False), 1, b"database index"
    )
    _clean_error(cli_in_process("--db", "redis://127.0.0.1:6379/-1", "stats", ok=False), 1, b"database index")


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("pool_max=0", b"pool_max must be at least 1"),
        ("pool_min=-1", b"pool_min must be 0 or more"),
        ("pool_min=5&pool_max=2", b"pool_min (5) is above pool_max (2)"),
        ("retry_s=-1", b"retry_s must be 0 or more"),
        ("retry_s=nan", b"retry_s must be 0 or more"),
    ],
)
def test_postgres_pool_options_are_checked_before_connecting(cli_in_process, query: str, says: bytes) -> None:  # type: ignore[no-untyped-def]
    done = cli_in_process("--db", f"postgresql://127.0.0.1:1/x?{query}", "stats", ok=False)
    _clean_error(done, 1, says)
    assert b"unreachable" not in done.stderr  # refused before any connection attempt


def test_namespace_with_invalid_utf8(cli) -> None:  # type: ignore[no-untyped-def]
    _clean_error(cli("-n", b"team-\xff\xfe", "stats", ok=False), 2, b"namespace is not valid UTF-8")
    _clean_error(cli("stats", "--namespace", b"\xff", ok=False), 2, b"namespace is not valid UTF-8")


# -------------------------------------------------------------------- provider replies


class _Garbage(BaseHTTPRequestHandler):
    replies: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        content_type, body = self.replies.pop(0) if self.replies else ("text/html", b"<html>502</html>")
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def garbage_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


GARBAGE = [
    ("text/html", b"<html><body>502 Bad Gateway</body></html>"),
    ("application/json", b"<html>not json</html>"),
    ("application/json", b"[1, 2, 3]"),
    ("application/json", b'{"choices": "nope", "content": 7, "usage": "x"}'),
    ("application/json", b'"just a string"'),
]


@pytest.mark.parametrize("reply", GARBAGE, ids=[str(i) for i in range(len(GARBAGE))])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_garbage_provider_reply_is_a_clear_llm_error(
    garbage_server: str, provider: str, reply: tuple[str, bytes]
) -> None:
    _Garbage.replies = [reply]
    key = "sk-test-0123456789abcdef"
    llm = (
        OpenAIChat("gpt-x", base_url=garbage_server + "/v1", api_key=key)
        if provider == "openai"
        else AnthropicChat("claude-x", base_url=garbage_server, api_key=key)
    )
    with pytest.raises(LLMError, match="not a valid reply"):
        asyncio.run(llm.complete([{"role": "user", "content": "hi"}]))


# -------------------------------------------------------------------- read-only and locked banks


def _bank_with_a_lesson(folder: Path, cli) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{folder / 'bank.db'}"
    cli("--db", url, "add", "rotate the logs before the disk fills up")
    lesson_id = json.loads(cli("--db", url, "lessons", "--json").stdout)[0]["id"]
    return url, lesson_id


def _reads(url: str, lesson_id: str, cli) -> None:  # type: ignore[no-untyped-def]
    for args in (("lessons", "--json"), ("show", lesson_id), ("recall", "rotate logs", "--json")):
        # the writer never commits while it reads: a read that waited behind it would never finish
        proc = cli("--db", url, *args, ok=False)
        assert proc.returncode == 0 and b"Traceback" not in proc.stderr, (args, proc.stderr[-2000:])
        assert b"rotate the logs" in proc.stdout, args


def test_reads_do_not_wait_behind_another_process_write(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url, lesson_id = _bank_with_a_lesson(tmp_path, cli)
    writer = sqlite3.connect(tmp_path / "bank.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE lessons SET importance = importance")
    try:
        _reads(url, lesson_id, cli)
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_reads_work_on_a_read_only_bank(cli_in_process) -> None:  # type: ignore[no-untyped-def]
    folder = Path(tempfile.mkdtemp(prefix="lb-readonly-"))
    url, lesson_id = _bank_with_a_lesson(folder, cli_in_process)
    for path in folder.iterdir():
        path.chmod(0o444)
    folder.chmod(0o555)
    home = Path(tempfile.mkdtemp(prefix="lb-home-"))
    home.chmod(0o777)
    env = {key: value for key, value in os.environ.items() if not key.startswith("LESSONBANK_")}
    env["LESSONBANK_HOME"] = str(home)
    # root ignores file modes: run it without the capabilities that let it
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: file modes cannot be enforced")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
    try:
        for args in (("lessons", "--json"), ("show", lesson_id), ("recall", "rotate logs", "--json")):
            proc = subprocess.run(
                [*prefix, sys.executable, "-m", "lessonbank.cli", "--db", url, *args],
                capture_output=True,
                env=env,
                timeout=60,
                cwd=str(home),
            )
            assert proc.returncode == 0 and b"Traceback" not in proc.stderr, (args, proc.stderr[-2000:])
            assert b"rotate the logs" in proc.stdout, args
        write = subprocess.run(
            [*prefix, sys.executable, "-m", "lessonbank.cli", "--db", url, "add", "a new lesson"],
            capture_output=True,
            env=env,
            timeout=60,
            cwd=str(home),
        )
        _clean_error(write, 1, b"read-only")
    finally:
        folder.chmod(0o755)
        for path in folder.iterdir():
            path.chmod(0o644)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
