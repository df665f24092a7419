"""Cost control: a per-model price table, cost recorded per reflection, spend per reflector and per day."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lessonbank import ConfigError, Episode, LessonBank
from lessonbank.llm import FakeLLM, Usage, pricing
from tests.conftest import SEED_004_REPLY


@pytest.fixture(autouse=True)
def _fresh_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pricing, "_PRICES", dict(pricing._PRICES))
    monkeypatch.setattr(pricing, "_env_loaded", None)


def test_known_unknown_and_free_models() -> None:
    assert pricing.cost_of("openai:gpt-4o-mini", Usage(1_000_000, 1_000_000)) == pytest.approx(0.75)
    assert pricing.cost_of("ollama:llama3.2", Usage(5000, 5000)) == 0.0
    assert pricing.cost_of("fake:scripted", Usage(5000, 5000)) == 0.0
    assert pricing.cost_of("openai:some-future-model", Usage(10, 10)) is None


def test_user_prices_from_code_env_json_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pricing.register_price("openai:my-finetune", 1.0, 2.0)
    assert pricing.cost_of("openai:my-finetune", Usage(500_000, 250_000)) == pytest.approx(1.0)
    monkeypatch.setenv("LESSONBANK_PRICES", json.dumps({"openai:gpt-4o-mini": [0.2, 0.8]}))
    assert pricing.cost_of("openai:gpt-4o-mini", Usage(1_000_000, 0)) == pytest.approx(0.2)
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"vllm:qwen": [0.05, 0.05]}))
    monkeypatch.setenv("LESSONBANK_PRICES", str(table))
    assert pricing.cost_of("vllm:qwen", Usage(2_000_000, 0)) == pytest.approx(0.1)


@pytest.mark.parametrize(
    "value", ["{not json", "[1, 2]", '{"openai:x": [1]}', '{"openai:x": ["a", "b"]}', "/no/such/prices.json"]
)
def test_bad_price_tables_are_config_errors(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LESSONBANK_PRICES", value)
    with pytest.raises(ConfigError, match="LESSONBANK_PRICES"):
        pricing.price_of("openai:gpt-4o-mini")


def test_bad_registrations_are_refused() -> None:
    with pytest.raises(ConfigError):
        pricing.register_price("gpt-4o-mini", 1, 1)
    with pytest.raises(ConfigError):
        pricing.register_price("openai:x", -1, 1)


def test_cost_is_recorded_per_reflection_and_summed_per_reflector_and_day(db_url: str) -> None:
    clock = [time.time()]
    llm = FakeLLM(
        [SEED_004_REPLY, SEED_004_REPLY.replace("Go files", "Rust crates")], model="openai:gpt-4o-mini"
    )
    with LessonBank(db_url, llm=llm, clock=lambda: clock[0]) as bank:
        first = bank.record(Episode(task="refactor engine.go", error="timeout"))
        assert bank.flush(timeout=10)
        clock[0] += 86400
        bank.record(Episode(task="refactor lib.rs", error="borrow checker"))
        assert bank.flush(timeout=10)
        (reflection,) = bank.show(first.id)["reflections"]
        expected = (reflection["tokens_in"] * 0.15 + reflection["tokens_out"] * 0.60) / 1e6
        assert reflection["cost_usd"] == pytest.approx(expected) and expected > 0
        stats = bank.stats()
    assert stats["llm_calls"] == 2
    assert stats["by_reflector"]["lesson"]["calls"] == 2
    assert stats["cost_usd"] == pytest.approx(stats["by_reflector"]["lesson"]["cost_usd"])
    assert len(stats["by_day"]) == 2 and all(day["calls"] == 1 for day in stats["by_day"].values())


def test_unpriced_models_are_counted_not_guessed(db_url: str) -> None:
    llm = FakeLLM([SEED_004_REPLY], model="openai:unknown-model")
    with LessonBank(db_url, llm=llm) as bank:
        episode = bank.record(Episode(task="refactor engine.go", error="timeout"))
        assert bank.flush(timeout=10)
        assert bank.show(episode.id)["reflections"][0]["cost_usd"] is None
        assert bank.stats()["by_reflector"]["lesson"]["unpriced_calls"] == 1
