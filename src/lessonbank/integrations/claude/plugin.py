"""lessonbank as a Claude Code plugin folder: the same hooks and MCP server as ``lessonbank claude
install``, plus a skill telling Claude how to use the bank's tools.

The folder (Claude Code's plugin layout; components at the root, the manifest in ``.claude-plugin/``)::

    DIR/.claude-plugin/plugin.json   name, version, description, author
    DIR/hooks/hooks.json             {"description": ..., "hooks": {event: [matcher groups]}}
    DIR/.mcp.json                    {"mcpServers": {"lessonbank": ...}}
    DIR/skills/lessonbank/SKILL.md   frontmatter (name = folder, description) and the body

Writing the folder again with the same options gives the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lessonbank.integrations.claude.install import SERVER_NAME, Wiring

SKILL_NAME = "lessonbank"
SKILL = """\
---
name: lessonbank
description: Use the lessons this project has learned from past sessions. Use when starting a task
  similar to earlier work, after a command or test fails, or when the user says "remember this" or
  "don't do that again".
---

# Lessons learned (lessonbank)

lessonbank's hooks already put the lessons that fit each prompt in your context (under a token
budget) and record failed tool calls, so most of the time there is nothing to do.

## When to use the tools

1. Before a risky or unfamiliar step, call `get_context` (or `recall_lessons`) with the task in a
   sentence, and follow what the lessons say.
2. When the user states a rule ("always run the linter before committing"), store it with
   `add_lesson`: one sentence, a condition and an action, with 2-5 lowercase tags.
3. When a task ends in a way the hooks cannot see (a wrong answer the user pointed out), call
   `record_episode` with the task, `status` failure and the error in a sentence.

## Pitfalls

- Never put secrets in a lesson: lessonbank redacts what it recognises, not everything.
- `archive_lesson` and `consolidate` only propose; a person approves in the dashboard or with
  `lessonbank proposals`.
"""


def plugin_files(wiring: Wiring, *, version: str) -> dict[str, str]:
    """The plugin folder's files (path relative to the folder → text)."""
    manifest = {
        "name": SERVER_NAME,
        "version": version,
        "description": "Lessons learned from past sessions, injected into each prompt; failed tool "
        "calls recorded and reflected on (lessonbank).",
        "author": {"name": "lessonbank"},
        "keywords": ["memory", "lessons", "reflection"],
    }
    hooks = {"description": "lessonbank: inject lessons, record what failed", "hooks": wiring.hooks()}
    mcp = {"mcpServers": {SERVER_NAME: wiring.server()}}
    return {
        ".claude-plugin/plugin.json": _json(manifest),
        "hooks/hooks.json": _json(hooks),
        ".mcp.json": _json(mcp),
        f"skills/{SKILL_NAME}/SKILL.md": SKILL,
    }


def write_plugin(folder: Path, wiring: Wiring, *, version: str) -> list[Path]:
    """Write the plugin folder (its files replaced, anything else in it kept); the paths written."""
    written = []
    for relative, text in plugin_files(wiring, version=version).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
