"""The README's example runs as written (with no API key its reflection waits in the queue)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (example,) = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.DOTALL)[:1]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(example, str(README), "exec"), namespace)
    bank = namespace["bank"]
    block = namespace["block"]
    try:
        assert "when editing large Go files use Edit" in block.text  # type: ignore[attr-defined]
        assert (tmp_path / "bank.db").exists()
        (job,) = bank.jobs()  # type: ignore[attr-defined]
        assert job.status == "waiting" and "OPENAI_API_KEY" in (job.detail or "")
    finally:
        bank.close()  # type: ignore[attr-defined]
