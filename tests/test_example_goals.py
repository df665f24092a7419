"""examples/goals_rules_replay.py runs as a real process and prints all three sections."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "goals_rules_replay.py"


def test_example_runs(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LESSONBANK_")}
    env["LESSONBANK_HOME"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, env=env, timeout=120, text=True
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "policy: trigger high_importance: important, long or repeated failure -> dual" in out
    assert "[PAST REFLECTIONS]\n• [Goal: Research competitor pricing] The price data was outdated" in out
    assert "## Learned Rules\n- IF an API answers 5xx THEN retry with exponential backoff" in out
    assert "## Replay Examples\n### Example (failure)\nTask: Scan nginx 1.24 for known vulnerabilities" in out
