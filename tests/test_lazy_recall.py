"""A process that opens a bank and recalls builds no record's validator and loads no embedder it was
not asked for: pydantic builds a record's schema on its first validation (where it does so under its
lock), the store rebuilds stored lessons without validation and a recall makes its hits the same way.
What it returns is what validation would have made.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pydantic.main
import pytest

from lessonbank import LessonBank
from lessonbank.models import Episode, Hit
from tests.fresh_process import answer_of, sql_bank_url

NO_EMBEDDER_MODULES = (
    "lessonbank.retrieval.embedders.minilm",
    "lessonbank.retrieval.embedders.static",
    "lessonbank.retrieval.embedders.bert",
    "lessonbank.retrieval.embedders.bert_onnx",
    "lessonbank.retrieval.embedders.openai",
)

SCRIPT = """
import json, sys
import pydantic
from lessonbank import LessonBank
bank = LessonBank(sys.argv[1], worker=False)
hits = bank.recall("deploy migrations", k=2, mode="lexical")
def below(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from below(sub)
built = sorted({f"{c.__module__}.{c.__name__}" for c in below(pydantic.BaseModel)
                if c.__dict__.get("__pydantic_complete__")})
loaded = [name for name in json.loads(sys.argv[2]) if name in sys.modules]
first = hits[0]
print(json.dumps({
    "built": built, "loaded": loaded, "content": first.lesson.content,
    "parts": {name: type(getattr(first, name)).__name__ for name in ("score", "lexical", "vector", "temporal", "utility")},
    "fields_set": sorted(first.model_fields_set),
}))
bank.close()
"""


@pytest.fixture(params=["sqlite", "postgres"])
def bank_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from sql_bank_url(request.param, tmp_path, "lazy")


# pydantic defers a model only where it builds it under its lock (see lessonbank.models.DEFER_BUILD)
@pytest.mark.skipif(
    not hasattr(pydantic.main, "_rebuild_lock"), reason="this pydantic builds models at import"
)
def test_a_lexical_recall_builds_no_record_validator_and_loads_no_embedder(bank_url: str) -> None:
    with LessonBank(bank_url, worker=False) as bank:
        bank.import_lessons(
            [{"content": "Run the migrations before the deploy."}, {"content": "Pin the lockfile."}]
        )
    answer = answer_of(SCRIPT, bank_url, json.dumps(NO_EMBEDDER_MODULES))
    assert answer["built"] == ["lessonbank.settings.Settings"]  # the one model a recall validates
    assert answer["loaded"] == []
    assert answer["content"] == "Run the migrations before the deploy."
    assert answer["parts"] == dict.fromkeys(("score", "lexical", "vector", "temporal", "utility"), "float")
    assert answer["fields_set"] == ["lesson", "lexical", "score", "temporal", "utility", "vector"]


def test_a_recalled_hit_and_its_lesson_equal_the_validated_ones(bank_url: str) -> None:
    with LessonBank(bank_url, worker=False) as bank:
        added = bank.add_lesson("Run the migrations before the deploy.", tags=["deploy"])
        hit = bank.recall("deploy migrations", k=1, mode="lexical")[0]
    validated = Hit.model_validate({name: getattr(hit, name) for name in Hit.model_fields})
    assert hit == validated
    lesson = hit.lesson
    assert lesson == type(lesson).model_validate(lesson.model_dump()) == added
    assert lesson.model_dump_json() == added.model_dump_json()
    assert lesson.created_at.utcoffset() is not None and lesson.created_at == added.created_at
    assert hit.model_dump_json() == validated.model_dump_json()
    assert hit.model_fields_set == validated.model_fields_set


def test_records_first_validated_by_many_threads_at_once_validate_as_themselves() -> None:
    """Where the schemas are deferred, threads that validate a record for the first time together
    each get the record's own validation (not its parent's, which forbids every field)."""
    script = """
import threading
from lessonbank.models import Episode, Lesson
start = threading.Barrier(8)
errors = []
def make(i):
    start.wait()
    try:
        Episode(task=f"task {i}", status="failure", error="boom")
        Lesson(content=f"lesson {i}")
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=make, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(len(errors), errors[:1])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "0", done.stdout
    assert Episode(task="t", status="success").status == "success"
