"""`lessonbank loop run|export` and `lessonbank analytics`, run in this process (the checks are real programs)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import jsonschema
import pytest

from tests.test_loop import BUGGY, FIXED, SCHEMA, TESTS, reflection

ACTOR = """
from pathlib import Path

FIXED = {fixed!r}


def act(task, memory):
    # Fix the file only once a reflection says what went wrong.
    if memory.reflections:
        Path("proj/calc.py").write_text(FIXED)
        return {{"actions": [{{"type": "code_modification", "description": "fixed add", "file_path": "calc.py"}}],
                "rationale": memory.reflections[-1]["self_reflection"]["actionable_insights"][0]}}
    return {{"actions": ["looked at calc.py"], "rationale": "first look"}}
"""


def test_loop_run_export_analytics(cli_in_process, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "calc.py").write_text(BUGGY.replace('"x"', "1").replace("import os\n\n\n", ""))
    (tmp_path / "proj" / "test_calc.py").write_text(TESTS)
    (tmp_path / "my_actor.py").write_text(ACTOR.format(fixed=FIXED))
    env = dict(
        LESSONBANK_DB=f"sqlite:///{tmp_path / 'bank.db'}",
        LESSONBANK_LLM="fake",
        LESSONBANK_FAKE_REPLIES=json.dumps([reflection("logic_error", "Compare operators with the test")]),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # where --actor my_actor:act is found, undone after the test
    # the actor module the command imports is forgotten after the test
    monkeypatch.setitem(sys.modules, "my_actor", None)
    del sys.modules["my_actor"]

    def cli(*args: str, code: int = 0) -> str:
        proc = cli_in_process(*args, extra_env=env, ok=False)
        assert proc.returncode == code, proc.stderr.decode()
        return proc.stdout.decode()

    assert json.loads(cli("analytics", "--json"))["loops"] == []  # an empty bank: zeros, no plot
    result = json.loads(
        cli(
            "loop",
            "run",
            "Fix calc.add",
            "--actor",
            "my_actor:act",
            "--check",
            "pytest -q",
            "--check",
            "ruff check .",
            "--cwd",
            "proj",
            "--json",
        )
    )
    assert result["passed"] is True and result["iterations"] == 2
    assert result["rewards"] == [0.75, 1.0]
    assert result["reflections"][0]["credit_assignment"]["failure_category"] == "logic_error"

    cli("loop", "export", result["loop_id"], "--format", "aiwg", "out")
    files = sorted((tmp_path / "out" / result["loop_id"]).iterdir())
    assert [f.name for f in files] == ["001.json", "002.json"]
    for file in files:
        jsonschema.validate(json.loads(file.read_text()), SCHEMA)

    report = json.loads(cli("analytics", "--json", "--plot", "curves.png"))
    assert report["success_rate"] == 1.0 and report["avg_iterations"] == 2.0
    assert report["avg_learning_rate"] == 0.125
    assert report["failure_categories"] == {"logic_error": 1}
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "success rate 100%" in cli("analytics", "--no-plot")

    missing = cli_in_process("loop", "export", "ralph-nope", "out", extra_env=env, ok=False)
    assert missing.returncode == 1 and b"ralph-nope" in missing.stderr
