from lessonbank import Episode, LessonBank
from lessonbank.llm import FakeLLM


def test_record_reflect_recall(bank: LessonBank, fake_llm: FakeLLM) -> None:
    bank.record(Episode(task="refactor pkg/engine to extract Close", error="provider timeout after 120s"))
    assert bank.flush(timeout=10)
    hits = bank.recall("refactor a large go file")
    assert hits and "Edit tool" in hits[0].lesson.content
    assert len(fake_llm.calls) == 1
