"""The HumanEval harness on a few real problems, with FakeLLM scripted to fail then succeed."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from bench import humaneval

from lessonbank.llm import FakeLLM
from lessonbank.loop.sandbox import run_python
from tests.test_loop import reflection

PROBLEMS = humaneval.load_problems(4)
BY_PROMPT = {p["prompt"]: p for p in PROBLEMS}


def scripted(attempts_to_fail: int, hostile: dict[int, str] | None = None) -> FakeLLM:
    """Actor calls fail ``attempts_to_fail`` times per problem, then answer the canonical solution."""
    seen: Counter[str] = Counter()

    def reply(messages: Any) -> str:
        system, user = messages[0]["content"], messages[-1]["content"]
        if "Self-Reflection component" in system:
            return reflection("logic_error", "Read the docstring examples before coding")
        problem = next(p for prompt, p in BY_PROMPT.items() if user.endswith(prompt))
        index = PROBLEMS.index(problem)
        seen[problem["task_id"]] += 1
        if hostile and index in hostile:
            return f"```python\n{hostile[index]}\n```"
        if seen[problem["task_id"]] <= attempts_to_fail:
            return f"```python\ndef {problem['entry_point']}(*args, **kwargs):\n    return None\n```"
        return f"```python\n{problem['prompt']}{problem['canonical_solution']}```"

    return FakeLLM(default=reply)


def test_data_ships_all_164_problems() -> None:
    assert len(humaneval.load_problems()) == 164


def test_fail_then_succeed_with_and_without_the_bank(tmp_path: Path) -> None:
    for mode in ("isolated", "bank"):
        llm = scripted(attempts_to_fail=1)
        out = tmp_path / f"{mode}.json"
        argv = [
            "--problems",
            "3",
            "--max-iterations",
            "3",
            "--timeout",
            "5",
            "--modes",
            mode,
            "--out",
            str(out),
        ]
        (row,) = humaneval.main(argv, llm=llm)
        assert row["pass@1_first_attempt"] == 0.0
        assert row["pass@1_after_reflexion"] == 1.0
        assert row["avg_iterations"] == 2.0
        assert row["tokens_in"] > 0
        assert json.loads(out.read_text())["results"] == [row]
        # Per problem: a failed attempt, its reflection, the passing attempt.
        assert len(llm.calls) == 9
        actor_prompts = [c.prompt for c in llm.calls if "Self-Reflection" not in c["messages"][0]["content"]]
        later_first_attempts = actor_prompts[2::2]
        # With the shared bank, later problems start with the lessons of earlier ones.
        assert all(("## Prior Knowledge" in p) == (mode == "bank") for p in later_first_attempts)


def test_hostile_solutions_are_stopped_and_scored_as_failures(tmp_path: Path) -> None:
    entry = [p["entry_point"] for p in PROBLEMS]
    hostile = {
        0: f"def {entry[0]}(*a):\n    while True:\n        pass",
        1: f"def {entry[1]}(*a):\n    return bytearray(10 * 1024 ** 3)",
        2: f"import socket\ndef {entry[2]}(*a):\n    socket.create_connection(('example.com', 80))",
    }
    llm = scripted(attempts_to_fail=0, hostile=hostile)
    rows = humaneval.main(
        [
            "--problems",
            "4",
            "--max-iterations",
            "1",
            "--timeout",
            "2",
            "--modes",
            "isolated",
            "--out",
            str(tmp_path / "h.json"),
        ],
        llm=llm,
    )
    assert rows[0]["pass@1_after_reflexion"] == 0.25  # only the honest fourth problem passes


def test_sandbox_statuses() -> None:
    assert run_python("print('ok')").passed
    assert run_python("while True:\n    pass", timeout_s=1).status == "timeout"
    assert run_python("x = bytearray(10 * 1024 ** 3)").status == "memory"
    assert run_python("import socket\nsocket.socket()").status == "blocked"
    assert run_python("import os\nos.system('true')").status == "blocked"
    assert run_python("assert False").status == "fail"
