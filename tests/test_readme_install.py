"""The install lines (README and Getting started) and the ``claude mcp add`` lines of the MCP page,
exactly as shown, work.

The install line installs this folder with the server extra; the wheel it builds (built here offline,
with no build isolation) carries the ``lessonbank`` console script. Each ``claude mcp add`` line is
read as Claude Code's CLI reads it (commander: ``-e`` / ``-H`` take every value up to the next option,
so the server's name comes first; the command after ``--``); where Claude Code is installed
(``claude`` on PATH), each line is also run against a temporary HOME and its saved entry checked.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lessonbank.retrieval import pruning
from tests.npm_packages import npm_program

ROOT = Path(__file__).resolve().parents[1]
INSTALL_PAGES = {"README": ROOT / "README.md", "getting-started": ROOT / "docs" / "getting-started.md"}
MCP_PAGE = ROOT / "docs" / "how-to" / "mcp.md"
VARIADIC = {"-e", "--env", "-H", "--header"}
PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index")
VALUED = {"-s", "--scope", "-t", "--transport", "--client-id", "--callback-port"}


def bash_lines(page: Path) -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def install_lines(page: Path) -> list[str]:
    """The install section's lines: its command block and the alternatives named in its text."""
    text = page.read_text(encoding="utf-8")
    section = text.split("puts `lessonbank` on your PATH", 1)[1].split("\n\n", 3)
    block, alternatives = section[1], section[2]
    shown = [line.strip() for line in block.splitlines() if line.strip() and not line.startswith("```")]
    return shown + re.findall(r"`((?:pipx|pip|uv tool) install [^`]+)`", alternatives)


def claude_lines() -> list[str]:
    return [line for line in bash_lines(MCP_PAGE) if line.startswith("claude mcp add ")]


def parse_mcp_add(line: str) -> dict[str, object]:
    """``claude mcp add …`` as Claude Code's CLI reads it, or ``ValueError`` saying what it rejects."""
    words = shlex.split(line)[3:]
    options: dict[str, list[str]] = {}
    positional: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            positional.extend(words[index + 1 :])
            break
        if word in VALUED:
            options.setdefault(word.lstrip("-")[:1], []).append(words[index + 1])
            index += 2
            continue
        if word in VARIADIC:
            index += 1
            taken = options.setdefault(word.lstrip("-")[:1], [])
            while index < len(words) and not words[index].startswith("-"):
                taken.append(words[index])
                index += 1
            continue
        if word.startswith("-") and not positional:
            raise ValueError(f"unknown option {word}")
        positional.append(word)
        index += 1
    for value in options.get("e", []):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", value):
            raise ValueError(f"Invalid environment variable format: {value}")
    if len(positional) < 2:
        raise ValueError("missing the server's name or its command")
    return {"name": positional[0], "command": positional[1:], "env": options.get("e", [])}


@pytest.mark.parametrize("page", INSTALL_PAGES.values(), ids=INSTALL_PAGES.keys())
def test_the_install_lines_install_from_the_clone_with_the_server_extra(page: Path) -> None:
    lines = install_lines(page)
    assert lines, f"{page.name} shows no install line"
    assert {shlex.split(line)[0] for line in lines} >= {"pipx", "uv", "pip"}
    for line in lines:
        target = shlex.split(line)[-1]
        assert target == ".[server]", line


def test_the_wheel_the_install_builds_has_the_lessonbank_command(tmp_path: Path) -> None:
    built = subprocess.run(
        [*PIP_WHEEL, "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PIP_NO_INPUT": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = tmp_path.glob("lessonbank-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (entry_points,) = [name for name in archive.namelist() if name.endswith("entry_points.txt")]
        scripts = archive.read(entry_points).decode()
        metadata = archive.read(entry_points.replace("entry_points.txt", "METADATA")).decode()
    assert "lessonbank = lessonbank.cli:main" in scripts
    assert 'Requires-Dist: mcp>=2.0; extra == "server"' in metadata
    if (
        pruning.compiled()
    ):  # this install found a compiler: so does the wheel's build, for every Python from 3.11
        assert "-cp311-abi3-" in wheel.name
        assert any(
            name.startswith("lessonbank/retrieval/_postings.")
            for name in names(wheel)
            if name.endswith((".so", ".pyd"))
        )


def test_a_build_without_a_c_compiler_goes_on_without_the_compiled_loops(tmp_path: Path) -> None:
    """The C loops are optional: where the compiler fails, the wheel is built without them and
    numpy runs the same steps (``pruning.compiled()`` is then False). Built from a copy of the
    sources, so no earlier build's objects stand in for the compiler."""
    source = tmp_path / "source"
    shutil.copytree(
        ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__")
    )
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, source / name)
    built = subprocess.run(
        [*PIP_WHEEL, "-w", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PIP_NO_INPUT": "1", "CC": "false", "LDSHARED": "false"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = tmp_path.glob("lessonbank-*.whl")
    assert "lessonbank/retrieval/pruning.py" in names(wheel)
    assert not any("_postings." in name for name in names(wheel) if name.endswith((".so", ".pyd")))


def names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_the_claude_code_lines_parse_as_claude_code_reads_them() -> None:
    lines = claude_lines()
    assert len(lines) >= 2
    stdio = [parse_mcp_add(line) for line in lines if "--transport" not in line]
    for added in stdio:
        assert added["name"] == "lessonbank"
        assert added["command"][:2] == ["lessonbank", "mcp"]  # type: ignore[index]
    assert any(added["env"] for added in stdio)


def test_the_old_order_is_what_claude_code_refuses() -> None:
    old = "claude mcp add --scope user -e A=1 lessonbank -- lessonbank mcp"
    with pytest.raises(ValueError, match="Invalid environment variable format: lessonbank"):
        parse_mcp_add(old)


def test_claude_code_saves_each_line_as_the_docs_mean(tmp_path: Path) -> None:
    claude = str(npm_program("@anthropic-ai/claude-code", "claude"))  # the real CLI
    for number, line in enumerate(claude_lines()):
        home = tmp_path / f"home{number}"
        home.mkdir()
        env = {
            "HOME": str(home),
            "PATH": os.environ.get("PATH", ""),
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        done = subprocess.run(
            [claude, *shlex.split(line)[1:]], capture_output=True, text=True, timeout=120, env=env, cwd=home
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
        config = json.loads((home / ".claude.json").read_text())
        servers = {**config.get("mcpServers", {})}
        for project in config.get("projects", {}).values():
            servers.update(project.get("mcpServers", {}))
        assert "lessonbank" in servers, config
