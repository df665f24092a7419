"""Claude Code's hooks, answered by ``lessonbank hooks claude`` (a command hook: the payload on stdin)
and by ``POST /api/v1/ns/{namespace}/hooks/claude`` (an ``http`` hook: the payload as the body).

Payloads are shaped as the Claude Code CLI sends them (``session_id``, ``transcript_path``, ``cwd``,
``permission_mode``, ``hook_event_name`` and the event's own fields), transcripts as it writes them
(JSON Lines of user and assistant messages with ``tool_use`` and ``tool_result`` blocks).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lessonbank import LessonBank
from lessonbank.integrations.claude.transcript import read_outcome
from lessonbank.server.app import create_app
from lessonbank.settings import Settings

SESSION = "0f2d6c1e-8a4b-4c1e-9d7a-3b5e2f1a9c40"
LESSON = "when pytest fails with ImportError in a src layout, install the package in editable mode first"
PROMPT = "fix the pytest ImportError in the parser tests"
ROUTE = "/api/v1/ns/default/hooks/claude"


def payload(event: str, transcript: Path | None = None, **fields: Any) -> dict[str, Any]:
    """A hook payload as Claude Code sends it: the common fields, then the event's."""
    return {
        "session_id": SESSION,
        "transcript_path": str(transcript or "/home/dev/.claude/projects/-home-dev-app/none.jsonl"),
        "cwd": "/home/dev/app",
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }


def failing_bash(command: str = "pytest -x tests/test_parser.py") -> dict[str, Any]:
    return payload(
        "PostToolUseFailure",
        tool_name="Bash",
        tool_input={"command": command, "description": "Run the parser tests"},
        tool_use_id="toolu_01FAIL",
        error="Exit code 1\nE   ImportError: cannot import name 'parse' from 'app'",
        is_interrupt=False,
    )


def write_transcript(folder: Path, *, final_tests_pass: bool = True) -> Path:
    """A transcript where the agent ran the tests (failing), fixed something, ran them again."""
    path = folder / ".claude" / "projects" / "-home-dev-app" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)

    def call(n: int, command: str) -> dict[str, Any]:
        block = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": command}}
        return {
            "type": "assistant",
            "timestamp": f"2026-01-05T10:0{n}:00.000Z",
            "message": {"role": "assistant", "content": [block]},
        }

    def result(n: int, text: str, is_error: bool) -> dict[str, Any]:
        block = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": text, "is_error": is_error}
        return {
            "type": "user",
            "timestamp": f"2026-01-05T10:0{n}:30.000Z",
            "message": {"role": "user", "content": [block]},
        }

    last = "5 passed in 0.12s" if final_tests_pass else "Exit code 1\n1 failed, 4 passed in 0.15s"
    entries = [
        {
            "type": "user",
            "timestamp": "2026-01-05T10:00:00.000Z",
            "message": {"role": "user", "content": PROMPT},
        },
        call(1, "pytest -x tests/test_parser.py"),
        result(1, "Exit code 1\nE   ImportError: cannot import name 'parse'\n1 failed in 0.05s", True),
        call(2, "pip install -e ."),
        result(2, "Successfully installed app-0.1", False),
        call(3, "pytest tests"),
        result(3, last, not final_tests_pass),
        {
            "type": "assistant",
            "timestamp": "2026-01-05T10:04:00.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "The tests pass now."}]},
        },
    ]
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries), encoding="utf-8")
    return path


def episodes(db_url: str) -> list[dict[str, Any]]:
    """Every episode of the bank, newest first, as ``show`` gives it."""
    with LessonBank(db_url, worker=False) as bank:
        return [bank.show(row["episode_id"])["episode"] for row in bank.decisions(limit=100)]


def add_lesson(db_url: str) -> str:
    with LessonBank(db_url, worker=False) as bank:
        return bank.add_lesson(LESSON, tags=["pytest"]).id


# ---------------------------------------------------------------------- the command


@pytest.fixture
def hook(cli_in_process: Any, db_url: str) -> Any:
    """Runs ``lessonbank hooks claude`` with one payload on stdin; its stdout, stderr and exit code."""

    def run(body: Any, *extra: str) -> Any:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return cli_in_process("--db", db_url, "hooks", "claude", *extra, stdin=data, ok=False)

    return run


def test_a_prompt_gets_the_context_block_once(hook: Any, db_url: str) -> None:
    add_lesson(db_url)
    done = hook(payload("UserPromptSubmit", prompt=PROMPT))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert LESSON in answer["hookSpecificOutput"]["additionalContext"]
    # The same lessons again: already in the model's context, so nothing more is injected.
    again = hook(payload("UserPromptSubmit", prompt=PROMPT + " again"))
    assert (again.returncode, again.stdout) == (0, b"")
    # After a compaction the conversation goes on with its last prompt's lessons.
    compacted = json.loads(hook(payload("SessionStart", source="compact", model="claude-sonnet-4-5")).stdout)
    assert compacted["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert LESSON in compacted["hookSpecificOutput"]["additionalContext"]
    assert hook(payload("SessionStart", source="startup")).stdout == b""  # no task yet: nothing


def test_a_new_session_with_nothing_to_recall_gets_no_answer(hook: Any, db_url: str) -> None:
    add_lesson(db_url)
    done = hook(payload("SessionStart", source="startup", model="claude-sonnet-4-5"))
    assert (done.returncode, done.stdout) == (0, b"")


def test_a_failing_bash_call_is_recorded_as_an_episode(hook: Any, db_url: str) -> None:
    hook(payload("UserPromptSubmit", prompt=PROMPT))
    done = hook(failing_bash())
    assert (done.returncode, done.stdout) == (0, b"")
    [episode] = episodes(db_url)
    assert episode["status"] == "failure" and episode["task"] == PROMPT
    assert episode["attempt"] == "Bash: pytest -x tests/test_parser.py"
    assert "ImportError" in episode["error"]
    assert episode["verification"][0]["exit_code"] == 1
    assert episode["agent"] == "claude-code" and episode["context_ids"] == []
    assert episode["metadata"]["session_id"] == SESSION


def test_a_bash_exit_code_in_post_tool_use_is_a_failure_and_a_success_is_not_recorded(
    hook: Any, db_url: str
) -> None:
    ok = {"stdout": "ok", "stderr": "", "interrupted": False, "isImage": False}
    tool = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "toolu_02"}
    assert hook(payload("PostToolUse", tool_response=ok, **tool)).stdout == b""
    assert episodes(db_url) == []
    failed = {**ok, "stderr": "make: *** [build] Error 2", "exit_code": 2}
    hook(payload("PostToolUse", tool_response=failed, **{**tool, "tool_input": {"command": "make build"}}))
    [episode] = episodes(db_url)
    assert episode["attempt"] == "Bash: make build" and "Error 2" in episode["error"]
    # A call the person interrupted is no mistake to learn from.
    hook({**failing_bash(), "is_interrupt": True})
    assert len(episodes(db_url)) == 1


def test_stop_records_one_episode_crediting_the_injected_lessons(
    hook: Any, db_url: str, tmp_path: Path
) -> None:
    lesson_id = add_lesson(db_url)
    transcript = write_transcript(tmp_path)
    assert hook(payload("UserPromptSubmit", transcript, prompt=PROMPT)).stdout
    done = hook(payload("Stop", transcript, stop_hook_active=False))
    assert (done.returncode, done.stdout) == (0, b"")  # an answer to Stop would continue the conversation
    [episode] = episodes(db_url)
    assert episode["task"] == PROMPT and episode["context_ids"] == [lesson_id]
    assert episode["status"] == "success" and episode["reward"] == 1.0
    assert [check["status"] for check in episode["verification"]] == ["failed", "passed"]
    assert episode["output"] == "The tests pass now."
    assert episode["metadata"]["failures"] == 1 and episode["metadata"]["tool_calls"] == 3
    assert episode["duration_s"] == 240.0
    # The session ends with nothing new: no second episode.
    assert hook(payload("SessionEnd", transcript, reason="other")).stdout == b""
    assert len(episodes(db_url)) == 1
    with LessonBank(db_url, worker=False) as bank:
        assert bank.get_lesson(lesson_id).helpful == 1  # the outcome credited the lesson injected


def test_a_session_whose_last_tests_fail_is_a_failure(hook: Any, db_url: str, tmp_path: Path) -> None:
    transcript = write_transcript(tmp_path, final_tests_pass=False)
    hook(payload("UserPromptSubmit", transcript, prompt=PROMPT))
    hook(payload("SessionEnd", transcript, reason="prompt_input_exit"))
    [episode] = episodes(db_url)
    assert episode["status"] == "failure" and "1 failed" in episode["error"]
    assert episode["reward"] == 0.8


def test_pre_compact_hands_the_lessons_in_context_to_the_compaction(hook: Any, db_url: str) -> None:
    lesson_id = add_lesson(db_url)
    hook(payload("UserPromptSubmit", prompt=PROMPT))
    done = hook(payload("PreCompact", trigger="auto", custom_instructions=""))
    text = done.stdout.decode()
    assert done.returncode == 0 and not text.lstrip().startswith("{")  # plain text: the instructions
    assert LESSON in text and lesson_id in text


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1, 2]", b"", json.dumps({"hook_event_name": "Stop"}).encode(), b'{"session_id": 5}'],
    ids=["not-json", "array", "empty", "no-session", "no-event"],
)
def test_a_broken_payload_exits_0_with_no_output_and_a_log_line(
    hook: Any, body: bytes, tmp_path: Path
) -> None:
    done = hook(body)
    assert (done.returncode, done.stdout) == (0, b"")
    assert b"hook failed" in done.stderr
    assert "hook failed" in (tmp_path / "home" / "claude" / "hooks.log").read_text()


def test_an_unreachable_database_does_not_break_the_session(cli_in_process: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing-folder' / 'deeper' / 'bank.db'}"
    (tmp_path / "missing-folder").write_text("a file where the folder should be")
    done = cli_in_process("--db", url, "hooks", "claude", stdin=json.dumps(failing_bash()).encode(), ok=False)
    assert (done.returncode, done.stdout) == (0, b"")
    assert b"PostToolUseFailure hook failed" in done.stderr


def test_unknown_events_are_answered_with_nothing(hook: Any, db_url: str) -> None:
    done = hook(payload("Notification", message="Claude needs your permission", notification_type="x"))
    assert (done.returncode, done.stdout) == (0, b"")


# ---------------------------------------------------------------------- the http hook


@pytest.fixture
def client(tmp_path: Path, db_url: str) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path / "home", db=db_url)
    with TestClient(create_app(settings, worker=False), base_url="http://127.0.0.1") as test_client:
        yield test_client


def test_the_http_hook_answers_as_the_command_does(client: TestClient, db_url: str, tmp_path: Path) -> None:
    lesson_id = add_lesson(db_url)
    transcript = write_transcript(tmp_path)
    prompt = client.post(ROUTE, json=payload("UserPromptSubmit", transcript, prompt=PROMPT))
    assert prompt.status_code == 200
    assert LESSON in prompt.json()["hookSpecificOutput"]["additionalContext"]
    failed = client.post(ROUTE, json={**failing_bash(), "agent_id": "a-newer-field"})
    assert (failed.status_code, failed.content) == (200, b"")
    compact = client.post(ROUTE, json=payload("PreCompact", trigger="manual", custom_instructions="keep it"))
    assert compact.headers["content-type"].startswith("text/plain") and lesson_id in compact.text
    stop = client.post(ROUTE, json=payload("Stop", transcript, stop_hook_active=False))
    assert (stop.status_code, stop.content) == (200, b"")
    session, failure = episodes(db_url)
    assert session["context_ids"] == [lesson_id] and session["status"] == "success"
    assert session["metadata"]["tool_calls"] == 3  # read from the transcript under .claude/projects
    assert failure["status"] == "failure" and failure["context_ids"] == []


def test_the_http_hook_reads_only_claude_transcripts(client: TestClient, db_url: str, tmp_path: Path) -> None:
    elsewhere = tmp_path / "secrets.jsonl"
    elsewhere.write_text(write_transcript(tmp_path).read_text())
    client.post(ROUTE, json=payload("UserPromptSubmit", elsewhere, prompt=PROMPT))
    client.post(ROUTE, json=payload("Stop", elsewhere, stop_hook_active=False))
    [episode] = episodes(db_url)
    assert episode["metadata"].get("tool_calls") is None and episode["actions"] == []


def test_the_http_hook_takes_its_budget_from_a_header(client: TestClient, db_url: str) -> None:
    add_lesson(db_url)
    body = payload("UserPromptSubmit", prompt=PROMPT)
    assert client.post(ROUTE, json=body, headers={"X-Lessonbank-Budget": "0"}).content == b""


def test_a_payload_that_is_no_hook_is_refused(client: TestClient) -> None:
    assert client.post(ROUTE, json={"hook_event_name": "Stop"}).status_code == 422
    assert client.post(ROUTE, json=[1]).status_code == 422


# ---------------------------------------------------------------------- the transcript


def test_a_transcript_is_read_from_where_the_last_read_stopped(tmp_path: Path) -> None:
    path = write_transcript(tmp_path)
    first = read_outcome(path)
    assert len(first.tool_calls) == 3 and len(first.failures) == 1
    assert [(t.passed, t.counts) for t in first.tests] == [(False, {"failed": 1}), (True, {"passed": 5})]
    assert first.offset == path.stat().st_size
    with path.open("a") as stream:
        stream.write('{"type": "assistant", "message": {"content": [{"type": "text", "text": "half')
    assert read_outcome(path, first.offset).offset == first.offset  # a line still being written waits
