"""``lessonbank hooks claude``: answer one Claude Code hook payload (JSON on stdin).

The hook never breaks the session: whatever goes wrong (a broken payload, an unreachable database),
the command exits 0 and prints nothing, and writes one line to stderr (which Claude Code shows only
in its debug output for exit 0) and to ``$LESSONBANK_HOME/claude/hooks.log``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

hooks_app = typer.Typer(
    help="Answer an agent's hooks from the bank (claude: a Claude Code hook payload on stdin)."
)
log = logging.getLogger("lessonbank.hooks")
LOG_MAX_BYTES = 1024 * 1024  # the log file is started again past this size
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024


@hooks_app.command("claude")
def claude(
    ctx: typer.Context,
    budget: Annotated[
        int, typer.Option("--budget", min=0, help="Token budget of the context injected")
    ] = 800,
) -> None:
    """Read one Claude Code hook payload (JSON on stdin) and print the hook's answer, if any."""
    from lessonbank.integrations.claude.hooks import ClaudeHooks
    from lessonbank.integrations.claude.session import Sessions

    event = "unknown"
    try:
        data = sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1)
        if len(data) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"the payload is over {MAX_PAYLOAD_BYTES} bytes")
        payload = json.loads(data)
        event = str(payload.get("hook_event_name")) if isinstance(payload, dict) else event
        with ctx.obj.bank() as bank:
            hooks = ClaudeHooks(
                bank, Sessions.under(bank.settings.home, bank.namespace), budget_tokens=budget
            )
            body = hooks.answer(payload).body
    except Exception as exc:  # a hook never breaks the session
        _log_failure(event, exc)
        return
    if body:
        sys.stdout.write(body + "\n")


def _log_failure(event: str, exc: Exception) -> None:
    from lessonbank.redact import redact
    from lessonbank.settings import Settings, make_private_folder

    line = redact(f"lessonbank hooks claude: {event} hook failed: {type(exc).__name__}: {exc}")
    sys.stderr.write(line + "\n")
    try:
        folder = make_private_folder(Settings.from_env().home / "claude")
        path = folder / "hooks.log"
        if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
            path.replace(path.with_suffix(".log.1"))
        with Path(path).open("a", encoding="utf-8") as stream:
            stream.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {line}\n")
    except Exception as again:  # the log is best effort too
        log.debug("hook log not written: %s", again)
