"""The shell's lifecycle commands: archive, restore (and approve), audit; forget audited too."""

from __future__ import annotations

import json
from pathlib import Path

from lessonbank import LessonBank
from lessonbank.models import Lesson

SHIP = "ship releases behind a feature flag"


def test_archive_restore_and_the_audit_log(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    lesson_id = json.loads(cli_in_process("--db", db, "add", SHIP, "--json").stdout)["id"]
    assert (
        b"archived " + lesson_id.encode()
        in cli_in_process("--db", db, "archive", lesson_id, "--reason", "flags retired").stdout
    )
    assert b"already archived" in cli_in_process("--db", db, "archive", lesson_id).stdout
    assert json.loads(cli_in_process("--db", db, "recall", "feature flag releases", "--json").stdout) == []
    listed = json.loads(cli_in_process("--db", db, "lessons", "--status", "archived", "--json").stdout)
    assert [x["id"] for x in listed] == [lesson_id]
    assert b"restored " + lesson_id.encode() in cli_in_process("--db", db, "restore", lesson_id).stdout
    assert b"already active" in cli_in_process("--db", db, "restore", lesson_id).stdout
    hits = json.loads(cli_in_process("--db", db, "recall", "feature flag releases", "--json").stdout)
    assert [h["lesson"]["id"] for h in hits] == [lesson_id]

    rows = json.loads(cli_in_process("--db", db, "audit", "--json").stdout)
    assert [(r["action"], r["actor"]) for r in rows] == [("restore", "cli"), ("archive", "cli")]
    assert rows[1]["before"]["status"] == "active" and rows[1]["after"]["status"] == "archived"
    assert "flags retired" in rows[1]["summary"] and rows[0]["proposal_id"] is None
    table = cli_in_process("--db", db, "audit", "--lesson", lesson_id, "--limit", "1").stdout.decode()
    for heading in ("when", "actor", "action", "lesson", "summary"):
        assert heading in table
    assert "restore" in table and "archive" not in table.replace("archived", "")

    cli_in_process("--db", db, "forget", lesson_id)
    (deleted, *_) = json.loads(cli_in_process("--db", db, "audit", "--lesson", lesson_id, "--json").stdout)
    assert deleted["action"] == "delete" and deleted["before"]["content"] == SHIP and deleted["after"] is None


def test_restore_approves_a_quarantined_lesson(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    with LessonBank(db, worker=False) as bank:
        held = bank.services.scope.store.write_lesson(Lesson(content=SHIP, status="quarantined")).lesson
    assert (
        b"approved " + held.id.encode() + b" (was quarantined)"
        in cli_in_process("--db", db, "restore", held.id).stdout
    )
    (row,) = json.loads(cli_in_process("--db", db, "audit", "--json").stdout)
    assert (row["action"], row["actor"], row["lesson_id"]) == ("approve", "cli", held.id)


def test_unknown_ids_fail_cleanly(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    for command in ("archive", "restore"):
        refused = cli_in_process("--db", db, command, "les_nothing", ok=False)
        assert refused.returncode != 0 and b"les_nothing" in refused.stderr
    assert json.loads(cli_in_process("--db", db, "audit", "--json").stdout) == []
    assert cli_in_process("--db", db, "audit", "--limit", "0", ok=False).returncode == 2


def test_edit_pins_and_tags_a_lesson(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    with LessonBank(db, worker=False) as bank:
        lesson_id = bank.add_lesson("Never deploy on Fridays.").id
    shown = cli_in_process(
        "--db", db, "edit", lesson_id, "--pin", "--tag", "deploy", "--importance", "0.9"
    ).stdout
    assert f"{lesson_id}: pinned, tags deploy, importance 0.90".encode() in shown
    assert b"not pinned" in cli_in_process("--db", db, "edit", lesson_id, "--unpin").stdout
    nothing = cli_in_process("--db", db, "edit", lesson_id, ok=False)
    assert nothing.returncode != 0 and b"nothing to edit" in nothing.stderr
    with LessonBank(db, worker=False) as bank:
        rows = bank.audit(lesson_id=lesson_id)
        assert [(row.action, row.actor) for row in rows] == [("edit", "cli"), ("edit", "cli")]
