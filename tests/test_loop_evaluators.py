"""Evaluator parsers, reward, timeouts, Ω presets and analytics, without an LLM."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lessonbank import LessonBank
from lessonbank.errors import EvaluatorError
from lessonbank.llm import FakeLLM
from lessonbank.loop import (
    CommandEvaluator,
    FunctionEvaluator,
    Memory,
    ReflexionLoop,
    auto_omega,
    select_window,
)
from lessonbank.loop.analytics import analyze, learning_rate, plot_rewards
from lessonbank.loop.evaluators import PARSERS, CheckResult, score, tool_of
from lessonbank.loop.window import omega_for, resolve_omega
from tests.test_loop import reflection

TSC = "src/app.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\nsrc/b.ts(1,1): error TS1005: ';' expected.\n"
ESLINT = json.dumps(
    [
        {
            "filePath": "/p/src/app.ts",
            "errorCount": 1,
            "warningCount": 1,
            "messages": [
                {
                    "ruleId": "no-unused-vars",
                    "severity": 2,
                    "message": "'x' is unused.",
                    "line": 4,
                    "column": 7,
                },
                {"ruleId": "semi", "severity": 1, "message": "Missing semicolon.", "line": 5, "column": 2},
            ],
        }
    ]
)


def test_tool_detection() -> None:
    assert tool_of(["pytest", "-q"]) == "pytest"
    assert tool_of([sys.executable, "-m", "pytest"]) == "pytest"
    assert tool_of(["npx", "tsc", "--noEmit"]) == "tsc"
    assert tool_of(["/usr/bin/ruff", "check", "."]) == "ruff"
    assert tool_of(["npm", "test"]) == "npm-test"
    assert tool_of(["npm", "run", "lint"]) == "other"


def test_tsc_and_eslint_parsers() -> None:
    tsc = CheckResult(tool="tsc", kind="types", status="fail", exit_code=2)
    PARSERS["tsc"](tsc, TSC, "", "")
    assert [(e["type"], e["file"], e["line"], e["rule"]) for e in tsc.errors] == [
        ("type_error", "src/app.ts", 3, "TS2322"),
        ("syntax_error", "src/b.ts", 1, "TS1005"),
    ]
    lint = CheckResult(tool="eslint", kind="lint", status="fail", exit_code=1)
    PARSERS["eslint"](lint, ESLINT, "", "")
    assert [(e["severity"], e["rule"], e["line"]) for e in lint.errors] == [
        ("error", "no-unused-vars", 4),
        ("warning", "semi", 5),
    ]
    evaluation = score([tsc, lint])
    assert evaluation.metrics["type_errors"] == 2 and evaluation.metrics["lint_errors"] == 1
    assert evaluation.metrics["lint_warnings"] == 1
    assert evaluation.reward == 0.5 and evaluation.verification_type == "combined"


def test_garbage_tool_output_is_one_error_not_a_crash() -> None:
    for tool in ("ruff", "eslint", "mypy", "tsc", "pytest"):
        result = CheckResult(tool=tool, kind="lint", status="fail", exit_code=1)
        PARSERS[tool](result, "\x00 not json [ {", "boom", "<not xml")
    evaluation = score([CheckResult(tool="ruff", kind="lint", status="fail", exit_code=2)])
    assert evaluation.metrics["lint_errors"] == 1 and evaluation.reward == 0.8 and not evaluation.passed


def test_timeout_and_missing_tool(tmp_path: Path) -> None:
    slow = CommandEvaluator([f"{sys.executable} -c 'import time; time.sleep(30)'"], cwd=tmp_path, timeout_s=1)
    evaluation = slow.evaluate()
    assert not evaluation.passed and evaluation.errors[0]["type"] == "timeout"
    assert evaluation.results[0].duration_ms < 10_000
    with pytest.raises(EvaluatorError, match="cannot run"):
        CommandEvaluator(["no-such-tool-abc"], cwd=tmp_path).evaluate()
    with pytest.raises(EvaluatorError, match="does not exist"):
        CommandEvaluator(["true"], cwd=tmp_path / "missing").evaluate()


def test_omega_presets_auto_and_window() -> None:
    assert [
        omega_for(t)
        for t in ("unit_tests", "type_check", "lint", "integration_tests", "combined", "manual_review")
    ] == [1, 1, 1, 3, 3, 5]
    assert omega_for(None) == 3
    assert auto_omega(["a", "b"]) == 1 and auto_omega(["a", "b", "c"]) == 3 and auto_omega(list("abcde")) == 5
    assert resolve_omega("manual_review", verification_type=None, categories=[]) == 5
    memory = [
        {"iteration": i, "self_reflection": {"reflection_text": "word " * 40, "actionable_insights": []}}
        for i in (10, 2, 9, 11, 1)
    ]
    assert [m["iteration"] for m in select_window(memory, 3)] == [9, 10, 11]
    assert [m["iteration"] for m in select_window(memory, 3, budget_tokens=140)] == [10, 11]
    assert select_window(memory, 3, budget_tokens=10) == []


def test_analytics_learning_rate_reuse_and_plot(db_url: str, tmp_path: Path) -> None:
    assert learning_rate([0.2, 0.5, 1.0]) == round(0.8 / 3, 4) and learning_rate([1.0]) == 0.0
    llm = FakeLLM(default=reflection("edge_case_miss", "Handle empty lists in parse_items"))
    attempts: list[int] = []

    def actor(task: str, memory: Memory) -> dict[str, object]:
        attempts.append(memory.iteration)
        return {
            "actions": ["edit"],
            "output": "ok" if memory.iteration >= 1 or memory.prior_knowledge else "no",
        }

    evaluator = FunctionEvaluator(lambda out: out.output == "ok")
    with LessonBank(db_url, llm=llm) as bank:
        first = ReflexionLoop(bank, actor=actor, evaluator=evaluator).run("parse_items fails on empty lists")
        second = ReflexionLoop(bank, actor=actor, evaluator=evaluator).run(
            "parse_items with empty lists again"
        )
        assert first.iterations == 2 and second.iterations == 1 and second.prior_lesson_ids
        report = analyze(bank)
        assert [loop.loop_id for loop in report.loops] == [first.loop_id, second.loop_id]
        assert report.success_rate == 1.0 and report.avg_iterations == 1.5
        assert report.loops[0].learning_rate == 0.5 and report.failure_categories == {"edge_case_miss": 1}
        assert report.lessons_written == 1 and report.lesson_reuse_rate == 1.0
        png = plot_rewards(report, tmp_path / "r.png")
        assert png.read_bytes()[:4] == b"\x89PNG"


def test_async_bank_runs_a_loop_from_a_coroutine(db_url: str) -> None:
    import asyncio

    from lessonbank import AsyncLessonBank

    async def main() -> None:
        llm = FakeLLM([reflection("logic_error", "Return the sum, not the difference")])
        async with AsyncLessonBank(db_url, llm=llm) as bank:
            loop = ReflexionLoop(
                bank,
                actor=lambda task, memory: {"output": "ok" if memory.reflections else "bad"},
                evaluator=FunctionEvaluator(lambda out: out.output == "ok"),
            )
            result = loop.run("sum two numbers")  # the reflection call runs beside this event loop
            assert result.passed and result.iterations == 2 and len(llm.calls) == 1
            found = await bank.search_reflections(keywords=["SUM"])
            assert [r["loop_id"] for r in found] == [result.loop_id]

    asyncio.run(main())


def test_unsure_reflection_without_improvement_is_flagged_low_quality(db_url: str) -> None:
    unsure = json.dumps(
        {
            "reflection_text": "I am not sure why this failed; maybe the input format was different from what I assumed here.",
            "credit_assignment": {
                "failing_action_indices": [0],
                "root_cause": "unknown",
                "failure_category": "other",
            },
            "actionable_insights": ["Print the input"],
            "confidence": 0.3,
        }
    )
    with LessonBank(db_url, llm=FakeLLM(default=unsure)) as bank:
        loop = ReflexionLoop(
            bank,
            actor=lambda task, memory: {"actions": ["try"]},
            evaluator=FunctionEvaluator(lambda out: 0.4),
            max_iterations=2,
        )
        result = loop.run("Parse the odd file")
        assert "notes" not in result.records[0] or "low quality" not in result.records[0]["notes"]
        assert "reflection 0 was low quality" in result.records[1]["notes"]
