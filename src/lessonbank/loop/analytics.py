"""Loop analytics (seed 001): how loops learn, per loop and over the namespace.

Per loop: iterations, success, reward curve, learning rate ((last − first reward) / n, n the
number of iterations), failure categories, lessons written, mean reflection confidence.
Overall: success rate, average iterations, average learning rate, failure-category
distribution, and lesson reuse rate: the share of lessons that loops wrote which a later loop
was given as prior knowledge. ``plot_rewards`` draws the reward curves (matplotlib, an extra).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lessonbank.errors import ConfigError
from lessonbank.loop.records import loops

if TYPE_CHECKING:
    from lessonbank.services.scope import Scoped


@dataclass
class LoopStats:
    loop_id: str
    task: str
    status: str
    passed: bool
    iterations: int
    rewards: list[float]
    learning_rate: float
    failure_categories: list[str]
    lessons_written: int
    prior_lessons: int
    avg_confidence: float | None
    tokens: int
    cost_usd: float


@dataclass
class Analytics:
    loops: list[LoopStats] = field(default_factory=list)
    success_rate: float = 0.0
    avg_iterations: float = 0.0
    avg_learning_rate: float = 0.0
    failure_categories: dict[str, int] = field(default_factory=dict)
    lessons_written: int = 0
    lessons_reused: int = 0
    lesson_reuse_rate: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def learning_rate(rewards: list[float]) -> float:
    """The seed's learning rate: (last − first) / n; 0 for fewer than two rewards."""
    if len(rewards) < 2:
        return 0.0
    return round((rewards[-1] - rewards[0]) / len(rewards), 4)


def analyze(bank: Scoped) -> Analytics:
    stats: list[LoopStats] = []
    written_by: dict[str, str] = {}  # lesson id → the loop that wrote it
    injected_into: dict[str, set[str]] = {}  # lesson id → loops that got it as prior knowledge
    for loop_id, iterations in loops(bank).items():
        records = [episode.metadata["reflexion"] for episode in iterations]
        runs = [episode.metadata.get("reflexion_run", {}) for episode in iterations]
        rewards = [float(record["evaluator_output"].get("reward_signal", 0.0)) for record in records]
        reflections = [r["self_reflection"] for r in records if r["self_reflection"].get("reflection_text")]
        categories = [
            str((r.get("credit_assignment") or {}).get("failure_category", "other")) for r in reflections
        ]
        confidences = [float(r["confidence"]) for r in reflections if "confidence" in r]
        lesson_ids = [lesson_id for run in runs for lesson_id in run.get("lesson_ids", [])]
        for lesson_id in lesson_ids:
            written_by.setdefault(lesson_id, loop_id)
        prior = list(runs[0].get("prior_lesson_ids", [])) if runs else []
        for lesson_id in prior:
            injected_into.setdefault(lesson_id, set()).add(loop_id)
        status = str(runs[-1].get("loop_status", "running"))
        stats.append(
            LoopStats(
                loop_id=loop_id,
                task=str(records[0].get("task_description", "")),
                status=status,
                passed=bool(records[-1]["evaluator_output"].get("passed")),
                iterations=len(records),
                rewards=rewards,
                learning_rate=learning_rate(rewards),
                failure_categories=categories,
                lessons_written=len(lesson_ids),
                prior_lessons=len(prior),
                avg_confidence=round(sum(confidences) / len(confidences), 3) if confidences else None,
                tokens=sum(int(run.get("tokens_in", 0)) + int(run.get("tokens_out", 0)) for run in runs),
                cost_usd=round(sum(float(run.get("cost_usd", 0.0) or 0.0) for run in runs), 6),
            )
        )
    result = Analytics(loops=stats)
    if not stats:
        return result
    result.success_rate = round(sum(s.passed for s in stats) / len(stats), 4)
    result.avg_iterations = round(sum(s.iterations for s in stats) / len(stats), 3)
    result.avg_learning_rate = round(sum(s.learning_rate for s in stats) / len(stats), 4)
    result.failure_categories = dict(Counter(c for s in stats for c in s.failure_categories).most_common())
    result.lessons_written = len(written_by)
    result.lessons_reused = sum(
        1 for lesson_id, owner in written_by.items() if injected_into.get(lesson_id, set()) - {owner}
    )
    result.lesson_reuse_rate = round(result.lessons_reused / len(written_by), 4) if written_by else 0.0
    return result


def plot_rewards(analytics: Analytics, path: str | Path) -> Path:
    """A PNG of every loop's reward curve. Needs ``pip install 'lessonbank[plots]'``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError("plots need matplotlib: pip install 'lessonbank[plots]'") from exc
    target = Path(path)
    figure, axes = plt.subplots(figsize=(8, 4.5))
    try:
        for loop in analytics.loops:
            axes.plot(range(len(loop.rewards)), loop.rewards, marker="o", label=loop.loop_id[:40])
        axes.set_xlabel("iteration")
        axes.set_ylabel("reward")
        axes.set_ylim(-0.05, 1.05)
        axes.set_title(f"Reward per iteration ({len(analytics.loops)} loops)")
        if 0 < len(analytics.loops) <= 12:
            axes.legend(fontsize="small")
        axes.grid(alpha=0.3)
        figure.tight_layout()
        figure.savefig(target, format="png", dpi=100)
    finally:
        plt.close(figure)
    return target
