"""The Reflexion loop on a real project: pytest, mypy and ruff run as subprocesses on planted bugs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from lessonbank import LessonBank
from lessonbank.errors import InputError
from lessonbank.llm import FakeLLM
from lessonbank.loop import ActorOutput, CommandEvaluator, FunctionEvaluator, Memory, ReflexionLoop
from lessonbank.loop.records import export_aiwg, loop_records

SCHEMA = json.loads(Path("/work/shared/schemas/reflection-memory.json").read_text())

BUGGY = 'import os\n\n\ndef add(a: int, b: int) -> int:\n    return a - b\n\n\ndef name() -> int:\n    return "x"\n'
HALF = 'import os\n\n\ndef add(a: int, b: int) -> int:\n    return a + b\n\n\ndef name() -> int:\n    return "x"\n'
FIXED = 'def add(a: int, b: int) -> int:\n    return a + b\n\n\ndef name() -> str:\n    return "x"\n'
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n"


def reflection(category: str, lesson: str, text: str = "") -> str:
    return (
        "```json\n"
        + json.dumps(
            {
                "reflection_text": text
                or f"In my previous attempt I edited calc.py but {category} remained; in the next attempt I will fix the reported line and rerun the checks.",
                "credit_assignment": {
                    "failing_action_indices": [0],
                    "root_cause": f"{category} in calc.py",
                    "failure_category": category,
                },
                "causal_reasoning": "The checks reported errors at specific lines of calc.py.",
                "actionable_insights": ["Fix add() to return a + b", "Annotate name() as returning str"],
                "lessons_learned": [lesson],
                "confidence": 0.8,
                "related_reflections": [],
            }
        )
        + "\n```"
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "calc.py").write_text(BUGGY)
    (root / "test_calc.py").write_text(TESTS)
    # The exact commands of the docs ("pytest -q", …) resolve through PATH: put this venv first.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the fixture project needs no plugins
    return root


class ScriptedActor:
    """Writes calc.py versions in turn and remembers what memory it was shown."""

    def __init__(self, root: Path, versions: list[str]) -> None:
        self.root, self.versions, self.seen = root, versions, []

    def __call__(self, task: str, memory: Memory) -> dict[str, Any]:
        self.seen.append(memory)
        source = self.versions[min(memory.iteration, len(self.versions) - 1)]
        (self.root / "calc.py").write_text(source)
        return {
            "actions": [
                {
                    "type": "code_modification",
                    "description": "rewrote calc.py",
                    "file_path": "calc.py",
                    "changes": {"additions": source.count("\n"), "deletions": 0},
                }
            ],
            "rationale": "fix the failing checks",
            "strategy": "edit then verify",
            "files_modified": ["calc.py"],
        }


def test_loop_fixes_planted_bugs_with_real_tools(project: Path, db_url: str, tmp_path: Path) -> None:
    llm = FakeLLM(
        [
            reflection("logic_error", "Check arithmetic operators against the test's expected values"),
            reflection("incorrect_assumption", "Run the type checker before finishing"),
        ]
    )
    actor = ScriptedActor(project, [BUGGY, HALF, FIXED])
    with LessonBank(db_url, llm=llm) as bank:
        loop = ReflexionLoop(
            bank,
            actor=actor,
            evaluator=CommandEvaluator(["pytest -q", "mypy calc.py", "ruff check ."], cwd=project),
            omega=3,
            max_iterations=5,
        )
        result = loop.run("Make test_calc.py pass", task_type="code")
        assert result.passed and result.status == "completed"
        assert result.iterations == 3
        assert result.rewards == [0.25, 0.5, 1.0]
        assert len(result.reflections) == 2 and len(llm.calls) == 2
        # The second reflection saw the first; the actor saw both before its third attempt.
        assert "### Iteration 0" in llm.calls[1].prompt
        assert [item["iteration"] for item in actor.seen[2].reflections] == [0, 1]
        assert "## Previous Reflections" in actor.seen[2].text and actor.seen[0].text == ""

        first = result.records[0]["evaluator_output"]
        kinds = {(e["type"], e.get("rule")) for e in first["errors"]}
        assert ("test_failure", "test_calc::test_add") in kinds
        assert ("lint_error", "F401") in kinds
        assert any(
            e["type"] == "type_error" and e["line"] == 9 and e["file"] == "calc.py" for e in first["errors"]
        )
        assert first["metrics"] == {
            "tests_passed": 1,
            "tests_failed": 1,
            "tests_total": 2,
            "type_errors": 1,
            "lint_errors": 1,
            "lint_warnings": 0,
        }
        assert first["verification_type"] == "combined"
        for record in result.records:
            jsonschema.validate(record, SCHEMA)
        assert result.records[1]["performance_delta"] == {
            "reward_change": 0.25,
            "error_count_change": -1,
            "is_improvement": True,
        }
        assert result.records[2]["previous_reflections_used"] == [0, 1]
        assert result.records[1]["memory_metadata"]["reflections_in_context"] == [0, 1]

        # Every iteration is stored, reflected once (in the loop), never queued for the worker.
        assert bank.flush()
        assert bank.jobs() == []
        decisions = [bank.show(ep)["decision"] for ep in result.episode_ids]
        assert [d["reflect"] for d in decisions] == [False, False, False]
        assert "reflected in the loop" in decisions[0]["reason"] and "passed" in decisions[2]["reason"]
        assert len(llm.calls) == 2

        paths = export_aiwg(bank, result.loop_id, tmp_path / "out")
        assert [p.name for p in paths] == ["001.json", "002.json", "003.json"]
        for path in paths:
            jsonschema.validate(json.loads(path.read_text()), SCHEMA)

        # Across tasks: lessons_learned are bank lessons, searchable and given to the next loop.
        lessons = bank.lessons(tags=["reflexion"])
        assert {lesson.correction for lesson in lessons} == {
            "Check arithmetic operators against the test's expected values",
            "Run the type checker before finishing",
        }
        found = bank.search_reflections(
            failure_category="logic_error", min_confidence=0.7, keywords=["calc.py"]
        )
        assert [r["iteration"] for r in found] == [0]
        assert bank.search_reflections(failure_category=["edge_case_miss"]) == []
        assert bank.search_reflections(min_confidence=0.9) == []

        (project / "calc.py").write_text(BUGGY)
        again = FakeLLM([])
        second = ReflexionLoop(
            bank,
            actor=ScriptedActor(project, [FIXED]),
            evaluator=CommandEvaluator(["pytest -q"], cwd=project),
        )
        seen: list[Memory] = []

        def watching(task: str, memory: Memory) -> dict[str, Any]:
            seen.append(memory)
            return second_actor(task, memory)

        second_actor = ScriptedActor(project, [FIXED])
        second.actor = watching
        result2 = second.run("Make test_calc.py pass again: check arithmetic", task_type="code")
        assert result2.passed and result2.iterations == 1 and again.calls == []
        assert "Check arithmetic operators" in seen[0].text
        assert result2.prior_lesson_ids


def test_max_iterations_final_reflection_then_abort(db_url: str) -> None:
    llm = FakeLLM(default=reflection("edge_case_miss", "Handle empty input"))
    with LessonBank(db_url, llm=llm) as bank:
        loop = ReflexionLoop(
            bank,
            actor=lambda t, m: ActorOutput(actions=["tried"]),
            evaluator=FunctionEvaluator(lambda out: 0.4, name="score"),
            omega=1,
            max_iterations=3,
        )
        result = loop.run("Never quite works")
        assert not result.passed and result.status == "aborted"
        assert result.iterations == 3 and len(result.reflections) == 3 and len(llm.calls) == 3
        assert "max iterations reached" in result.records[-1]["notes"]
        assert result.records[-1]["memory_metadata"]["reflections_in_context"] == [2]  # omega 1
        for record in result.records:
            jsonschema.validate(record, SCHEMA)


@pytest.mark.parametrize("where", ["actor", "evaluator"])
def test_critical_error_reflects_then_aborts(db_url: str, tmp_path: Path, where: str) -> None:
    llm = FakeLLM([reflection("configuration_error", "Check the tool is installed first")])

    def actor(task: str, memory: Memory) -> dict[str, Any]:
        if where == "actor":
            raise RuntimeError("model endpoint down")
        return {"actions": ["edit"]}

    evaluator = CommandEvaluator(["definitely-not-a-real-tool-xyz --check"], cwd=tmp_path)
    with LessonBank(db_url, llm=llm) as bank:
        result = ReflexionLoop(bank, actor=actor, evaluator=evaluator, max_iterations=5).run("Do it")
        assert result.status == "error" and result.iterations == 1 and len(llm.calls) == 1
        assert "critical error" in result.records[0]["notes"]
        assert ("model endpoint down" if where == "actor" else "cannot run") in llm.calls[0].prompt
        jsonschema.validate(result.records[0], SCHEMA)


def test_omega_window_past_iteration_ten(db_url: str) -> None:
    llm = FakeLLM(default=reflection("logic_error", "x", text="I failed again " * 10))
    shown: list[list[int]] = []

    def actor(task: str, memory: Memory) -> dict[str, Any]:
        shown.append([item["iteration"] for item in memory.reflections])
        return {"actions": ["try"]}

    with LessonBank(db_url, llm=llm) as bank:
        result = ReflexionLoop(
            bank, actor=actor, evaluator=FunctionEvaluator(lambda o: False), omega=3, max_iterations=12
        ).run("Hard task")
        assert shown[11] == [8, 9, 10] and shown[10] == [7, 8, 9]
        assert [r["iteration"] for r in loop_records(bank, result.loop_id)] == list(range(12))
        auto = ReflexionLoop(
            bank, actor=actor, evaluator=FunctionEvaluator(lambda o: False), omega="auto", max_iterations=3
        ).run("Hard task")
        assert [r["memory_metadata"]["omega_capacity"] for r in auto.records] == [1, 1, 1]


def test_bad_arguments(db_url: str) -> None:
    with LessonBank(db_url, llm=FakeLLM()) as bank:
        ok = FunctionEvaluator(lambda o: True)
        for kwargs in (
            {"omega": 0},
            {"omega": 11},
            {"omega": "big"},
            {"max_iterations": 0},
            {"max_iterations": "5"},
        ):
            with pytest.raises(InputError):
                ReflexionLoop(bank, actor=lambda t, m: {}, evaluator=ok, **kwargs)  # type: ignore[arg-type]
        loop = ReflexionLoop(bank, actor=lambda t, m: {}, evaluator=ok)
        with pytest.raises(InputError):
            loop.run("   ")
        with pytest.raises(InputError):
            loop.run("x", loop_id="Bad Id")
        with pytest.raises(InputError):
            CommandEvaluator("pytest -q")  # type: ignore[arg-type]


def test_prior_lessons_are_credited_once_per_loop_with_its_outcome(db_url: str) -> None:
    llm = FakeLLM(default=reflection("edge_case_miss", "Handle empty input"))
    with LessonBank(db_url, llm=llm) as bank:
        prior = bank.add_lesson("never quite works until empty input is handled", tags=["reflexion"])
        scores = iter([0.4, 0.4, 1.0])
        loop = ReflexionLoop(
            bank,
            actor=lambda t, m: ActorOutput(actions=["tried"]),
            evaluator=FunctionEvaluator(lambda out: next(scores), name="score"),
            omega=1,
            max_iterations=3,
        )
        result = loop.run("Never quite works")
        assert result.passed and result.iterations == 3 and result.prior_lesson_ids == [prior.id]
        stored = bank.get_lesson(prior.id)
        assert (stored.helpful, stored.harmful) == (1, 0)  # two failed iterations, one passing loop
        # The lessons the loop learned carry where they were learned, like reflected ones.
        learned = [lesson for lesson in bank.lessons(tags=["reflexion"]) if lesson.id != prior.id]
        assert learned and all(lesson.learned_from == "Never quite works" for lesson in learned)
