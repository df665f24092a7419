"""``lessonbank claude install / uninstall / plugin``: Claude Code's settings merged, never clobbered.

Each test works in a temporary project folder and HOME holding settings a user already had (other
hooks, other keys, another MCP server), and checks the files byte for byte.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lessonbank.cli.app import app, hoist_global_options
from lessonbank.integrations.claude.install import HOOK_EVENTS, Target, Wiring, install, is_ours

EXE = "/opt/lb/bin/lessonbank"
THEIR_HOOK = {"type": "command", "command": "npx prettier --write ."}
SETTINGS = {
    "model": "sonnet",
    "permissions": {"allow": ["Bash(npm test:*)"]},
    "hooks": {
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [THEIR_HOOK]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send claude"}]}],
    },
}
MCP = {"mcpServers": {"github": {"type": "http", "url": "https://api.example.test/mcp"}}}
USER_STATE = {"numStartups": 7, "projects": {"/src/app": {"allowedTools": []}}, **MCP}


def write(path: Path, value: object, *, indent: int | None = 2, newline: bool = False) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(value, indent=indent) + ("\n" if newline else "")
    path.write_text(text)
    return path.read_bytes()


def run(cwd: Path, home: Path, *args: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("LESSONBANK_DB", raising=False)
    monkeypatch.delenv("LESSONBANK_NAMESPACE", raising=False)
    result = CliRunner().invoke(app, hoist_global_options(list(args)), prog_name="lessonbank")
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    return project, home


def test_project_install_adds_every_hook_and_the_server_and_keeps_the_rest(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    project, home = dirs
    write(project / ".claude" / "settings.json", SETTINGS)
    write(project / ".mcp.json", MCP, newline=True)
    run(project, home, "claude", "install", "--project", "--namespace", "web", monkeypatch=monkeypatch)

    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert settings["model"] == "sonnet" and settings["permissions"] == SETTINGS["permissions"]
    assert settings["hooks"]["Notification"] == SETTINGS["hooks"]["Notification"]
    assert list(settings["hooks"]) == [
        "PostToolUse",
        "Notification",
        *[e for e in HOOK_EVENTS if e != "PostToolUse"],
    ]
    theirs, ours = settings["hooks"]["PostToolUse"]
    assert theirs == {"matcher": "Edit|Write", "hooks": [THEIR_HOOK]}
    assert [is_ours(hook) for hook in ours["hooks"]] == [True]
    for event in HOOK_EVENTS:
        (hook,) = settings["hooks"][event][-1]["hooks"]
        assert hook["type"] == "command" and hook["timeout"] == 30
        assert re.fullmatch(r"/\S+/lessonbank --namespace web hooks claude", hook["command"]), hook
    assert settings["enabledMcpjsonServers"] == ["lessonbank"]

    mcp_text = (project / ".mcp.json").read_text()
    servers = json.loads(mcp_text)["mcpServers"]
    assert servers["github"] == MCP["mcpServers"]["github"]
    assert servers["lessonbank"]["type"] == "stdio"
    assert servers["lessonbank"]["command"].endswith("/lessonbank")
    assert servers["lessonbank"]["args"] == ["--namespace", "web", "mcp"]
    assert mcp_text.endswith("}\n")  # its final newline kept
    assert not (home / ".claude.json").exists()


def test_install_twice_is_byte_identical_and_uninstall_restores(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    project, home = dirs
    settings_path, mcp_path = project / ".claude" / "settings.json", project / ".mcp.json"
    before = write(settings_path, SETTINGS), write(mcp_path, MCP, indent=4, newline=True)
    run(project, home, "claude", "install", monkeypatch=monkeypatch)
    once = settings_path.read_bytes(), mcp_path.read_bytes()
    assert once != before
    assert mcp_path.read_text().startswith('{\n    "mcpServers"')  # its 4-space indent kept
    output = run(project, home, "claude", "install", "--project", monkeypatch=monkeypatch)
    assert "nothing to change" in output
    assert (settings_path.read_bytes(), mcp_path.read_bytes()) == once

    run(project, home, "claude", "uninstall", monkeypatch=monkeypatch)
    assert (settings_path.read_bytes(), mcp_path.read_bytes()) == before
    assert "nothing to change" in run(project, home, "claude", "uninstall", monkeypatch=monkeypatch)


def test_a_new_namespace_replaces_lessonbanks_hook_where_it_stands(tmp_path: Path) -> None:
    target = Target.of("project", cwd=tmp_path)
    install(target, Wiring(namespace="a", executable=EXE))
    settings = json.loads(target.settings.read_text())
    settings["hooks"]["Stop"][0]["hooks"].append(THEIR_HOOK)  # the user adds a hook beside ours
    settings["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "say done"}]})
    target.settings.write_text(json.dumps(settings, indent=2))

    install(target, Wiring(namespace="b", executable=EXE))
    stop = json.loads(target.settings.read_text())["hooks"]["Stop"]
    assert stop[0]["hooks"] == [
        {"type": "command", "command": f"{EXE} --namespace b hooks claude", "timeout": 30},
        THEIR_HOOK,
    ]
    assert stop[1] == {"hooks": [{"type": "command", "command": "say done"}]}
    assert sum(is_ours(h) for group in stop for h in group["hooks"]) == 1


def test_created_files_are_removed_again(tmp_path: Path) -> None:
    target = Target.of("project", cwd=tmp_path)
    assert install(target, Wiring(executable=EXE)) == [target.settings, target.mcp]
    from lessonbank.integrations.claude.install import uninstall

    assert uninstall(target) == [target.settings, target.mcp]
    assert not target.settings.exists() and not target.mcp.exists()
    assert list(tmp_path.iterdir()) == []


def test_user_install_writes_home_settings_and_the_user_mcp_config(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    project, home = dirs
    state_before = write(home / ".claude.json", USER_STATE)
    settings_before = write(home / ".claude" / "settings.json", SETTINGS, newline=True)
    run(project, home, "--db", "sqlite:////tmp/x.db", "claude", "install", "--user", monkeypatch=monkeypatch)
    state = json.loads((home / ".claude.json").read_text())
    assert state["numStartups"] == 7 and state["projects"] == USER_STATE["projects"]
    assert list(state["mcpServers"]) == ["github", "lessonbank"]
    assert state["mcpServers"]["lessonbank"]["args"] == ["--db", "sqlite:////tmp/x.db", "mcp"]
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert "enabledMcpjsonServers" not in settings  # a user server needs no approval
    assert settings["hooks"]["SessionStart"][0]["hooks"][0]["command"].endswith(
        " --db sqlite:////tmp/x.db hooks claude"
    )
    assert not (project / ".claude").exists() and not (project / ".mcp.json").exists()

    run(project, home, "claude", "uninstall", "--user", monkeypatch=monkeypatch)
    assert (home / ".claude.json").read_bytes() == state_before
    assert (home / ".claude" / "settings.json").read_bytes() == settings_before


def test_url_install_uses_http_hooks_with_the_key_from_the_environment(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    project, home = dirs
    run(
        project,
        home,
        "-n",
        "team",
        "claude",
        "install",
        "--url",
        "http://127.0.0.1:8765/",
        "--key-env",
        "LB_KEY",
        monkeypatch=monkeypatch,
    )
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    for event in HOOK_EVENTS:
        assert settings["hooks"][event] == [
            {
                "hooks": [
                    {
                        "type": "http",
                        "url": "http://127.0.0.1:8765/api/v1/ns/team/hooks/claude",
                        "headers": {"Authorization": "Bearer $LB_KEY"},
                        "allowedEnvVars": ["LB_KEY"],
                        "timeout": 30,
                    }
                ]
            }
        ]
    server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["lessonbank"]
    assert server == {
        "type": "http",
        "url": "http://127.0.0.1:8765/mcp",
        "headers": {"Authorization": "Bearer ${LB_KEY}"},
    }
    # switching back to the local command replaces the http hooks
    run(project, home, "claude", "install", monkeypatch=monkeypatch)
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert [h["type"] for e in HOOK_EVENTS for g in settings["hooks"][e] for h in g["hooks"]] == [
        "command"
    ] * 7


def test_install_refuses_both_scopes_and_a_url_without_scheme(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    project, _home = dirs
    monkeypatch.chdir(project)
    for args in (["claude", "install", "--project", "--user"], ["claude", "install", "--url", "bank:8765"]):
        result = CliRunner().invoke(app, args, prog_name="lessonbank")
        assert result.exit_code == 2, result.output
    assert not (project / ".claude").exists()


def test_the_plugin_folder_has_the_documented_files(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    project, home = dirs
    folder = project / "lessonbank-plugin"
    run(project, home, "-n", "web", "claude", "plugin", str(folder), monkeypatch=monkeypatch)
    manifest = json.loads((folder / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "lessonbank" and manifest["version"] and manifest["description"]
    assert re.fullmatch(r"[a-z0-9-]+", manifest["name"])
    hooks = json.loads((folder / "hooks" / "hooks.json").read_text())
    assert set(hooks) == {"description", "hooks"} and list(hooks["hooks"]) == list(HOOK_EVENTS)
    for groups in hooks["hooks"].values():
        assert groups[0]["hooks"][0]["command"].endswith("--namespace web hooks claude")
    servers = json.loads((folder / ".mcp.json").read_text())["mcpServers"]
    assert servers["lessonbank"]["args"] == ["--namespace", "web", "mcp"]
    skill = (folder / "skills" / "lessonbank" / "SKILL.md").read_text()
    front = skill.split("---\n")[1]
    assert re.search(r"^name: lessonbank$", front, flags=re.M)
    description = front.split("description:", 1)[1]
    assert 0 < len(" ".join(description.split())) <= 1024
    assert len(skill.splitlines()) < 500
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    before = {name: (folder / name).read_bytes() for name in files}
    run(project, home, "-n", "web", "claude", "plugin", str(folder), monkeypatch=monkeypatch)
    assert {name: (folder / name).read_bytes() for name in files} == before


def test_the_docs_claude_code_lines_run_as_shown(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    project, home = dirs
    page = Path(__file__).resolve().parents[1] / "docs" / "how-to" / "claude-code.md"
    blocks = re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    shown = [line for line in lines if line.startswith("lessonbank claude ")]
    assert len(shown) == 4, shown
    for line in shown:
        run(project, home, *shlex.split(line)[1:], monkeypatch=monkeypatch)
    # the project's files are gone again; the user install and the plugin folder stay
    assert not (project / ".claude" / "settings.json").exists() and not (project / ".mcp.json").exists()
    hook = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]["Stop"][0]["hooks"][0]
    assert hook["url"] == "http://127.0.0.1:8765/api/v1/ns/my-project/hooks/claude"
    assert (project / "lessonbank-plugin" / ".claude-plugin" / "plugin.json").exists()
