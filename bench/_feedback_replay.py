"""Feedback replay: does a lesson confirmed helpful on one task rank higher for the next task like it?

On a copy of a bank, each case that has repeats (other diagnostics of the same rule on its example,
``repeats`` in the datasets) is one feedback episode: its first diagnostic (message and code, what the
agent saw) is the task, the lessons recall injects for it (top 5) are the context, and the episode
succeeds when the rule's lesson was among them (else it fails, with the same context). The bank's
worker then runs the feedback jobs (learning from use). Scored before and after, on queries the
feedback never saw: every repeat's code-only query (the next similar task), and the code-only query of
every case without repeats (no feedback touched their rules: they must not lose).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lessonbank import Episode, LessonBank, Settings
from lessonbank.retrieval.embedders import Embedder

CONTEXT_K = 5
SCORE_K = 10


def ranks(bank: LessonBank, pairs: Sequence[tuple[str, str]], mode: str) -> list[int | None]:
    out: list[int | None] = []
    for query, expected in pairs:
        ids = [hit.lesson.id for hit in bank.recall(query, k=SCORE_K, mode=mode)] if query.strip() else []
        out.append(ids.index(expected) + 1 if expected in ids else None)
    return out


def metrics(found: Sequence[int | None]) -> dict[str, float | int]:
    n = max(len(found), 1)
    return {
        "queries": len(found),
        "recall@1": sum(1 for r in found if r == 1) / n,
        "recall@5": sum(1 for r in found if r is not None and r <= 5) / n,
        "mrr@10": sum(1 / r for r in found if r is not None) / n,
    }


def replay(
    db: Path,
    namespace: str,
    embedder: Embedder | None,
    cases: Sequence[dict[str, Any]],
    mode: str,
    home: Path,
) -> dict[str, Any]:
    """Feedback replayed on a copy of the bank at ``db`` (left untouched); figures before and after."""
    copy = db.with_name(f"{db.stem}-feedback-{mode}.db")
    shutil.copyfile(db, copy)
    bank = LessonBank(
        f"sqlite:///{copy}",
        namespace=namespace,
        settings=Settings(home=home),
        worker=False,
        embedder=embedder,
    )
    try:
        taught = [case for case in cases if case.get("repeats")]
        nexts = [(r["queries"]["code"], case["expected"]) for case in taught for r in case["repeats"]]
        untouched = [(case["queries"]["code"], case["expected"]) for case in cases if not case.get("repeats")]
        before = {
            "next similar task": ranks(bank, nexts, mode),
            "rules without feedback": ranks(bank, untouched, mode),
        }
        successes = 0
        for case in taught:
            task = case["queries"]["message+code"]
            injected = [hit.lesson.id for hit in bank.recall(task, k=CONTEXT_K, mode=mode)]
            helped = case["expected"] in injected
            successes += helped
            episode = Episode(
                task=task,
                status="success" if helped else "failure",
                error=None if helped else "the diagnostic is still reported",
            )
            bank.record(episode, context_ids=injected)
        asyncio.run(bank.new_worker([namespace]).run(until_idle=True))
        after = {
            "next similar task": ranks(bank, nexts, mode),
            "rules without feedback": ranks(bank, untouched, mode),
        }
        return {
            "mode": mode,
            "feedback_episodes": len(taught),
            "successes": successes,
            "figures": {
                part: {"before": metrics(before[part]), "after": metrics(after[part])} for part in before
            },
        }
    finally:
        bank.close()
        for leftover in copy.parent.glob(f"{copy.name}*"):
            leftover.unlink()
