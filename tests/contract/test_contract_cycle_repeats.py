"""On every store: a cycle does not propose again what a pending proposal already holds, so two
cycles never offer the same change twice and approving one never leaves the other failing."""

from __future__ import annotations

from lessonbank import LessonBank
from tests.contract.conftest import Clock
from tests.contract.test_contract_cycle import kinds, seeded


def test_what_a_pending_proposal_holds_is_not_proposed_again(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        seeded(bank, clock)
        first = bank.consolidate()
        assert first is not None and kinds(first) == ["archive", "flag", "merge"]
        clock.advance(60)
        assert bank.consolidate() is None  # the archive, merge and flag wait in the first proposal
        assert [p.id for p in bank.proposals(status="pending")] == [first.id]
        assert bank.approve(first.id).status == "applied"
        assert bank.get_lesson("les_stale").status == "archived"
        clock.advance(60)
        assert bank.consolidate() is None
