"""Every way text enters the bank goes through redaction: added and imported lessons (every text field),
recorded episodes (metadata, verification), reflections from model output; nothing raw reaches
context(), exports or the database file."""

from __future__ import annotations

import json
from pathlib import Path

from lessonbank import LessonBank
from lessonbank.llm import FakeLLM

OPENAI = "sk-proj-" + "Xy7Kq2Lm9Np4Rs6Tv8Wz1Ab3Cd5Ef7Gh9_Jk-Lm"
GH = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
PW = "metaDictPw777"


def _everything(bank: LessonBank, path: Path) -> str:
    """What a reader can see: context, export, every lesson and the raw database file."""
    seen = [
        bank.context("deploy the service with the release token").text,
        bank.export("json"),
        bank.export("markdown"),
        json.dumps([lesson.model_dump(mode="json") for lesson in bank.lessons(limit=100)]),
    ]
    return "\n".join(seen) + path.read_bytes().decode("utf-8", "replace")


def test_imported_lesson_has_every_text_field_redacted(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    record = {
        "content": "deploy the service with the release token carefully",
        "situation": f"deploying with password={PW} in the shell",
        "mistake": f"pasted {OPENAI} into the log",
        "correction": f"use the vault, never {GH}",
        "learned_from": f"deploy job using {AWS_ID}",
        "tags": ["deploy", f"key:{GH}"],
        "metadata": {"note": f"token {OPENAI}", "deep": [{"cmd": f"login password={PW}"}]},
    }
    with LessonBank(f"sqlite:///{path}") as bank:
        assert bank.import_lessons([record])["added"] == 1
        seen = _everything(bank, path)
    for secret in (PW, OPENAI, GH, AWS_ID):
        assert secret not in seen, secret


def test_imported_lesson_object_is_redacted_too(tmp_path: Path) -> None:
    from lessonbank.models import Lesson

    path = tmp_path / "b.db"
    lesson = Lesson(
        content="rotate the release token", situation=f"with {GH}", metadata={"cmd": f"export API_KEY={PW}"}
    )
    with LessonBank(f"sqlite:///{path}") as bank:
        bank.import_lessons([lesson])
        seen = _everything(bank, path)
    assert GH not in seen and PW not in seen


def test_add_lesson_learned_from_is_redacted(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    with LessonBank(f"sqlite:///{path}") as bank:
        lesson = bank.add_lesson(
            "deploy the service with the release token", learned_from=f"run with {OPENAI}"
        )
        assert OPENAI not in (lesson.learned_from or "")
        seen = _everything(bank, path)
    assert OPENAI not in seen


def test_episode_metadata_and_verification_are_redacted(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    with LessonBank(f"sqlite:///{path}") as bank:
        episode = bank.record(
            {
                "task": "deploy the service",
                "error": "boom",
                "goal_title": f"ship it with {OPENAI}",
                "metadata": {"env": f"DB_PASSWORD={PW}"},
                "verification": [{"tool": f"pytest --token {GH}", "stderr": f"denied for {AWS_ID}"}],
            }
        )
        shown = episode.model_dump_json()
        raw = path.read_bytes().decode("utf-8", "replace")
    for secret in (PW, OPENAI, GH, AWS_ID):
        assert secret not in shown, secret
        assert secret not in raw, secret


def test_reflected_lesson_fields_from_model_output_are_redacted(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    reply = (
        f"<situation>deploy with {OPENAI}</situation><mistake>used password={PW}</mistake>"
        f"<correction>read it from the vault, not {GH}</correction><tags>deploy, {AWS_ID}</tags>"
    )
    with LessonBank(f"sqlite:///{path}", llm=FakeLLM([reply])) as bank:
        bank.record({"task": "deploy the service", "error": "boom"})
        assert bank.flush(10)
        seen = _everything(bank, path)
        reflections = json.dumps(bank.search_reflections(), default=str)
    for secret in (OPENAI, GH, AWS_ID, PW):
        assert secret not in seen, secret
        assert secret not in reflections, secret
