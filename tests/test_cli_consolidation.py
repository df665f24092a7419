"""The shell's consolidation commands: consolidate (queue a cycle, or --wait for its proposal),
proposals (list, show, revert), approve (all or --only some), reject, dreams; decisions are audited
with the actor ``cli``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lessonbank import LessonBank


def seed(db: str) -> None:
    old = (datetime.now(UTC) - timedelta(days=400)).isoformat()
    with LessonBank(db, worker=False) as bank:
        bank.import_lessons(
            [
                {"id": "les_twin_a", "content": "Run the migrations before the deploy.", "access_count": 2},
                {"id": "les_twin_b", "content": "run migrations before a deploy"},
                {
                    "id": "les_stale",
                    "content": "use the old staging vpn profile",
                    "importance": 0.1,
                    "created_at": old,
                    "updated_at": old,
                },
            ]
        )


def test_a_cycle_from_the_shell(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    seed(db)
    assert (
        b"dry run: would propose 1 archive, 1 merge"
        in cli_in_process("--db", db, "consolidate", "--dry-run").stdout
    )
    shown = cli_in_process("--db", db, "consolidate", "--wait").stdout.decode()
    assert "# Reflection Summary" in shown and "Proposed Archival" in shown and "les_stale" in shown
    [listed] = json.loads(cli_in_process("--db", db, "proposals", "--json").stdout)
    assert listed["status"] == "pending"
    table = cli_in_process("--db", db, "proposals").stdout.decode()
    assert listed["id"] in table and "1 archive, 1 merge" in table
    assert "les_twin_b" in cli_in_process("--db", db, "proposals", "show", listed["id"]).stdout.decode()

    merge = next(op["id"] for op in listed["operations"] if op["kind"] == "merge")
    done = cli_in_process("--db", db, "approve", listed["id"], "--only", merge).stdout.decode()
    assert f"partially applied {listed['id']}: 1 operation(s) applied" in done
    rows = json.loads(cli_in_process("--db", db, "audit", "--json").stdout)
    assert {(r["action"], r["actor"], r["proposal_id"]) for r in rows} == {
        ("merge", "cli", listed["id"]),
        ("supersede", "cli", listed["id"]),
    }
    assert (
        b"nothing to propose" in cli_in_process("--db", db, "consolidate", "--wait").stdout
    )  # archive turned down
    runs = json.loads(cli_in_process("--db", db, "dreams", "--json").stdout)
    assert [run["outcome"] for run in runs] == ["empty", "proposed"]
    assert "proposed" in cli_in_process("--db", db, "dreams").stdout.decode()

    assert (
        f"reverted {listed['id']}".encode()
        in cli_in_process("--db", db, "proposals", "revert", listed["id"]).stdout
    )
    again = cli_in_process("--db", db, "approve", listed["id"], ok=False)
    assert again.returncode != 0 and b"error:" in again.stderr and b"only a pending proposal" in again.stderr


def test_reject_from_the_shell(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    seed(db)
    proposal = json.loads(cli_in_process("--db", db, "consolidate", "--wait", "--json").stdout)
    assert (
        b"rejected " in cli_in_process("--db", db, "reject", proposal["id"], "--reason", "keep both").stdout
    )
    [decided] = json.loads(cli_in_process("--db", db, "proposals", "--status", "rejected", "--json").stdout)
    assert decided["decision_reason"] == "keep both" and decided["decided_by"] == "cli"
    assert json.loads(cli_in_process("--db", db, "consolidate", "--wait", "--json").stdout) is None
    missing = cli_in_process("--db", db, "approve", "prp_nope", ok=False)
    assert missing.returncode != 0 and b"error:" in missing.stderr


def test_consolidate_queues_a_cycle_for_a_worker(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    seed(db)
    said = cli_in_process("--db", db, "consolidate").stdout.decode()
    job = json.loads(
        cli_in_process("--db", db, "consolidate", "--json").stdout
    )  # the same cycle, still queued
    assert (
        job["kind"] == "consolidate" and job["status"] == "queued" and job["payload"]["trigger"] == "manual"
    )
    assert f"cycle job {job['id']} (queued, trigger manual)" in said and "lessonbank worker" in said
    assert json.loads(cli_in_process("--db", db, "proposals", "--json").stdout) == []  # nothing ran yet
    shown = cli_in_process("--db", db, "consolidate", "--wait").stdout.decode()  # runs that queued cycle here
    assert "# Reflection Summary" in shown
    [run] = json.loads(cli_in_process("--db", db, "dreams", "--json").stdout)
    assert run["outcome"] == "proposed"
    jobs = json.loads(cli_in_process("--db", db, "jobs", "--json").stdout)
    assert [(j["id"], j["status"]) for j in jobs] == [(job["id"], "done")]
