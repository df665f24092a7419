"""Without NumPy (an environment where it cannot be installed) the bank, its CLI, lexical recall and a
consolidation cycle still work: recall ranks in the store. A subprocess blocks the import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
sys.modules["numpy"] = None  # any import of numpy now fails, as on a base install
from lessonbank import LessonBank
from lessonbank.cli import app  # the CLI imports every command group
with LessonBank(sys.argv[1], worker=False) as bank:
    bank.import_lessons([{"content": "Run the migrations before the deploy."},
                         {"content": "run migrations before a deploy"}])
    proposal = bank.consolidate()
    assert proposal is not None and [op.kind for op in proposal.operations] == ["merge"]
    bank.approve(proposal.id)
    assert len(bank.lessons()) == 1
    assert bank.recall("deploy migrations", k=1, mode="lexical")[0].lesson.content.startswith("Run")
print("ok")
"""


def test_the_bank_and_a_cycle_run_without_numpy(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, f"sqlite:///{tmp_path / 'bank.db'}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
