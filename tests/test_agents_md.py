"""The rules section of AGENTS.md / CLAUDE.md (lessonbank.integrations.agents_md): written between
its markers only, byte for byte the same when exported twice, and read back as a pending proposal,
applied on approval, on every store."""

# ruff: noqa: F811  (the fixtures imported below are parameters of the tests)
from __future__ import annotations

from pathlib import Path

import pytest

from lessonbank import LessonBank
from lessonbank.errors import InputError
from lessonbank.integrations.agents_md import BEGIN, END, import_agents_md

# The contract suite's fixtures: a fresh store on every backend, on a test clock.
from tests.contract.conftest import Clock, backend, clock, store_url  # noqa: F401

AROUND = "# Project\r\n\r\nRun `make test` before a commit.\n"
AFTER = "\n## Notes\n\ntrailing text, no newline"


def seeded(bank: LessonBank) -> None:
    bank.import_lessons(
        [
            {"id": "les_tac", "kind": "principle", "content": "IF tests fail THEN read the first error"},
            {
                "id": "les_str",
                "kind": "principle",
                "content": "IF a migration runs THEN back up first",
                "metadata": {"stream": "strategic"},
            },
            {"id": "les_old", "kind": "principle", "content": "IF deploying THEN announce it"},
            {"id": "les_plain", "content": "not a rule"},
        ]
    )


def test_round_trip_through_an_approved_proposal(store_url: str, clock: Clock, tmp_path: Path) -> None:
    path = tmp_path / "AGENTS.md"
    path.write_bytes(AROUND.encode())
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        seeded(bank)
        assert bank.export_to(path, "agents-md") == 3
        first = path.read_bytes()
        assert first.startswith(AROUND.encode())
        text = first.decode()
        assert text.index("back up first") < text.index("read the first error")  # strategic first
        assert "not a rule" not in text and "(les_" not in text and "<!-- les_str " in text
        bank.export_to(path, "agents-md")
        assert path.read_bytes() == first  # idempotent
        path.write_bytes(first + AFTER.encode())
        bank.export_to(path, "agents-md")
        assert path.read_bytes() == first + AFTER.encode()  # text after the section untouched
        assert import_agents_md(bank, path).proposal is None

        lines = text.replace("read the first error", "read the first error, then the last").splitlines()
        lines = [line for line in lines if "announce it" not in line]
        lines.insert(lines.index(END), "- IF a port is busy THEN pick another one")
        path.write_text("\n".join(lines) + "\n" + AFTER)
        staged = import_agents_md(bank, path)
        assert staged.proposal is not None
        assert staged.counts() == {"edits": 1, "candidates": 1, "archives": 1, "unchanged": 1, "skipped": 0}
        assert bank.get_lesson("les_old").status == "active"  # nothing applied before approval
        bank.approve(staged.proposal.id)
        assert bank.get_lesson("les_old").status == "archived"
        edited = bank.get_lesson("les_tac").superseded_by
        assert edited is not None

        before = path.read_text()
        bank.export_to(path, "agents-md")
        after = path.read_text()
        assert after.startswith(AROUND.replace("\r\n", "\n")) or after.startswith(AROUND)
        assert after.endswith(AFTER) and before != after
        assert f"<!-- {edited} " in after and "pick another one" in after and "announce it" not in after
        assert import_agents_md(bank, path).proposal is None


def test_a_new_file_holds_the_section_alone(tmp_path: Path) -> None:
    with LessonBank("memory://", worker=False) as bank:
        seeded(bank)
        bank.export_to(tmp_path / "CLAUDE.md", "agents-md")
        text = (tmp_path / "CLAUDE.md").read_text()
        assert text.startswith(BEGIN) and text.endswith(END + "\n")
        assert bank.export("agents-md") == text  # the string export is the same section


@pytest.mark.parametrize(
    "content",
    [
        "no section here\n",
        f"{BEGIN}\n- a rule\n",  # not closed
        f"{BEGIN}\n{END}\n{BEGIN}\n{END}\n",  # twice
        f"{END}\n{BEGIN}\n",  # backwards
    ],
)
def test_a_broken_file_is_refused_and_nothing_changes(content: str, tmp_path: Path) -> None:
    path = tmp_path / "AGENTS.md"
    path.write_text(content)
    with LessonBank("memory://", worker=False) as bank:
        seeded(bank)
        with pytest.raises(InputError):
            import_agents_md(bank, path)
        if BEGIN in content:
            with pytest.raises(InputError, match="broken"):
                bank.export_to(path, "agents-md")
        assert path.read_text() == content and bank.proposals(status="pending") == []


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "AGENTS.md"
    path.write_text("x" * (2 << 20))
    with LessonBank("memory://", worker=False) as bank, pytest.raises(InputError, match="over"):
        import_agents_md(bank, path)


def test_the_cli_imports_an_agents_md(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from lessonbank.cli.app import app

    db = f"sqlite:///{tmp_path / 'bank.db'}"
    with LessonBank(db, worker=False) as bank:
        seeded(bank)
    path = tmp_path / "AGENTS.md"
    runner = CliRunner()
    assert runner.invoke(app, ["--db", db, "export", "-f", "agents-md", str(path)]).exit_code == 0
    path.write_text(path.read_text().replace(END, f"- IF a port is busy THEN pick another\n{END}"))
    result = runner.invoke(app, ["--db", db, "import", str(path)])
    assert result.exit_code == 0, result.output
    assert "1 candidate(s)" in result.output
