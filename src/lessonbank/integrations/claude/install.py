"""Wire lessonbank into Claude Code's settings: its hooks and its MCP server, merged, never clobbered.

Invariants:

- Only lessonbank's own entries are written or removed: a hook whose command ends in
  ``hooks claude`` and names ``lessonbank`` (or an ``http`` hook whose URL ends in ``/hooks/claude``),
  the MCP server named ``lessonbank``, and (project scope) ``lessonbank`` in
  ``enabledMcpjsonServers``. Every other hook, server and key stays as it was, in its order.
- Idempotent: installing what is already installed writes nothing, so the files stay byte-identical.
  A changed option (another namespace, a URL) replaces lessonbank's entry where it stands.
- A file that is rewritten keeps its indentation and its final newline; uninstalling what an
  install added gives back the file it changed: a list or object left empty by the removal
  (``hooks``, an event's list, ``mcpServers``) is removed, and so is a file left holding ``{}``.

Where things go (as Claude Code reads them):

======= =========================== ===========================================
scope   hooks                       MCP server
======= =========================== ===========================================
project ``.claude/settings.json``   ``.mcp.json`` (``mcpServers``)
user    ``~/.claude/settings.json`` ``~/.claude.json`` (``mcpServers``, where
                                    ``claude mcp add --scope user`` writes)
======= =========================== ===========================================
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

# The hook events lessonbank answers, in the order Claude Code documents them.
HOOK_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "PostToolUseFailure",
    "PreCompact",
    "Stop",
    "SessionEnd",
)
SERVER_NAME = "lessonbank"
HOOK_ROUTE = "/api/v1/ns/{namespace}/hooks/claude"
KEY_ENV = "LESSONBANK_API_KEY"
HOOK_TIMEOUT_S = 30
Scope = Literal["project", "user"]


def lessonbank_command() -> str:
    """The ``lessonbank`` executable hooks run, by its absolute path (so a hook works whatever PATH
    Claude Code gives it): the one running, else the one beside this interpreter, else the one on
    PATH, else the bare name."""
    for candidate in (Path(sys.argv[0]), Path(sys.executable).parent / "lessonbank"):
        if candidate.name == "lessonbank" and candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate.absolute())
    return shutil.which("lessonbank") or "lessonbank"


@dataclass(frozen=True)
class Wiring:
    """What to install: a local command (``url`` None) or a server's http hook route and ``/mcp``."""

    namespace: str | None = None
    db: str | None = None
    url: str | None = None
    key_env: str = KEY_ENV
    executable: str | None = None

    def hook(self) -> dict[str, Any]:
        """The one hook entry every event gets."""
        if self.url is None:
            return {"type": "command", "command": self.command("hooks", "claude"), "timeout": HOOK_TIMEOUT_S}
        route = HOOK_ROUTE.format(namespace=self.namespace or "default")
        return {
            "type": "http",
            "url": self.url.rstrip("/") + route,
            "headers": {"Authorization": f"Bearer ${self.key_env}"},
            "allowedEnvVars": [self.key_env],
            "timeout": HOOK_TIMEOUT_S,
        }

    def server(self) -> dict[str, Any]:
        """The MCP server entry: ``lessonbank mcp`` over stdio, or the server's ``/mcp``."""
        if self.url is None:
            words = shlex.split(self.command("mcp"))
            return {"type": "stdio", "command": words[0], "args": words[1:], "env": {}}
        return {
            "type": "http",
            "url": self.url.rstrip("/") + "/mcp",
            "headers": {"Authorization": f"Bearer ${{{self.key_env}}}"},
        }

    def command(self, *words: str) -> str:
        head = [self.executable or lessonbank_command()]
        if self.db:
            head += ["--db", self.db]
        if self.namespace:
            head += ["--namespace", self.namespace]
        return shlex.join([*head, *words])

    def hooks(self) -> dict[str, list[dict[str, Any]]]:
        """The ``hooks`` object of a settings file or a plugin's ``hooks/hooks.json``."""
        return {event: [{"hooks": [self.hook()]}] for event in HOOK_EVENTS}


def is_ours(hook: Any) -> bool:
    """Whether a hook entry is lessonbank's (so an install replaces it and an uninstall removes it)."""
    if not isinstance(hook, dict):
        return False
    if hook.get("type") == "command":
        command = str(hook.get("command", ""))
        return command.endswith(" hooks claude") and "lessonbank" in command
    if hook.get("type") == "http":
        return str(hook.get("url", "")).endswith("/hooks/claude")
    return False


@dataclass(frozen=True)
class Target:
    """The two files of a scope: the settings file (hooks) and the MCP configuration."""

    scope: Scope
    settings: Path
    mcp: Path

    @classmethod
    def of(cls, scope: Scope, *, cwd: Path | None = None, home: Path | None = None) -> Target:
        if scope == "user":
            base = home or Path.home()
            return cls(scope, base / ".claude" / "settings.json", base / ".claude.json")
        base = cwd or Path.cwd()
        return cls(scope, base / ".claude" / "settings.json", base / ".mcp.json")


def install(target: Target, wiring: Wiring) -> list[Path]:
    """Merge lessonbank's hooks and MCP server into the target's files; the files changed."""
    settings, mcp = JsonFile.read(target.settings), JsonFile.read(target.mcp)
    hooks = settings.data.setdefault("hooks", {})
    for event in HOOK_EVENTS:
        _put_hook(hooks.setdefault(event, []), wiring.hook())
    servers = mcp.data.setdefault("mcpServers", {})
    servers[SERVER_NAME] = wiring.server()
    if target.scope == "project":
        enabled = settings.data.setdefault("enabledMcpjsonServers", [])
        if SERVER_NAME not in enabled:
            enabled.append(SERVER_NAME)
    return [file.path for file in (settings, mcp) if file.save()]


def uninstall(target: Target) -> list[Path]:
    """Remove exactly what :func:`install` adds (of any namespace or URL); the files changed."""
    changed = []
    if target.settings.exists():
        settings = JsonFile.read(target.settings)
        hooks = settings.data.get("hooks")
        if isinstance(hooks, dict):
            for event in list(hooks):
                if isinstance(hooks[event], list):
                    hooks[event] = _without_ours(hooks[event])
                    if not hooks[event]:
                        del hooks[event]
            if not hooks:
                del settings.data["hooks"]
        enabled = settings.data.get("enabledMcpjsonServers")
        if target.scope == "project" and isinstance(enabled, list) and SERVER_NAME in enabled:
            enabled.remove(SERVER_NAME)
            if not enabled:
                del settings.data["enabledMcpjsonServers"]
        if settings.save(drop_if_empty=True):
            changed.append(settings.path)
        folder = target.settings.parent
        if not target.settings.exists() and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()  # the .claude folder the install made, left empty
    if target.mcp.exists():
        mcp = JsonFile.read(target.mcp)
        servers = mcp.data.get("mcpServers")
        if isinstance(servers, dict) and SERVER_NAME in servers:
            del servers[SERVER_NAME]
            if not servers:
                del mcp.data["mcpServers"]
        if mcp.save(drop_if_empty=True):
            changed.append(mcp.path)
    return changed


def _put_hook(groups: list[Any], entry: dict[str, Any]) -> None:
    """Put ``entry`` in place of the first lessonbank hook of an event (dropping any other), or in a
    matcher group of its own at the end."""
    placed = False
    for group in groups:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(inner, list):
            continue
        for index, hook in enumerate(inner):
            if is_ours(hook) and not placed:
                inner[index], placed = entry, True
            elif is_ours(hook):
                inner[index] = None
        inner[:] = [hook for hook in inner if hook is not None]
    groups[:] = [group for group in groups if not _emptied(group)]
    if not placed:
        groups.append({"hooks": [entry]})


def _without_ours(groups: list[Any]) -> list[Any]:
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            group["hooks"] = [hook for hook in group["hooks"] if not is_ours(hook)]
    return [group for group in groups if not _emptied(group)]


def _emptied(group: Any) -> bool:
    return isinstance(group, dict) and group.get("hooks") == []


class JsonFile:
    """A JSON object file read and written back in its own style (indent, final newline)."""

    def __init__(self, path: Path, text: str | None) -> None:
        self.path, self.original = path, text
        self.data: dict[str, Any] = json.loads(text) if text and text.strip() else {}
        if not isinstance(self.data, dict):
            raise ValueError(f"{path} does not hold a JSON object")
        self.loaded = json.loads(json.dumps(self.data))
        self.indent: int | None = 2
        self.newline = True
        if text and text.strip():
            lines = text.lstrip().splitlines()
            second = lines[1] if len(lines) > 1 else ""
            self.indent = (len(second) - len(second.lstrip(" "))) or None if len(lines) > 1 else None
            self.newline = text.endswith("\n")

    @classmethod
    def read(cls, path: Path) -> JsonFile:
        return cls(path, path.read_text(encoding="utf-8") if path.exists() else None)

    def save(self, *, drop_if_empty: bool = False) -> bool:
        """Write the file if its data changed; whether it did. An emptied file is removed."""
        if self.data == self.loaded and self.original is not None:
            return False
        if drop_if_empty and not self.data:
            self.path.unlink()
            return True
        text = json.dumps(self.data, indent=self.indent, ensure_ascii=False)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(text + ("\n" if self.newline else ""), encoding="utf-8")
        return True
