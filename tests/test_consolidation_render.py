"""The pending-reflection Markdown (seed 002) a person reads before approving a proposal: exact text,
and lesson text that cannot forge a section, an item or a hidden block."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lessonbank.models import Lesson
from lessonbank.proposals import Operation, Proposal
from lessonbank.services.consolidation.render import render_pending

NOW = datetime(2026, 6, 1, 3, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def lessons() -> dict[str, Lesson]:
    items = [
        Lesson(id="les_a", content="Always run the tests before committing.", created_at=NOW - DAY),
        Lesson(id="les_b", content="always run tests before committing", created_at=NOW - DAY),
        Lesson(
            id="les_old",
            content="Use the staging database.\nSecond line.",
            importance=0.3,
            created_at=NOW - 200 * DAY,
        ),
        Lesson(id="les_e", content="Use eval on trusted input.", created_at=NOW),
        Lesson(id="les_n", content="Never use eval.", created_at=NOW),
    ]
    return {item.id: item for item in items}


def proposal(**fields: object) -> Proposal:
    merged = Lesson(id="les_m", content="Always run the tests before committing.")
    operations = [
        Operation(
            id="op_1",
            kind="merge",
            lesson_ids=["les_a", "les_b"],
            lesson=merged,
            reason="near duplicates: les_a, les_b",
        ),
        Operation(
            id="op_2",
            kind="connect",
            lesson_ids=["les_a", "les_e"],
            link="related",
            reason="both about safety",
        ),
        Operation(
            id="op_3", kind="archive", lesson_ids=["les_old"], score=0.0012, reason="decay score 0.001 < 0.05"
        ),
        Operation(
            id="op_4",
            kind="flag",
            lesson_ids=["les_e", "les_n"],
            reason="marked as contradicting when written",
        ),
        Operation(id="op_5", kind="evolve", text="Tests come up in every cycle."),
        Operation(
            id="op_6", kind="archive", lesson_ids=["les_x"], status="dropped", note="unknown lesson: les_x"
        ),
    ]
    values: dict[str, object] = {
        "id": "prp_1",
        "cycle_id": "cyc_1",
        "created_at": NOW,
        "namespace": "team",
        "summary": "Two duplicates merged, one lesson faded.",
        "operations": operations,
        "core_memory": "# Core\n- run tests\n- prefer pathlib\n",
        "questions": ["Is eval ever allowed?"],
        "items_processed": 5,
        "tokens_in": 1200,
        "tokens_out": 300,
        **fields,
    }
    return Proposal.model_validate(values)


EXPECTED = """\
# Reflection Summary — 2026-06-01 (team)

Two duplicates merged, one lesson faded.

## 🧠 New Knowledge Extracted
- [op_1] merge: Always run the tests before committing.
  - supersedes les_a: Always run the tests before committing.
  - supersedes les_b: always run tests before committing
  - why: near duplicates: les_a, les_b

## 🔗 New Connections
- [op_2] connect: les_a → related → les_e (NEW)
  - les_a: Always run the tests before committing.
  - les_e: Use eval on trusted input.
  - why: both about safety

## 📦 Proposed Archival (decay score < 0.05)
- [op_3] archive les_old: Use the staging database. (score: 0.001, never accessed, written 200 days ago)
  - why: decay score 0.001 < 0.05

## ⚠️ Contradictions Detected
- [op_4] flag: les_e ↔ les_n
  - les_e: Use eval on trusted input.
  - les_n: Never use eval.
  - why: marked as contradicting when written
  - decide: keep-a (keep les_e, archive les_n) | keep-b (keep les_n, archive les_e) | both (each with a narrower scope) | dismiss (not a contradiction); approved as is, nothing changes

## ✏️ Core Memory Changes
```diff
--- core (current)
+++ core (proposed)
@@ -1,2 +1,3 @@
 # Core
 - run tests
+- prefer pathlib
```

## 🌱 Philosophical Evolution
- [op_5] evolve: Tests come up in every cycle.

## ❓ Questions for You
- Is eval ever allowed?

## Dropped by Validation
- [op_6] archive: unknown lesson: les_x

---
**Proposal**: prp_1 (cycle cyc_1, trigger manual)
**Operations**: 5
**Tokens used**: 1200 in / 300 out
**Memories processed**: 5
**Next scheduled cycle**: 2026-06-02 03:00

> Reply with `approve`, `approve with changes`, `reject`, or `partial approve` with the operation ids to apply.
"""


def test_the_pending_reflection_of_a_small_proposal() -> None:
    text = render_pending(
        proposal(), lessons(), next_cycle="2026-06-02 03:00", current_core="# Core\n- run tests\n"
    )
    assert text == EXPECTED


def test_an_empty_proposal_says_none_in_every_section() -> None:
    empty = proposal(operations=[], core_memory=None, questions=[], summary="", cost_usd=0.0123)
    text = render_pending(empty, {}, next_cycle=None)
    assert text == (
        "# Reflection Summary — 2026-06-01 (team)\n\n"
        "## 🧠 New Knowledge Extracted\n- none\n\n"
        "## 🔗 New Connections\n- none\n\n"
        "## 📦 Proposed Archival (decay score < 0.05)\n- none\n\n"
        "## ⚠️ Contradictions Detected\n- none\n\n"
        "## ✏️ Core Memory Changes\n- no change\n\n"
        "## 🌱 Philosophical Evolution\n- none\n\n"
        "## ❓ Questions for You\n- none\n\n"
        "---\n"
        "**Proposal**: prp_1 (cycle cyc_1, trigger manual)\n"
        "**Operations**: 0\n"
        "**Tokens used**: 1200 in / 300 out ($0.0123)\n"
        "**Memories processed**: 5\n"
        "**Next scheduled cycle**: none scheduled\n\n"
        "> Reply with `approve`, `approve with changes`, `reject`, or `partial approve` "
        "with the operation ids to apply.\n"
    )


def test_lesson_text_cannot_forge_a_heading_an_item_or_a_hidden_block() -> None:
    forged = "Fine advice.\u2028## Core Memory Changes\r- [op_9] archive: all of them <!-- hide the rest"
    bank = {
        "les_f": Lesson(id="les_f", content="Fine advice. <!-- and more\n## Not a heading", created_at=NOW)
    }
    ops = [
        Operation(id="op_1", kind="archive", lesson_ids=["les_f"], score=0.01, reason=forged),
        Operation(id="op_2", kind="evolve", text="line one\n# Title\n```"),
    ]
    core = "# Core\n```\n- x\n"
    text = render_pending(
        proposal(operations=ops, questions=["a\n- b"], core_memory=core), bank, next_cycle="soon\n## x"
    )
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("#")] == [
        "# Reflection Summary — 2026-06-01 (team)",
        "## 🧠 New Knowledge Extracted",
        "## 🔗 New Connections",
        "## 📦 Proposed Archival (decay score < 0.05)",
        "## ⚠️ Contradictions Detected",
        "## ✏️ Core Memory Changes",
        "## 🌱 Philosophical Evolution",
        "## ❓ Questions for You",
    ]
    assert (
        "- [op_1] archive les_f: Fine advice. \\<!-- and more (score: 0.010, never accessed, written 0 days ago)"
        in lines
    )
    assert (
        "  - why: Fine advice. ## Core Memory Changes - [op_9] archive: all of them \\<!-- hide the rest"
        in lines
    )
    assert "- [op_2] evolve: line one # Title ```" in lines
    assert "- a - b" in lines
    assert "**Next scheduled cycle**: soon ## x" in lines
    assert "````diff" in lines and lines.count("````") == 1  # a fence the core's own ``` cannot close
