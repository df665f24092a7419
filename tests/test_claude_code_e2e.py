"""The real Claude Code CLI, headless, with lessonbank's hooks installed by ``lessonbank claude install``.

Claude Code (the npm package ``@anthropic-ai/claude-code``) runs ``claude -p … --output-format json``
in a temporary project and HOME, its model calls going to :class:`MessagesAPI`, a local server that
speaks the Anthropic Messages API (streamed server-sent events, tool_use blocks) with scripted
replies. Two sessions:

1. The prompt gets the lesson already in the bank (the request the model server receives carries it);
   the scripted model runs a Bash command that fails, and the failure is recorded as an episode.
2. After a scripted reflection (``FakeLLM``) on that episode, the next session's request carries the
   lesson it taught; the session's outcome is attributed to the lessons injected.

The CLI is taken from PATH, or from ``~/.cache/lessonbank-tests`` (installed there with npm on first
use). Without npm, or when npm cannot install it, the test is skipped with the reason: CI machines
keep no npm cache, so this stays a skip there rather than a failure.
"""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lessonbank import Episode, LessonBank
from lessonbank.llm import FakeLLM
from tests.npm_packages import npm_program

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "@anthropic-ai/claude-code"
LESSONBANK = Path(sys.executable).parent / "lessonbank"
NAMESPACE = "my-project"
SEEDED = "Before running ./deploy.sh export DEPLOY_ENV=staging, the deploy script exits 3 without it"
LEARNED = "Check that DEPLOY_ENV is exported before running deploy.sh against staging"
FAILING = 'echo "deploy.sh: DEPLOY_ENV is not set" >&2; exit 3'
QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    # Claude Code 2.1 connects MCP servers in the background in -p mode and may send the first request
    # without their tools; wait for them (up to 60 s: `lessonbank mcp` starts slowly on a loaded machine).
    "MCP_CONNECTION_NONBLOCKING": "false",
    "MCP_TIMEOUT": "60000",
}


def claude_cli() -> str:
    """The ``claude`` executable: on PATH, or in the test cache (npm-installed there if missing)."""
    return str(npm_program(PACKAGE, "claude"))


class MessagesAPI(ThreadingHTTPServer):
    """A local Anthropic Messages API: each request of the agent loop (one that offers tools) gets
    the next scripted reply (a list of text / tool_use blocks); every other call (a title, a quota
    check) gets a short text. Every request is kept in ``requests``; paths it does not know in
    ``unknown``, answered with an empty JSON object."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script: list[list[dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []
        self.unknown: list[str] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def loop_requests(self) -> list[dict[str, Any]]:
        return [body for body in self.requests if body.get("tools")]

    def reply_to(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        with self.lock:
            self.requests.append(body)
            if body.get("tools") and self.script:
                return self.script.pop(0)
        return [{"type": "text", "text": "ok"}]


class _Handler(BaseHTTPRequestHandler):
    server: MessagesAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.unknown.append(f"GET {self.path}")
        self._json({})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0]
        if path == "/v1/messages/count_tokens":
            self._json({"input_tokens": max(1, len(raw) // 4)})
            return
        if path != "/v1/messages":
            self.server.unknown.append(f"POST {self.path}")
            self._json({})
            return
        body = json.loads(raw)
        blocks = self.server.reply_to(body)
        stop = "tool_use" if any(block["type"] == "tool_use" for block in blocks) else "end_turn"
        message = {
            "id": f"msg_{len(self.server.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude"),
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": len(raw) // 4, "output_tokens": 1},
        }
        if not body.get("stream"):
            self._json({**message, "content": blocks, "stop_reason": stop})
            return
        events = [("message_start", {"type": "message_start", "message": {**message, "content": []}})]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
            else:
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                ),
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": index}),
            ]
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 8},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        stream = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(stream)))
        self.end_headers()
        self.wfile.write(stream)

    def _json(self, value: object) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def api() -> Iterator[MessagesAPI]:
    server = MessagesAPI()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def docs_line(prefix: str) -> str:
    """The Claude Code page's line that starts with ``prefix`` (the test runs what the docs show)."""
    page = (ROOT / "docs" / "how-to" / "claude-code.md").read_text(encoding="utf-8")
    lines = [
        line.strip()
        for block in re.findall(r"```bash\n(.*?)```", page, flags=re.S)
        for line in block.splitlines()
    ]
    (line,) = [line for line in lines if line.startswith(prefix)]
    return line


def transcript_text(body: dict[str, Any]) -> str:
    """Everything the model is shown: the system prompt and every message."""
    return json.dumps([body.get("system"), body.get("messages")])


def bash(command: str, tool_id: str) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": tool_id,
        "name": "Bash",
        "input": {"command": command, "description": "run"},
    }


class Workspace:
    """A temporary HOME (the project trusted, as a user's first interactive run leaves it), a project
    folder, a lessonbank home whose bank holds one lesson, and the ways to run both CLIs there."""

    def __init__(self, root: Path, api: MessagesAPI) -> None:
        if not LESSONBANK.exists():
            pytest.skip(f"no lessonbank command beside {sys.executable} (pip install -e . first)")
        probe = subprocess.run(
            [str(LESSONBANK), "hooks", "claude", "--help"], capture_output=True, timeout=60
        )
        if probe.returncode:
            pytest.skip("this lessonbank has no `hooks claude` command yet")
        self.claude, self.api = claude_cli(), api
        self.home, self.project, self.bank_home = root / "home", root / "project", root / "lessonbank"
        for folder in (self.home, self.project, self.bank_home):
            folder.mkdir()
        trusted = {
            "hasCompletedOnboarding": True,
            "projects": {str(self.project): {"hasTrustDialogAccepted": True}},
        }
        (self.home / ".claude.json").write_text(json.dumps(trusted))
        self.env = {
            "HOME": str(self.home),
            "PATH": "/usr/local/bin:/usr/bin:/bin",  # the hooks name lessonbank by its path
            "LESSONBANK_HOME": str(self.bank_home),
            **QUIET,
        }
        self.db = f"sqlite:///{self.bank_home / 'lessons.db'}"
        with LessonBank(self.db, namespace=NAMESPACE) as bank:
            self.seeded = bank.add_lesson(SEEDED, tags=["deploy", "staging"])

    def lessonbank(self, line: str) -> str:
        """Run a ``lessonbank …`` line (as the docs show it) in the project."""
        words = shlex.split(line)
        assert words[0] == "lessonbank", line
        done = subprocess.run(
            [str(LESSONBANK), *words[1:]],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def session(self, prompt: str, *options: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        """``claude -p PROMPT`` headless in the project; its JSON result."""
        run_env = {**self.env, **(env or {}), "ANTHROPIC_BASE_URL": self.api.url, "ANTHROPIC_API_KEY": "test"}
        command = [self.claude, *options, "-p", prompt, "--output-format", "json", "--allowedTools", "Bash"]
        done = subprocess.run(
            command, cwd=self.project, env=run_env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        return json.loads(done.stdout)

    def failed_calls(self) -> list[Episode]:
        with LessonBank(self.db, namespace=NAMESPACE) as bank:
            episodes = [
                Episode.model_validate(bank.show(d["episode_id"])["episode"]) for d in bank.decisions()
            ]
        return [episode for episode in episodes if episode.metadata.get("hook") == "PostToolUseFailure"]


@pytest.fixture
def workspace(tmp_path: Path, api: MessagesAPI) -> Workspace:
    return Workspace(tmp_path, api)


def test_claude_code_gets_the_lesson_and_its_failed_command_becomes_an_episode(
    api: MessagesAPI, workspace: Workspace
) -> None:
    workspace.lessonbank(docs_line("lessonbank claude install --project"))
    settings = json.loads((workspace.project / ".claude" / "settings.json").read_text())
    assert settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"].startswith(str(LESSONBANK))
    db, seeded = workspace.db, workspace.seeded
    session = workspace.session

    # Session 1: the seeded lesson reaches the model; its Bash command fails.
    api.script = [
        [bash(FAILING, "toolu_1")],
        [{"type": "text", "text": "The deploy failed: DEPLOY_ENV is not set."}],
    ]
    result = session("Deploy the web app to staging with ./deploy.sh")
    assert result["result"].startswith("The deploy failed"), result
    first = api.loop_requests()
    assert len(first) == 2, api.unknown
    assert SEEDED in transcript_text(first[0])
    assert "mcp__lessonbank__get_context" in {tool["name"] for tool in first[0]["tools"]}
    assert "Exit code 3" in transcript_text(first[1])  # Claude Code saw the failure itself

    reflection = (
        f"<situation>deploying to staging with deploy.sh</situation><mistake>ran it without DEPLOY_ENV</mistake>"
        f"<correction>{LEARNED}</correction><tags>deploy, staging, env</tags>"
    )
    llm = FakeLLM(default=reflection)
    with LessonBank(db, namespace=NAMESPACE, llm=llm) as bank:
        episodes = [
            Episode.model_validate(bank.show(decision["episode_id"])["episode"])
            for decision in bank.decisions(limit=50)
        ]
        (failed_call,) = [e for e in episodes if e.metadata.get("hook") == "PostToolUseFailure"]
        assert failed_call.status == "failure" and "DEPLOY_ENV is not set" in (failed_call.error or "")
        assert failed_call.verification[0].exit_code == 3
        (first_session,) = [e for e in episodes if e.metadata.get("hook") in ("Stop", "SessionEnd")]
        assert first_session.context_ids == [seeded.id]  # the lesson injected, for attribution
        assert bank.flush(timeout=60)
        learned = [lesson for lesson in bank.lessons() if LEARNED in lesson.content]
        assert learned, [lesson.content for lesson in bank.lessons()]

    # Session 2: the lesson the failure taught reaches the model; the session ends well.
    api.requests.clear()
    api.script = [[bash("echo deployed", "toolu_2")], [{"type": "text", "text": "Deployed to staging."}]]
    result = session("Deploy the web app to staging with ./deploy.sh again")
    assert result["result"] == "Deployed to staging.", result
    second = api.loop_requests()
    assert LEARNED in transcript_text(second[0])

    with LessonBank(db, namespace=NAMESPACE) as bank:
        after = bank.stats()
        lessons = bank.lessons()
        sessions = [
            episode
            for decision in bank.decisions(limit=50)
            if (episode := Episode.model_validate(bank.show(decision["episode_id"])["episode"])).metadata.get(
                "hook"
            )
            in ("Stop", "SessionEnd")
        ]
    attributed = {
        lesson.id: (lesson.helpful, lesson.harmful) for lesson in lessons if lesson.helpful or lesson.harmful
    }
    assert attributed, "no session outcome was attributed to the lessons injected"
    figures = {
        "episodes": after["episodes"],
        "episodes_by_hook": [*sorted(str(e.metadata.get("hook")) for e in episodes), "(session 2)"],
        "lessons_learned": len(learned),
        "lessons_injected_per_session": [
            len(e.context_ids) for e in sorted(sessions, key=lambda e: e.created_at)
        ],
        "lessons_attributed_helpful_harmful": attributed,
        "reflection_calls": len(llm.calls),
        "model_requests": len(first) + len(second),
        "unknown_paths": api.unknown,
    }
    print(json.dumps(figures, indent=2, default=str))


def test_the_plugin_folder_works_in_claude_code(api: MessagesAPI, workspace: Workspace) -> None:
    workspace.lessonbank(docs_line("lessonbank claude plugin "))
    plugin_dir = shlex.split(docs_line("claude --plugin-dir "))[1:]
    api.script = [[bash(FAILING, "toolu_1")], [{"type": "text", "text": "It failed."}]]
    workspace.session("Deploy the web app to staging with ./deploy.sh", *plugin_dir)
    first = api.loop_requests()
    assert SEEDED in transcript_text(first[0])
    assert any(tool["name"].endswith("__get_context") for tool in first[0]["tools"])
    (failed,) = workspace.failed_calls()
    assert "DEPLOY_ENV is not set" in (failed.error or "")


def test_http_hooks_to_a_server_with_a_key(api: MessagesAPI, workspace: Workspace) -> None:
    import httpx

    from lessonbank.server.auth import KeyStore, default_keys_path

    _key, token = KeyStore(default_keys_path(workspace.bank_home)).create(
        "claude", role="write", namespaces=[NAMESPACE]
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [str(LESSONBANK), "serve", "--port", str(port)], env=workspace.env, stderr=subprocess.PIPE
    )
    try:
        for _attempt in range(150):  # until the server answers (a bounded number of tries)
            try:
                httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
                time.sleep(0.2)
        else:
            pytest.fail("the server never answered")
        line = docs_line("lessonbank claude install --user --url ")
        workspace.lessonbank(line.replace("127.0.0.1:8765", f"127.0.0.1:{port}"))
        api.script = [[bash(FAILING, "toolu_1")], [{"type": "text", "text": "It failed."}]]
        workspace.session("Deploy the web app to staging with ./deploy.sh", env={"LESSONBANK_API_KEY": token})
    finally:
        server.terminate()
        server.communicate(timeout=30)
    first = api.loop_requests()
    assert SEEDED in transcript_text(first[0])
    (failed,) = workspace.failed_calls()
    assert "DEPLOY_ENV is not set" in (failed.error or "")
