"""The CLI treats its user well: clear errors for an old MCP SDK, a taken port and an unreachable
database (one line, no retries, for interactive commands), progress only at a terminal, tags
added and removed one at a time, imports that name each bad record, readable stats, --version."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

UNREACHABLE_PG = "postgresql://127.0.0.1:1/nobank"  # nothing listens on port 1: refused at once
UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"


def lines(data: bytes) -> list[str]:
    return [line for line in data.decode().splitlines() if line.strip()]


# --- an unreachable database -------------------------------------------------------------------


@pytest.mark.parametrize("url", [UNREACHABLE_PG, UNREACHABLE_REDIS], ids=["postgres", "redis"])
def test_an_interactive_command_fails_at_the_first_attempt_in_one_line(cli_in_process, url: str) -> None:
    done = cli_in_process("--db", url, "stats", ok=False)
    assert done.returncode == 1
    assert len(lines(done.stderr)) == 1, done.stderr.decode()
    message = done.stderr.decode()
    assert message.startswith("error: ") and "is unreachable" in message
    assert "attempts" not in message and "retrying" not in message


def test_a_worker_keeps_retrying_for_the_urls_budget(cli_in_process) -> None:
    done = cli_in_process("--db", UNREACHABLE_PG + "?retry_s=0.2", "worker", "--until-idle", ok=False)
    assert done.returncode == 1
    last = lines(done.stderr)[-1]
    assert "is unreachable after" in last and "attempts" in last
    assert int(last.split("after ")[1].split(" attempts")[0]) > 1


def test_the_library_default_still_retries_after_a_cli_command(cli_in_process) -> None:
    from lessonbank.stores.connection import RetryBudget

    cli_in_process("--db", UNREACHABLE_PG, "lessons", ok=False)
    assert RetryBudget.fail_fast is False


# --- an older MCP SDK --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["mcp", "serve"])
def test_an_older_mcp_sdk_is_named_with_the_command_that_upgrades_it(
    cli, tmp_path: Path, command: str
) -> None:
    shadow = tmp_path / "old-sdk" / "mcp-1.30.0.dist-info"
    shadow.mkdir(parents=True)
    (shadow / "METADATA").write_text("Metadata-Version: 2.1\nName: mcp\nVersion: 1.30.0\n")
    done = cli(command, extra_env={"PYTHONPATH": str(shadow.parent)}, ok=False)
    assert done.returncode == 1
    message = done.stderr.decode()
    assert "Traceback" not in message
    assert "mcp 1.30.0 is installed" in message
    assert "pip install --upgrade 'mcp>=2.0'" in message


def test_the_project_requires_the_mcp_sdk_it_imports() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    server = project["project"]["optional-dependencies"]["server"]
    dev = project["dependency-groups"]["dev"]
    assert [d for d in server if d.startswith("mcp")] == ["mcp>=2.0"]
    assert [d for d in dev if isinstance(d, str) and d.startswith("mcp")] == ["mcp>=2.0"]


# --- serve on a taken port ---------------------------------------------------------------------


def test_serve_on_a_taken_port_says_so_before_serving(cli_in_process) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        done = cli_in_process("serve", "--port", str(port), "--no-worker", ok=False)
    finally:
        taken.close()
    assert done.returncode == 1
    message = done.stderr.decode()
    assert f"port {port} on 127.0.0.1 is already in use" in message
    assert "serving" not in message and "Errno" not in message


# --- version, stats, context ---------------------------------------------------------------------


def test_version(cli_in_process) -> None:
    from importlib.metadata import version

    assert cli_in_process("--version").stdout.decode() == f"lessonbank {version('lessonbank')}\n"


def test_stats_prints_readable_lines(cli_in_process) -> None:
    cli_in_process("add", "run the linter before committing python code", "--tag", "python")
    text = cli_in_process("stats").stdout.decode()
    assert "None" not in text and "{" not in text
    by_label = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert by_label["lessons"].split()[1] == "1"
    assert "none configured" in by_label["llm"]
    assert json.loads(cli_in_process("stats", "--json").stdout)["llm"] is None  # --json unchanged


def test_context_with_nothing_to_inject_says_so_on_stderr(cli_in_process) -> None:
    done = cli_in_process("context", "a task nothing was learned about")
    assert done.stdout == b""
    assert "nothing to inject" in done.stderr.decode()


# --- edit tags one at a time ---------------------------------------------------------------------


def tags_of(cli_in_process, lesson_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    (lesson,) = [
        row for row in json.loads(cli_in_process("lessons", "--json").stdout) if row["id"] == lesson_id
    ]
    return list(lesson["tags"])


def test_edit_adds_and_removes_one_tag_keeping_the_others(cli_in_process) -> None:
    added = json.loads(cli_in_process("add", "use gofmt on go files", "--tag", "go", "--json").stdout)
    before = added["tags"]
    cli_in_process("edit", added["id"], "--add-tag", "format")
    assert tags_of(cli_in_process, added["id"]) == [*before, "format"]
    cli_in_process("edit", added["id"], "--remove-tag", "go")
    assert tags_of(cli_in_process, added["id"]) == [t for t in before if t != "go"] + ["format"]
    assert "replace" in cli_in_process("edit", "--help").stdout.decode().lower()


# --- import names each bad record ----------------------------------------------------------------


def test_import_names_each_bad_record_by_line_and_exits_non_zero(cli_in_process, tmp_path: Path) -> None:
    source = tmp_path / "lessons.jsonl"
    source.write_text(
        '{"content": "pin the lockfile before upgrading dependencies"}\n'
        '{"content": "x", "confidence": "high"}\n'
        "\n"
        '{"nope": 1}\n'
    )
    done = cli_in_process("import", str(source), ok=False)
    assert done.returncode == 1
    assert done.stdout.decode().strip() == "added 1, reinforced 0, skipped 2"
    errors = lines(done.stderr)
    assert len(errors) == 2, errors
    assert errors[0].startswith("line 2 skipped: ") and '"confidence"' in errors[0]
    assert errors[1].startswith("line 4 skipped: ") and '"content" is missing' in errors[1]
    assert not any("pydantic" in line or "http" in line for line in errors)


def test_import_of_only_bad_records_exits_non_zero(cli_in_process, tmp_path: Path) -> None:
    source = tmp_path / "lessons.json"
    source.write_text('[{"confidence": 2}]')
    done = cli_in_process("import", str(source), ok=False)
    assert done.returncode == 1
    assert lines(done.stderr)[0].startswith("record 1 skipped: ")


# --- proposals list / approve ---------------------------------------------------------------------


def test_proposals_list_and_approve_work_as_subcommands(cli_in_process) -> None:
    assert json.loads(cli_in_process("proposals", "list", "--json").stdout) == []
    done = cli_in_process("proposals", "approve", "prp_none", ok=False)
    assert done.returncode == 1 and "prp_none" in done.stderr.decode()
    assert "Usage" not in done.stderr.decode()


# --- progress only at a terminal -------------------------------------------------------------------


def _jsonl(tmp_path: Path, count: int) -> Path:
    source = tmp_path / "many.jsonl"
    source.write_text(
        "".join(json.dumps({"content": f"lesson number {i} about topic {i}"}) + "\n" for i in range(count))
    )
    return source


def test_import_prints_nothing_extra_when_stderr_is_not_a_terminal(cli_in_process, tmp_path: Path) -> None:
    done = cli_in_process("import", str(_jsonl(tmp_path, 30)), extra_env={"TTY_COMPATIBLE": "0"})
    assert done.stderr == b""


def test_import_shows_progress_at_a_terminal(cli_in_process, tmp_path: Path) -> None:
    done = cli_in_process("import", str(_jsonl(tmp_path, 30)), extra_env={"TTY_COMPATIBLE": "1"})
    assert "importing" in done.stderr.decode()
    assert done.stdout.decode().strip() == "added 30, reinforced 0, skipped 0"  # stdout unchanged


def test_embed_shows_progress_only_at_a_terminal(cli_in_process) -> None:
    cli_in_process("add", "prefer small pure functions")
    quiet = cli_in_process("--embedder", "hash", "embed", extra_env={"TTY_COMPATIBLE": "0"})
    assert quiet.stderr == b""
    cli_in_process("add", "write the test before the fix")
    shown = cli_in_process("--embedder", "hash", "embed", extra_env={"TTY_COMPATIBLE": "1"})
    assert "embedding lessons" in shown.stderr.decode()
