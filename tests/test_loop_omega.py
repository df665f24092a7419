"""Seed 001's Ω presets applied when no ``omega`` is given, and loop records written as the loop runs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from lessonbank import LessonBank
from lessonbank.llm import FakeLLM
from lessonbank.loop import CommandEvaluator, FunctionEvaluator, Memory, ReflexionLoop
from lessonbank.loop.evaluators import verification_type_of
from tests.test_loop import SCHEMA, reflection


def _fails(verification_type: str) -> FunctionEvaluator:
    return FunctionEvaluator(lambda output: False, name="check", verification_type=verification_type)


@pytest.mark.parametrize(
    ("verification_type", "omega"),
    [
        ("unit_tests", 1),
        ("type_check", 1),
        ("lint", 1),
        ("combined", 3),
        ("manual_review", 5),
        ("heuristic", 3),
    ],
)
def test_omega_defaults_to_the_preset_of_the_evaluators_kind(
    db_url: str, verification_type: str, omega: int
) -> None:
    shown: list[list[int]] = []

    def actor(task: str, memory: Memory) -> dict[str, Any]:
        shown.append([int(item["iteration"]) for item in memory.reflections])
        return {"actions": ["try"]}

    llm = FakeLLM(default=reflection("logic_error", "Check the operator"))
    with LessonBank(db_url, llm=llm) as bank:
        result = ReflexionLoop(bank, actor=actor, evaluator=_fails(verification_type), max_iterations=7).run(
            "Never passes"
        )
    assert shown[6] == list(range(6 - omega, 6))
    assert {record["memory_metadata"]["omega_capacity"] for record in result.records} == {omega}
    assert result.records[-1]["memory_metadata"]["reflections_in_context"] == list(range(7 - omega, 7))


def test_an_explicit_omega_wins_over_the_preset(db_url: str) -> None:
    llm = FakeLLM(default=reflection("logic_error", "Check the operator"))
    with LessonBank(db_url, llm=llm) as bank:
        result = ReflexionLoop(
            bank,
            actor=lambda t, m: {"actions": ["try"]},
            evaluator=_fails("unit_tests"),
            omega=3,
            max_iterations=4,
        ).run("Never passes")
    assert result.records[-1]["memory_metadata"]["omega_capacity"] == 3


def test_a_command_evaluators_kind_comes_from_its_tools(tmp_path: Path) -> None:
    def kind(*commands: str, **options: Any) -> str | None:
        return verification_type_of(CommandEvaluator(list(commands), cwd=tmp_path, **options))

    assert kind("pytest -q") == "unit_tests"
    assert kind("python -m mypy src", "tsc --noEmit") == "type_check"
    assert kind("ruff check .") == "lint"
    assert kind("pytest -q", "mypy src", "ruff check .") == "combined"
    assert kind("pytest -q", verification_type="integration_tests") == "integration_tests"
    assert verification_type_of(_fails("manual_review")) == "manual_review"
    assert verification_type_of(object()) is None


def test_a_failing_unit_test_command_gets_a_window_of_one(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_x():\n    assert 1 == 2\n")
    shown: list[int] = []

    def actor(task: str, memory: Memory) -> dict[str, Any]:
        shown.append(len(memory.reflections))
        return {"actions": ["try"]}

    evaluator = CommandEvaluator([f"{sys.executable} -m pytest -q test_x.py"], cwd=tmp_path)
    llm = FakeLLM(default=reflection("logic_error", "Check the expected value"))
    with LessonBank(db_url, llm=llm) as bank:
        result = ReflexionLoop(bank, actor=actor, evaluator=evaluator, max_iterations=3).run(
            "Make test_x pass"
        )
    assert shown == [0, 1, 1]
    assert result.records[0]["evaluator_output"]["verification_type"] == "unit_tests"
    assert result.records[-1]["memory_metadata"]["omega_capacity"] == 1


def test_records_are_written_as_the_loop_runs(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / ".aiwg" / "ralph" / "reflections"
    seen: list[list[str]] = []

    def actor(task: str, memory: Memory) -> dict[str, Any]:
        folder = target / memory.loop_id
        seen.append(sorted(path.name for path in folder.iterdir()) if folder.exists() else [])
        return {"actions": ["try"]}

    llm = FakeLLM(default=reflection("logic_error", "Check the operator"))
    with LessonBank(db_url, llm=llm) as bank:
        result = ReflexionLoop(
            bank, actor=actor, evaluator=_fails("unit_tests"), max_iterations=3, records_dir=target
        ).run("Never passes")
        # Off by default: nothing is written.
        ReflexionLoop(
            bank, actor=lambda t, m: {"actions": []}, evaluator=_fails("lint"), max_iterations=1
        ).run("x")
    assert seen == [[], ["001.json"], ["001.json", "002.json"]]
    files = sorted((target / result.loop_id).iterdir())
    assert [path.name for path in files] == ["001.json", "002.json", "003.json"]
    for path, record in zip(files, result.records, strict=True):
        written = json.loads(path.read_text("utf-8"))
        assert written == record
        jsonschema.validate(written, SCHEMA)
    assert [path.name for path in target.iterdir()] == [result.loop_id]
    assert not list(target.parent.glob("**/*.tmp"))


def test_the_cli_writes_live_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lessonbank.cli import app

    (tmp_path / "live_records_actor.py").write_text(
        "def act(task, memory):\n    return {'actions': ['try']}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for key in [key for key in os.environ if key.startswith("LESSONBANK_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("LESSONBANK_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LESSONBANK_LLM", "fake")
    monkeypatch.setenv("LESSONBANK_FAKE_REPLIES", json.dumps([reflection("logic_error", "x")] * 2))
    failing = f"{sys.executable} -c 'raise SystemExit(1)'"
    args = ["--db", f"sqlite:///{tmp_path / 'bank.db'}", "loop", "run", "Never passes", "--actor"]
    args += ["live_records_actor:act", "--check", failing, "--max-iterations", "2", "--json"]
    result = CliRunner().invoke(app, [*args, "--records-dir", ".aiwg/ralph/reflections"])
    assert result.exit_code == 1, result.output
    loop_id = json.loads(result.stdout)["loop_id"]
    folder = tmp_path / ".aiwg" / "ralph" / "reflections" / loop_id
    assert sorted(path.name for path in folder.iterdir()) == ["001.json", "002.json"]
