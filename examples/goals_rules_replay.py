"""Goal insights (seed 000), rules and replay (seed 003) in one bank, end to end.

1. a research goal fails: ``finish_goal`` queues an insight; 2. a vulnerability scan fails on a
flaky API: the policy picks the dual reflector, which writes a rule and a replay example; 3. the
next prompt gets all three sections within one token budget.

With LESSONBANK_LLM set a real model reflects; without it a scripted model stands in.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from lessonbank import Episode, LessonBank
from lessonbank.llm import FakeLLM
from lessonbank.llm.base import Message

INSIGHT = "The price data was outdated; use web_search with recent date filter next time."
DUAL = """PRINCIPLE: IF an API answers 5xx THEN retry with exponential backoff BECAUSE outages are transient
PROCEDURE:
1. Query NVD API with product name and version
2. On a 5xx answer retry after 1 s, 2 s and 4 s
3. Filter results by severity >= HIGH"""


def scripted(messages: Sequence[Message]) -> str:
    """Answer as the reflector asked: the dual prompt asks for a PRINCIPLE, the insight prompt for prose."""
    return DUAL if "PRINCIPLE" in messages[0]["content"] else INSIGHT


def main() -> int:
    llm = None if os.environ.get("LESSONBANK_LLM") else FakeLLM(default=scripted, model="fake:example")
    namespace = sys.argv[1] if len(sys.argv) > 1 else "goals-example"
    with LessonBank(llm=llm, namespace=namespace) as bank:
        bank.finish_goal(
            "pricing-q3",
            title="Research competitor pricing",
            status="failed",
            outputs=["Collected list prices from three vendor pages"],
            errors=["the pages were last updated in 2023"],
        )
        episode = bank.record(
            Episode(
                task="Scan nginx 1.24 for known vulnerabilities",
                task_type="vulnerability_scan",
                agent="scanner",
                error="HTTP 503 from services.nvd.nist.gov",
                importance="high",
            )
        )
        decision = bank.show(episode.id)["decision"]
        print(f"policy: {decision['reason']} -> {decision['reflector']}")
        if not bank.flush(timeout=60):
            print("reflections still pending: see `lessonbank jobs`")
            return 1
        block = bank.context(
            "Scan openssl 3.0 for known vulnerabilities",
            goal_id="pricing-q3",
            agent="scanner",
            task_type="vulnerability_scan",
            formats=["past_reflections", "learned_rules", "replay"],
            budget_tokens=800,
        )
        print(block.text)
        print(f"({block.tokens} tokens, lessons {', '.join(block.lesson_ids)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
