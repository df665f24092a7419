"""The insight and dual reflectors inside the engine: repair, skips, spend, bad input, secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from lessonbank import Episode, LessonBank
from lessonbank.errors import InputError
from lessonbank.llm import FakeLLM

DUAL = "PRINCIPLE: IF the API returns 503 THEN retry with backoff\nPROCEDURE:\n1. call the API\n2. retry"
SECRET = "sk-proj-" + "Xy7Kq2Lm9Np4Rs6Tv8Wz1Ab3Cd5Ef7Gh9_Jk-Lm"


def test_malformed_dual_reply_gets_one_repair_call(db_url: str) -> None:
    llm = FakeLLM(["I think you should retry.", DUAL])
    with LessonBank(db_url, llm=llm) as bank:
        episode = bank.record(Episode(task="call the API", error="503", importance="high"))
        assert bank.flush(timeout=10)
        (reflection,) = bank.show(episode.id)["reflections"]
        assert reflection["status"] == "ok" and reflection["llm_calls"] == 2
        assert "PROCEDURE:" in llm.calls[1].messages[-1]["content"]  # the dual repair hint
        assert len(bank.rules()) == 1 and len(bank.replay(task="call the API")) == 1


def test_unreadable_insight_is_a_recorded_skip_that_stores_nothing(db_url: str) -> None:
    llm = FakeLLM(["**OK**", "```\n```"])
    with LessonBank(db_url, llm=llm) as bank:
        episode = bank.finish_goal("g", title="T", status="failed")
        assert bank.flush(timeout=10)
        (reflection,) = bank.show(episode.id)["reflections"]
        assert reflection["status"] == "skipped" and "unparseable" in reflection["skip_reason"]
        assert bank.insights(goal_id="g") == [] and bank.lessons(kind="insight") == []
        (job,) = bank.jobs()
        assert job.status == "done" and (job.detail or "").startswith("skipped by insight")


def test_spend_is_recorded_per_reflector(db_url: str) -> None:
    # The two jobs run concurrently, so each answer is chosen by the prompt, not by call order.
    llm = FakeLLM(
        default=lambda messages: (
            DUAL if "PRINCIPLE" in str(messages) else "The data was stale; filter by date next time."
        )
    )
    with LessonBank(db_url, llm=llm) as bank:
        bank.finish_goal("g", title="Research pricing", status="failed")
        bank.record(Episode(task="call the API", error="503", duration_s=120))
        assert bank.flush(timeout=10)
        by_reflector = bank.stats()["by_reflector"]
    assert set(by_reflector) == {"insight", "dual"}
    assert all(
        row["calls"] == 1 and row["tokens_in"] > 0 and row["tokens_out"] > 0 for row in by_reflector.values()
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"status": "done"}, "status must be one of completed, failed"),
        ({"outputs": "one string"}, "outputs must be a list of strings"),
        ({"errors": [None]}, "errors must be a list of strings"),
        ({"outputs": ["x" * 600_000, "y" * 600_000]}, "over the 1024 KiB limit"),
        ({"title": "bad \udcff byte"}, "not valid UTF-8"),
    ],
)
def test_bad_goal_input_is_refused_and_nothing_is_stored(
    db_url: str, kwargs: dict[str, object], match: str
) -> None:
    with LessonBank(db_url, worker=False) as bank:
        with pytest.raises(InputError, match=match):
            bank.finish_goal("g", **kwargs)  # type: ignore[arg-type]
        with pytest.raises(InputError):
            bank.finish_goal("   ")
        assert bank.decisions() == [] and bank.jobs() == []


def test_secrets_in_goal_outputs_never_reach_the_model_or_the_store(tmp_path: Path) -> None:
    llm = FakeLLM([f"Rotate the leaked key {SECRET} and use the vault next time."])
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", llm=llm) as bank:
        bank.finish_goal("g", title="Deploy", status="failed", errors=[f"auth failed with key {SECRET}"])
        assert bank.flush(timeout=10)
        assert SECRET not in llm.calls[0].prompt
        (insight,) = bank.insights(goal_id="g")
        assert SECRET not in insight.content
    for path in tmp_path.glob("b.db*"):  # the database and its write-ahead log
        assert SECRET.encode() not in path.read_bytes()


def test_a_job_for_a_reflector_this_bank_lacks_waits_visibly(db_url: str) -> None:
    with LessonBank(db_url, llm=FakeLLM([DUAL])) as bank:
        dual = bank.reflectors.pop("dual")
        episode = bank.record(Episode(task="call the API", error="503", importance="high"))
        assert bank.flush(timeout=2) is False
        (job,) = bank.jobs()
        assert job.status == "waiting" and "reflector 'dual' is not registered" in (job.detail or "")
        bank.reflectors["dual"] = dual
        assert bank.retry_jobs() == 1  # `lessonbank jobs retry` once the setup is fixed
        assert bank.flush(timeout=10)
        assert bank.show(episode.id)["reflections"][0]["reflector"] == "dual"
