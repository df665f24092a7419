"""Getting started's second example (goals, rules, replay) runs as written after the first one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "getting-started.md"


def test_the_goal_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = re.findall(r"```python\n(.*?)```", PAGE.read_text("utf-8"), re.DOTALL)[:2]
    assert "finish_goal" in second
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(first + second, str(PAGE), "exec"), namespace)
    bank = namespace["bank"]
    try:
        decisions = bank.decisions()  # type: ignore[attr-defined]
        assert decisions[0]["reflector"] == "insight" and decisions[0]["trigger"] == "terminal"
        assert "LESSON: when editing large Go files" in namespace["block"].text  # type: ignore[attr-defined]
    finally:
        bank.close()  # type: ignore[attr-defined]
