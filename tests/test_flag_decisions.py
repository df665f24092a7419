"""A FLAG's decision in the proposal's edit format: the file offers the choices with each lesson's
text and scope, a decided block is read back as the decision, an undecided one as no edit; and the
same choices on the dashboard's proposal page, in Chromium (screenshots under ``tmp_path``/screens)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lessonbank import LessonBank
from lessonbank.errors import InputError
from lessonbank.models import Lesson
from lessonbank.proposals import Operation, Proposal
from lessonbank.server.app import create_app
from lessonbank.server.auth import KeyStore
from lessonbank.services.consolidation.edits import apply_edits, edit_file, read_edit_file
from lessonbank.services.consolidation.flags import UNDECIDED, decision_text, open_flags, read_decision
from lessonbank.settings import Settings
from tests.test_dashboard import CHROMIUM, _chromium_or_skip
from tests.threaded_server import serving

NOW = datetime(2027, 1, 1, tzinfo=UTC)


def lesson(lesson_id: str, content: str, **fields: object) -> Lesson:
    return Lesson(id=lesson_id, content=content, created_at=NOW, updated_at=NOW, **fields)  # type: ignore[arg-type]


FLAG = Operation(id="op_flag", kind="flag", lesson_ids=["les_a", "les_b"], reason="opposed")
PROPOSAL = Proposal(cycle_id="cyc_1", operations=[FLAG])
LESSONS = {
    "les_a": lesson("les_a", "Cache the token.", agent="ops"),
    "les_b": lesson("les_b", "Never cache the token.", task_type="security"),
}


def test_the_edit_file_offers_the_choices_and_each_lessons_scope() -> None:
    text = edit_file(PROPOSAL, lessons=LESSONS)
    block = text.split("=== op_flag flag\n", 1)[1]
    assert UNDECIDED == "decision: keep-a | keep-b | both | dismiss"
    assert UNDECIDED in block
    assert "# A les_a: Cache the token." in block and "# B les_b: Never cache the token." in block
    assert (
        "a.agent: ops" in block and "b.task_type: security" in block and "a.text: Cache the token." in block
    )
    # Left as it is: kept (approved) and no decision.
    assert read_edit_file(text, PROPOSAL) == (["op_flag"], {})


def test_a_decided_block_is_read_back_and_applied_as_the_decision() -> None:
    text = (
        edit_file(PROPOSAL, lessons=LESSONS)
        .replace(UNDECIDED, "decision: both")
        .replace("a.agent: ops", "a.agent: fetcher")
    )
    kept, edits = read_edit_file(text, PROPOSAL)
    assert kept == ["op_flag"]
    decided = apply_edits(PROPOSAL, edits, {"op_flag"}, "alice")
    [op] = decided.operations
    assert op.decision == "both"
    assert op.revisions["les_a"]["agent"] == "fetcher"
    assert op.note == "decided by alice: both"


def test_a_form_says_the_same_as_the_file() -> None:
    text = decision_text("keep-b")
    assert read_decision(text, FLAG) == ("keep-b", {})
    both = decision_text("both", {"a.agent": "ops", "b.text": "  Never  cache\n it. "})
    assert read_decision(both, FLAG) == (
        "both",
        {"les_a": {"agent": "ops"}, "les_b": {"text": "Never cache it."}},
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("decision: keep-c", "unknown decision"),
        ("decision: both\nc.agent: x", "unknown field"),
        ("decision: both\na.text:", "a.text is empty"),
        ("choose keep-a", "is not 'name: value'"),
    ],
)
def test_a_bad_decision_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_decision(text, FLAG)


def test_open_flags_are_those_of_pending_proposals() -> None:
    decided = PROPOSAL.model_copy(update={"status": "applied"})
    assert open_flags([PROPOSAL, decided]) == {"les_a": ["les_b"], "les_b": ["les_a"]}
    assert open_flags([decided]) == {}


# ---------------------------------------------------------------------- the proposal page, in Chromium


@pytest.fixture
def flagged_server(tmp_path: Path) -> Iterator[tuple[str, Settings, str]]:
    """A real server over a SQLite bank whose pending proposal flags two contradicting lessons."""
    settings = Settings(home=tmp_path / "home", db=f"sqlite:///{tmp_path / 'bank.db'}")
    mark = {"contradicts": [{"id": "les_yes", "similarity": 0.95, "by": "vector:test"}]}
    with LessonBank(settings=settings, worker=False) as bank:
        bank.import_lessons(
            [
                {"id": "les_yes", "content": "Cache the auth token between calls.", "agent": "fetcher"},
                {"id": "les_no", "content": "Never cache the auth token between calls.", "metadata": mark},
            ]
        )
        proposal = bank.consolidate()
        assert proposal is not None
    app = create_app(settings, keys=KeyStore(settings.home / "keys.json"), worker=False)
    with serving(app) as base:
        yield base, settings, proposal.id


def test_a_flag_is_decided_on_the_proposal_page_in_chromium(
    flagged_server: tuple[str, Settings, str], tmp_path: Path
) -> None:
    _chromium_or_skip()
    from playwright.sync_api import sync_playwright

    base, settings, proposal_id = flagged_server
    screens = tmp_path / "screens"
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            problems: list[str] = []
            page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
            page.goto(f"{base}/proposals/{proposal_id}")
            decide = page.locator("fieldset.flag-decision")
            for label in ("No decision", "Keep A (", "Keep B (", "Keep both", "Dismiss"):
                assert decide.get_by_label(label, exact=False).count() == 1, label
            assert decide.get_by_label("No decision", exact=False).is_checked()
            assert page.get_by_label("apply").count() == 0  # no checkbox that says nothing about a flag
            page.screenshot(path=str(screens / "flag-open.png"), full_page=True)
            decide.get_by_label("Keep both", exact=False).check()
            first = page.locator("fieldset.flag-decision code").first.inner_text()  # lesson A
            no, yes = ("a", "b") if first == "les_no" else ("b", "a")
            page.locator(f'input[name$=":{no}.task_type"]').fill("security")
            page.locator(f'input[name$=":{yes}.agent"]').fill("")
            page.screenshot(path=str(screens / "flag-both.png"), full_page=True)
            page.get_by_role("button", name="Approve all").click()
            page.get_by_text("Proposal applied.").wait_for()
            page.get_by_text("decision: kept both, narrowed").wait_for()
            page.screenshot(path=str(screens / "flag-decided.png"), full_page=True)
            assert problems == []
        finally:
            browser.close()
    with LessonBank(settings=settings, worker=False) as bank:
        assert bank.get_lesson("les_no").task_type == "security"
        assert bank.get_lesson("les_yes").agent is None
        [flag] = [op for op in bank.proposal(proposal_id).operations if op.kind == "flag"]
        assert (flag.status, flag.decision) == ("applied", "both")
        assert {row.action for row in bank.audit(limit=20) if row.proposal_id == proposal_id} == {"edit"}
