"""What the reflection policy costs on the caller's side, and what the new context sections cost.

1. ``record()`` latency for episodes WITH an agent (the policy then reads the agent's recent history
   for the failure streak and cooldown) against episodes without one, on a bank whose worker LLM takes
   2 s per call (``FakeLLM(delay_s=2.0)``), 2,000 failing episodes over 20 agents, each call timed.
2. ``context()`` with ``past_reflections``, ``learned_rules`` and ``replay`` sections over a bank holding
   200 goals' insights, 10 rules for each of 20 agents and 100 procedures for each of 10 task types
   (written through the same placement code the worker uses), 300 calls after 20 warm-up calls.

Run from the repository root::

    .venv/bin/python bench/policy.py            # JSON to bench/results/policy.json
    .venv/bin/python bench/policy.py --quick    # 300 episodes, 100 context calls
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lessonbank import Episode, LessonBank, Settings
from lessonbank.llm import FakeLLM
from lessonbank.models import Lesson
from lessonbank.services.pools import place

SEED = 3003
OUT = Path(__file__).resolve().parent / "results" / "policy.json"
REPLY = "<situation>s</situation><correction>c</correction><tags>a, b</tags>"
TARGET_RECORD_P99_MS = 2.0
TARGET_CONTEXT_P99_MS = 15.0


def summarize(samples_ns: Sequence[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6

    return {"p50_ms": rank(0.50), "p95_ms": rank(0.95), "p99_ms": rank(0.99), "max_ms": ordered[-1] / 1e6}


def timed(call: Callable[[], object]) -> int:
    start = time.perf_counter_ns()
    call()
    return time.perf_counter_ns() - start


def bench_record(workdir: Path, n: int, with_agent: bool) -> dict[str, float]:
    rng = random.Random(SEED)
    settings = Settings(home=workdir / "home")
    llm = FakeLLM(default=REPLY, delay_s=2.0)
    name = "agent" if with_agent else "anon"
    bank = LessonBank(f"sqlite:///{workdir / f'{name}.db'}", llm=llm, settings=settings)
    samples = []
    try:
        for index in range(n):
            episode = Episode(
                task=f"task {index} {rng.random()}",
                error=f"error {rng.randint(0, 10**9)}",
                agent=f"agent-{index % 20}" if with_agent else None,
            )
            samples.append(timed(lambda e=episode: bank.record(e)))  # type: ignore[misc]
    finally:
        bank.close()
    return summarize(samples)


def fill(bank: LessonBank) -> None:
    store, now = bank.store, bank.clock()
    lessons: list[Lesson] = []
    for goal in range(200):
        lessons.append(
            Lesson(
                kind="insight",
                content=f"Insight {goal}: check the data source date before trusting prices.",
                goal_id=f"g{goal}",
                importance=0.5 + (goal % 5) / 10,
                metadata={"goal_title": f"Goal {goal}"},
            )
        )
    for agent in range(20):
        for rule in range(10):
            lessons.append(
                Lesson(
                    kind="principle",
                    content=f"IF case {agent}-{rule} happens THEN do step {rule}",
                    agent=f"a{agent}",
                )
            )
    for task_type in range(10):
        for proc in range(100):
            result = "failure" if proc % 3 == 0 else "success"
            lessons.append(
                Lesson(
                    kind="procedure",
                    content=f"Task: scan host {proc} type {task_type}\nResult: {result}\nSteps:\n1. scan\n2. report",
                    task_type=f"type{task_type}",
                    metadata={"result": result, "task": f"scan host {proc} type {task_type}"},
                )
            )
    for lesson in lessons:  # the worker's placement: stamps expiry, keeps caps
        for ready in place(store, [lesson], now):
            store.write_lesson(ready)


def bench_context(workdir: Path, calls: int) -> dict[str, Any]:
    rng = random.Random(SEED)
    with LessonBank(f"sqlite:///{workdir / 'context.db'}", settings=Settings(home=workdir / "home")) as bank:
        start = time.perf_counter()
        fill(bank)
        fill_s = time.perf_counter() - start
        formats = ["past_reflections", "learned_rules", "replay"]

        def one() -> object:
            n = rng.randint(0, 199)
            return bank.context(
                f"scan host {n} type {n % 10}",
                goal_id=f"g{n}",
                agent=f"a{n % 20}",
                task_type=f"type{n % 10}",
                formats=formats,
            )

        for _ in range(20):
            one()
        samples = [timed(one) for _ in range(calls)]
    return {"fill_s": fill_s, **summarize(samples)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    episodes, calls = (300, 100) if args.quick else (2000, 300)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        results = {
            "record_without_agent": bench_record(work, episodes, with_agent=False),
            "record_with_agent": bench_record(work, episodes, with_agent=True),
            "context_sections": bench_context(work, calls),
        }
    rows = [
        ("record() no agent", results["record_without_agent"], TARGET_RECORD_P99_MS),
        ("record() with agent (history read)", results["record_with_agent"], TARGET_RECORD_P99_MS),
        ("context(3 sections)", results["context_sections"], TARGET_CONTEXT_P99_MS),
    ]
    print(f"{'figure':<38} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'target p99':>11}")
    for name, row, target in rows:
        print(f"{name:<38} {row['p50_ms']:>8.2f} {row['p95_ms']:>8.2f} {row['p99_ms']:>8.2f} {target:>11.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
