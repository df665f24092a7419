"""After a decision: a second cycle does not re-propose what is applied or pending elsewhere, a
pinned fact stays in the core memory whatever an edit drops, and a decided proposal reads as
decided (its status, which operations were applied, no invitation to approve)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lessonbank.errors import InputError
from lessonbank.services.consolidation.documents import CORE_CAP_TOKENS
from lessonbank.services.consolidation.render import FOOTER_HINT
from tests.test_consolidation_llm import CORE, META, SUMMARY, SURVEY, Script, open_bank, proposed

AGAIN = """---
OPERATION: CONNECT
TARGET: les_gate -> refines -> les_smoke
REASON: the smoke test is part of the staging gate
---
OPERATION: EVOLVE
TARGET: none
CONTENT: Deploy failures are about order, not tools.
REASON: recurring theme
---
OPERATION: ARCHIVE
TARGET: les_twin_b
REASON: superseded by its twin
---
"""


def test_a_second_cycle_does_not_repropose_what_is_applied_or_pending(tmp_path: Path) -> None:
    llm = Script()
    with open_bank(tmp_path, llm) as bank:
        first, _ = proposed(bank, llm)
        connect = next(op for op in first.operations if op.kind == "connect")
        evolve = next(op for op in first.operations if op.kind == "evolve")
        bank.approve(first.id, only=[connect.id, evolve.id, "core"])  # the merge stays out
        llm.script(SURVEY, META, AGAIN, CORE, SUMMARY)
        second = bank.consolidate()
        offered = [op.kind for op in second.operations if op.status != "dropped"] if second else []
        assert "connect" not in offered and "evolve" not in offered  # both applied already
        assert "archive" in offered  # les_twin_b: the merge that named it was turned down
        assert second is not None
        llm.script(SURVEY, META, AGAIN, CORE, SUMMARY)
        third = bank.consolidate()
        # The archive of les_twin_b waits in the second proposal: not offered twice.
        assert third is None or all(op.kind != "archive" for op in third.operations if op.status != "dropped")
        assert bank.approve(second.id).status == "applied"
        log = bank.services.consolidation.documents().evolution_log()
        assert log.count("Deploy failures are about order, not tools.") == 1


def test_a_pinned_fact_stays_in_the_core_memory_whatever_an_edit_drops(tmp_path: Path) -> None:
    # The model wrote the pinned fact without its [les_gate] marker; the person's edit drops the line.
    llm = Script()
    with open_bank(tmp_path, llm) as bank:
        proposal, _ = proposed(bank, llm)
        assert proposal.core_memory is not None and "[les_gate]" not in proposal.core_memory
        edited = proposal.core_memory.replace(
            "- Deploys go through the staging gate.\n", "- Ship on Fridays.\n"
        )
        decided = bank.approve(proposal.id, edits={"core": edited})
        core = bank.core_memory()
        assert decided.core_memory == core
        facts = core.split("## Critical Facts")[1]
        assert "Ship on Fridays." in facts and "Deploys go through the staging gate. [les_gate]" in facts


def test_an_edit_with_no_room_for_a_pinned_fact_is_refused_saying_why(tmp_path: Path) -> None:
    llm = Script()
    with open_bank(tmp_path, llm) as bank:
        proposal, _ = proposed(bank, llm)
        assert proposal.core_memory is not None
        count = bank.services.count_tokens
        edited = proposal.core_memory.replace("- Deploys go through the staging gate.\n", "")
        filler = ""
        while count(edited.replace("Terse,", filler + " Terse,")) < CORE_CAP_TOKENS - 2:
            filler += " careful"
        edited = edited.replace("Terse,", filler + " Terse,")
        with pytest.raises(InputError, match=r"must keep the pinned fact\(s\) les_gate"):
            bank.approve(proposal.id, edits={"core": edited})
        assert bank.proposal(proposal.id).status == "pending"


def test_a_decided_proposal_reads_as_decided(tmp_path: Path) -> None:
    llm = Script()
    with open_bank(tmp_path, llm, consolidation_schedule="0 3 * * *") as bank:
        proposal, _ = proposed(bank, llm)
        pending = bank.services.consolidation.render(proposal.id)
        assert FOOTER_HINT in pending and "none scheduled" not in pending
        assert "(schedule '0 3 * * *')" in pending and "**Status**" not in pending
        merge = next(op for op in proposal.operations if op.kind == "merge")
        bank.approve(proposal.id, only=[merge.id], actor="alice")
        shown = bank.services.consolidation.render(proposal.id)
        assert "**Status**: partially applied by alice" in shown
        assert "core memory rewrite rejected" in shown
        assert f"[{merge.id}] merge (applied)" in shown
        extract = next(op for op in proposal.operations if op.kind == "extract")
        assert f"[{extract.id}] extract (rejected)" in shown
        assert FOOTER_HINT not in shown and "Reply with" not in shown
