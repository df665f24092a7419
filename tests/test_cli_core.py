"""The shell's approve with changes (--edit through $EDITOR, --edit-file) and `lessonbank core`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lessonbank import LessonBank


def pending_proposal(db: str) -> tuple[str, str]:
    """A pending proposal with a merge and a core memory rewrite (a pinned lesson): (id, merge id)."""
    with LessonBank(db, worker=False) as bank:
        bank.import_lessons(
            [
                {"id": "les_twin_a", "content": "Run the migrations before the deploy.", "access_count": 2},
                {"id": "les_twin_b", "content": "run migrations before a deploy"},
                {"id": "les_pin", "content": "Never deploy on Fridays.", "pinned": True},
            ]
        )
        proposal = bank.consolidate()
        assert proposal is not None and proposal.core_memory is not None
        merge = next(op.id for op in proposal.operations if op.kind == "merge")
        return proposal.id, merge


def test_approve_with_changes_through_the_editor(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    proposal_id, merge = pending_proposal(db)
    # The "editor" is a real program given the file's path: it rewrites the merged lesson's text.
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text().replace('Run the migrations before the deploy.', "
        "'Always run the migrations, then deploy.'))\n"
    )
    done = cli_in_process(
        "--db", db, "approve", proposal_id, "--edit", extra_env={"EDITOR": f"{sys.executable} {editor}"}
    ).stdout.decode()
    assert f"applied {proposal_id}: 1 operation(s) applied, 1 edited" in done
    with LessonBank(db, worker=False) as bank:
        assert bank.get_lesson("les_twin_b").superseded_by is not None
        merged = bank.get_lesson(bank.get_lesson("les_twin_b").superseded_by or "")
        assert merged.content == "Always run the migrations, then deploy."
        decided = bank.proposal(proposal_id)
        assert decided.metadata["edits"][merge] == "Run the migrations before the deploy."
    shown = cli_in_process("--db", db, "core").stdout.decode()
    assert "## Critical Facts" in shown and "Never deploy on Fridays." in shown
    documents = json.loads(cli_in_process("--db", db, "core", "--json").stdout)
    assert documents["reflections"] == 1 and "| applied |" in documents["reflection_log"]


def test_approve_with_changes_from_a_file_leaving_a_part_out(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    proposal_id, merge = pending_proposal(db)
    with LessonBank(db, worker=False) as bank:
        from lessonbank.services.consolidation.edits import edit_file

        text = edit_file(bank.proposal(proposal_id))
    assert f"=== {merge} merge" in text and "=== core core-memory" in text
    # Deleting the core memory's block leaves it out, as --only would.
    kept = text.split("=== core core-memory")[0]
    path = tmp_path / "edited.md"
    path.write_text(kept)
    done = cli_in_process("--db", db, "approve", proposal_id, "--edit-file", str(path)).stdout.decode()
    assert f"partially applied {proposal_id}: 1 operation(s) applied" in done
    assert b"no core memory yet" in cli_in_process("--db", db, "core").stdout

    failed = cli_in_process("--db", db, "approve", proposal_id, "--edit", ok=False, extra_env={"EDITOR": ""})
    assert failed.returncode != 0


def test_an_edit_naming_an_unknown_part_is_refused(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    proposal_id, _ = pending_proposal(db)
    path = tmp_path / "edited.md"
    path.write_text("=== op_made_up merge\nsomething\n")
    failed = cli_in_process("--db", db, "approve", proposal_id, "--edit-file", str(path), ok=False)
    assert failed.returncode != 0 and b"does not offer" in failed.stderr
    with LessonBank(db, worker=False) as bank:
        assert bank.proposal(proposal_id).status == "pending"
        assert bank.core_memory() == ""
