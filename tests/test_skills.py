"""Agent Skills export and import (lessonbank.integrations.skills): every exported SKILL.md meets
the specification's name and description rules, and a person's edits come back only as a pending
proposal, applied on approval, on every store."""

# ruff: noqa: F811  (the fixtures imported below are parameters of the tests)
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from lessonbank import LessonBank
from lessonbank.integrations.skills import MANIFEST, import_skills

# The contract suite's fixtures: a fresh store on every backend, on a test clock.
from tests.contract.conftest import Clock, backend, clock, store_url  # noqa: F401

NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def seeded(bank: LessonBank) -> None:
    bank.import_lessons(
        [
            {
                "id": "les_deploy",
                "kind": "procedure",
                "content": "Task: Deploy the API\nResult: success\nSteps:\n1. run the tests\n2. tag the release",
                "metadata": {
                    "task": "Deploy the API",
                    "result": "success",
                    "steps": ["run the tests", "tag the release"],
                    "links": [{"to": "les_pit", "type": "related", "direction": "out"}],
                },
            },
            {"id": "les_pit", "content": "the staging database needs its migrations first"},
            {"id": "les_twin", "kind": "procedure", "content": "Task: deploy the API!\nSteps:\n1. ask first"},
        ]
    )


def skill_files(root: Path) -> list[Path]:
    return sorted(root.glob("*/SKILL.md"))


def check_spec(path: Path) -> dict[str, object]:
    text = path.read_text()
    assert text.startswith("---\n")
    head = yaml.safe_load(text[4 : text.index("\n---", 3)])
    assert NAME.match(head["name"]) and 1 <= len(head["name"]) <= 64
    assert head["name"] == path.parent.name
    assert 0 < len(head["description"]) <= 1024 and "<" not in head["description"]
    assert all(isinstance(v, str) for v in head["metadata"].values())
    assert len(text.splitlines()) < 500
    return head


def test_round_trip_through_an_approved_proposal(store_url: str, clock: Clock, tmp_path: Path) -> None:
    out = tmp_path / "skills"
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        seeded(bank)
        assert bank.export_to(out, "skills") == 2
        files = skill_files(out)
        heads = [check_spec(path) for path in files]
        assert len({head["name"] for head in heads}) == 2
        deploy = out / "deploy-the-api" / "SKILL.md"
        text = deploy.read_text()
        assert "1. run the tests" in text and "## Pitfalls" in text and "(les_pit)" in text
        assert import_skills(bank, out).proposal is None  # nothing edited: nothing proposed

        deploy.write_text(text.replace("2. tag the release", "2. tag the release\n3. watch the error rate"))
        staged = import_skills(bank, out)
        assert staged.proposal is not None and staged.counts()["edits"] == 1
        assert bank.get_lesson("les_deploy").superseded_by is None  # nothing applied before approval
        assert import_skills(bank, out).proposal is None  # the same edit is not staged twice
        bank.approve(staged.proposal.id)
        new = bank.get_lesson("les_deploy").superseded_by
        assert new is not None and "watch the error rate" in bank.get_lesson(new).content

        assert bank.export_to(out, "skills") == 2
        again = deploy.read_text()
        assert "3. watch the error rate" in again and f"lessonbank-id: {new}" in again
        for path in skill_files(out):
            check_spec(path)
        assert import_skills(bank, out).proposal is None


def test_a_new_skill_is_a_candidate_and_a_deleted_one_an_archive(
    store_url: str, clock: Clock, tmp_path: Path
) -> None:
    out = tmp_path / "skills"
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        seeded(bank)
        bank.export_to(out, "skills")
        twin = next(p for p in skill_files(out) if p.parent.name != "deploy-the-api")
        twin.unlink()
        twin.parent.rmdir()
        (out / "rotate-keys").mkdir()
        (out / "rotate-keys" / "SKILL.md").write_text(
            "---\nname: rotate-keys\ndescription: Rotates the API keys. Use when a key leaked.\n"
            "allowed-tools: Bash\n---\n\n# Rotate the keys\n\n## Steps\n\n1. revoke the key\n2. issue a new one\n"
        )
        staged = import_skills(bank, out)
        assert staged.proposal is not None
        assert staged.counts() | {"unchanged": 0} == {
            "edits": 0,
            "candidates": 1,
            "archives": 1,
            "unchanged": 0,
            "skipped": 0,
        }
        assert bank.get_lesson("les_twin").status == "active"
        bank.approve(staged.proposal.id)
        assert bank.get_lesson("les_twin").status == "archived"
        bank.export_to(out, "skills")
        kept = (out / "rotate-keys" / "SKILL.md").read_text()
        assert "allowed-tools: Bash" in kept  # the unknown key came back with the skill
        check_spec(out / "rotate-keys" / "SKILL.md")
        assert import_skills(bank, out).proposal is None


def test_unknown_keys_a_person_adds_stay_through_an_export(tmp_path: Path) -> None:
    out = tmp_path / "skills"
    with LessonBank("memory://", worker=False) as bank:
        seeded(bank)
        bank.export_to(out, "skills")
        path = out / "deploy-the-api" / "SKILL.md"
        before = {p: p.read_bytes() for p in skill_files(out)} | {
            out / MANIFEST: (out / MANIFEST).read_bytes()
        }
        bank.export_to(out, "skills")
        assert {p: p.read_bytes() for p in before} == before  # idempotent, byte for byte
        path.write_text(path.read_text().replace("metadata:", "license: MIT\nmetadata:\n  owner: ops"))
        bank.export_to(out, "skills")
        text = path.read_text()
        assert "license: MIT" in text and "owner: ops" in text


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("plain", "# no frontmatter\n\n1. step\n", "no frontmatter"),
        ("Upper", "---\nname: Upper\ndescription: d\n---\n1. x\n", "not a skill name"),
        ("big", "---\nname: big\ndescription: d\n---\n" + "1. x\n" * 500_000, "bytes"),
        ("other", "---\nname: elsewhere\ndescription: d\n---\n1. x\n", "differs from its folder"),
        ("bad-yaml", "---\nname: [\n---\n1. x\n", "not YAML"),
        ("nosteps", "---\nname: nosteps\ndescription: d\n---\nprose only\n", "no steps"),
    ],
)
def test_a_malformed_skill_is_skipped_with_its_reason_and_nothing_changes(
    name: str, text: str, why: str, tmp_path: Path
) -> None:
    (tmp_path / name).mkdir()
    (tmp_path / name / "SKILL.md").write_text(text)
    with LessonBank("memory://", worker=False) as bank:
        seeded(bank)
        before = [lesson.model_dump() for lesson in bank.lessons(limit=100)]
        staged = import_skills(bank, tmp_path)
        assert staged.proposal is None and bank.proposals(status="pending") == []
        assert len(staged.skipped) == 1 and why in staged.skipped[0][1]
        assert [lesson.model_dump() for lesson in bank.lessons(limit=100)] == before


def test_the_cli_exports_into_a_folder_and_imports_it_back(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from lessonbank.cli.app import app

    db = f"sqlite:///{tmp_path / 'bank.db'}"
    with LessonBank(db, worker=False) as bank:
        seeded(bank)
    runner = CliRunner()
    out = tmp_path / "skills"
    result = runner.invoke(app, ["--db", db, "export", "--format", "skills", str(out)])
    assert result.exit_code == 0, result.output
    path = out / "deploy-the-api" / "SKILL.md"
    path.write_text(path.read_text().replace("run the tests", "run the full test suite"))
    result = runner.invoke(app, ["--db", db, "import", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 edit(s)" in result.output and "is pending" in result.output
