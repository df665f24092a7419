"""lessonbank's full cycle on the embedded SQLite default (seed 004's example, end to end).

1. an agent fails a task and records the episode; 2. lessonbank reflects on it in the
background and stores a lesson; 3. you add a lesson of your own; 4. a week later a similar
task comes in and its prompt gets the lessons, within a token budget.

With LESSONBANK_LLM set (e.g. openai:gpt-4o-mini and OPENAI_API_KEY) a real model reflects;
without it a scripted model stands in, so the demo needs no key and no network.
"""

from __future__ import annotations

import os
import sys

from lessonbank import Episode, LessonBank
from lessonbank.llm import FakeLLM

SCRIPTED_REPLY = """<situation>Refactoring large Go files (>1000 lines)</situation>
<mistake>Attempted full rewrite via @coder write</mistake>
<correction>Use @coder patch or Edit tool for surgical changes</correction>
<tags>go, refactor, large-file, edit-tool</tags>"""


def main() -> int:
    real_llm = os.environ.get("LESSONBANK_LLM")
    llm = None if real_llm else FakeLLM([SCRIPTED_REPLY], model="fake:quickstart")
    namespace = sys.argv[1] if len(sys.argv) > 1 else "quickstart"
    with LessonBank(llm=llm, namespace=namespace) as bank:
        print(f"bank: {bank.settings.db_url} (namespace {namespace})")
        print(f"reflection model: {real_llm or 'a scripted stand-in (set LESSONBANK_LLM for a real one)'}\n")

        episode = bank.record(
            Episode(
                task="/coder refactor pkg/engine to extract Close method",
                attempt="rewrote the whole 2000-line file with @coder write",
                status="failure",
                error="provider timeout after 120s",
                task_type="code",
                agent="coder",
            )
        )
        print(f"1. recorded {episode.id}: {bank.show(episode.id)['decision']['reason']}")

        finished = bank.flush(timeout=120)
        if not bank.show(episode.id)["reflections"]:
            print("2. no new reflection (see the reason above; run with another namespace for a fresh bank)")
        for reflection in bank.show(episode.id)["reflections"]:
            print(
                f"2. reflection {reflection['status']}: lessons {reflection['lesson_ids'] or reflection['skip_reason']}"
            )
        if not finished:
            print("2. reflection not finished yet: see `lessonbank jobs`")

        manual = bank.add_lesson(
            "when editing large Go files use Edit, not full rewrite", tags=["go", "edit-file"]
        )
        print(f"3. added your own lesson {manual.id}\n")

        task = "/coder refactor pkg/auth/manager.go split into smaller files"
        block = bank.context(task, budget_tokens=800)
        print(f"4. context for {task!r} ({block.tokens} of 800 tokens, {len(block.lesson_ids)} lessons):\n")
        print(block.text)
        print(f"\nstats: {bank.stats()['lessons']} lessons, {bank.stats()['episodes']} episodes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
