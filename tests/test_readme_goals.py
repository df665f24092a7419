"""The README's second example (goals, rules, replay) runs as written after the first one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_goal_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.DOTALL)[:2]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(first + second, str(README), "exec"), namespace)
    bank = namespace["bank"]
    try:
        decisions = bank.decisions()  # type: ignore[attr-defined]
        assert decisions[0]["reflector"] == "insight" and decisions[0]["trigger"] == "terminal"
        assert "LESSON: when editing large Go files" in namespace["block"].text  # type: ignore[attr-defined]
    finally:
        bank.close()  # type: ignore[attr-defined]
