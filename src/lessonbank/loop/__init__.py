"""The Reflexion loop (seed 001): wrap any actor in verify → reflect → retry, learning within a
task (the Ω window of reflections) and across tasks (lessons_learned in the bank).

    from lessonbank.loop import ReflexionLoop, CommandEvaluator

    loop = ReflexionLoop(bank, actor=my_actor,
                         evaluator=CommandEvaluator(["pytest -q", "mypy src", "ruff check ."], cwd="proj"),
                         omega=3, max_iterations=5)
    result = loop.run("Make tests/test_parser.py pass", task_type="code")
"""

from lessonbank.loop.evaluators import (
    CheckResult,
    CommandEvaluator,
    Evaluation,
    Evaluator,
    FunctionEvaluator,
)
from lessonbank.loop.records import export_aiwg, loop_records, loops, search_reflections
from lessonbank.loop.runner import ActorOutput, LoopResult, Memory, ReflexionLoop
from lessonbank.loop.window import OMEGA_PRESETS, auto_omega, select_window

__all__ = [
    "OMEGA_PRESETS",
    "ActorOutput",
    "CheckResult",
    "CommandEvaluator",
    "Evaluation",
    "Evaluator",
    "FunctionEvaluator",
    "LoopResult",
    "Memory",
    "ReflexionLoop",
    "auto_omega",
    "export_aiwg",
    "loop_records",
    "loops",
    "search_reflections",
    "select_window",
]
