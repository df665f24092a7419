"""Feedback replay: does a lesson confirmed helpful on one task rank higher for the next task like it?

On a copy of a bank, each case that has repeats (other diagnostics of the same rule on its example,
``repeats`` in the datasets) is one feedback episode: its first diagnostic (message and code, what the
agent saw) is the task, the lessons recall injects for it (top 5) are the context, and the episode
succeeds when the rule's lesson was among them (else it fails, with the same context). The bank's
worker then runs the feedback jobs (learning from use). Scored before and after (and after on a second
copy where only outcome attribution counted the episodes, learning from use off: the control), on
queries the feedback never saw: every repeat's code-only query (the next similar task), and the code-only query of
every case without repeats (no feedback touched their rules: they must not lose).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core import rank_metrics
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


def replay(
    db: Path,
    namespace: str,
    embedder: Embedder | None,
    cases: Sequence[dict[str, Any]],
    mode: str,
    home: Path,
) -> dict[str, Any]:
    """Feedback replayed on copies of the bank at ``db`` (left untouched): figures before, after with
    outcome attribution alone (the helpful / harmful counts), and after with learning from use too."""
    runs = [_replay_once(db, namespace, embedder, cases, mode, home, learn) for learn in (False, True)]
    control, learned = runs
    for part, figures in learned["figures"].items():
        figures["attribution only"] = control["figures"][part]["after"]
    return learned


def _replay_once(*where: Any) -> dict[str, Any]:
    db, namespace, embedder, cases, mode, home, learn = where
    copy = db.with_name(f"{db.stem}-feedback-{mode}.db")
    shutil.copyfile(db, copy)
    settings = Settings(home=home, learn_from_use=learn)
    bank = LessonBank(
        f"sqlite:///{copy}", namespace=namespace, settings=settings, worker=False, embedder=embedder
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
                part: {"before": rank_metrics(before[part]), "after": rank_metrics(after[part])}
                for part in before
            },
        }
    finally:
        bank.close()
        for leftover in copy.parent.glob(f"{copy.name}*"):
            leftover.unlink()
