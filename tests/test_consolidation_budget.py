"""A cycle's input: the survey reads what each episode went through (its error and output, redacted,
within the phase's budget); the least input budget the settings accept is one every phase fits in;
and a reply refused as too long is still counted where the daily cap reads it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from lessonbank.errors import ConfigError, LessonbankError
from lessonbank.llm.fake import FakeLLM
from lessonbank.services.consolidation.phases import least_tokens_in
from lessonbank.services.consolidation.triggers import spent_today
from lessonbank.settings import CONSOLIDATION_MIN_TOKENS_IN, Settings
from lessonbank.text import estimate_tokens
from tests.test_consolidation_llm import CORE, META, SUMMARY, SURVEY, Script, open_bank, seed, user_prompts

SECRET = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"


def test_the_survey_reads_each_episodes_error_and_output_redacted(tmp_path: Path) -> None:
    llm = Script()
    with open_bank(tmp_path, llm) as bank:
        episode_id = seed(bank)
        other = bank.record(
            {
                "task": "publish the release notes",
                "status": "success",
                "output": f"posted to the wiki with token {SECRET}",
                "agent": "writer",
            }
        )
        llm.script(SURVEY, META, "NONE", CORE, SUMMARY)
        bank.consolidate()
        survey = user_prompts(llm)[0]
        row = next(line for line in survey.splitlines() if line.startswith(episode_id))
        assert "error: migration 42 not applied" in row
        row = next(line for line in survey.splitlines() if line.startswith(other.id))
        assert "output: posted to the wiki with token" in row and "error: -" in row
        assert SECRET not in survey


def test_a_long_error_is_cut_and_many_episodes_stay_within_the_survey_share(tmp_path: Path) -> None:
    llm = Script()
    with open_bank(tmp_path, llm, consolidation_max_tokens_in=CONSOLIDATION_MIN_TOKENS_IN) as bank:
        for i in range(60):
            bank.record({"task": f"task {i}", "error": f"failure {i} " + "traceback line " * 200})
        llm.script(SURVEY, META, "NONE", CORE, SUMMARY)
        proposal = bank.consolidate()
        assert proposal is not None
        survey = proposal.metadata["phases"][0]
        assert survey["tokens_in"] <= survey["allowed_in"]
        rows = [line for line in user_prompts(llm)[0].splitlines() if " | error: failure" in line]
        assert rows and all(len(line) < 1_000 for line in rows)


def test_the_least_input_budget_accepted_is_one_every_phase_fits_in(tmp_path: Path) -> None:
    assert least_tokens_in(estimate_tokens) <= CONSOLIDATION_MIN_TOKENS_IN
    with pytest.raises(ConfigError, match="at least 5,000 input"):
        Settings(consolidation_max_tokens_in=3_000)
    llm = FakeLLM(
        default=lambda messages: CORE if messages[-1]["content"].startswith("Rewrite the core") else "NONE"
    )
    with open_bank(tmp_path, llm, consolidation_max_tokens_in=CONSOLIDATION_MIN_TOKENS_IN) as bank:
        bank.import_lessons([{"content": f"lesson {i} about {' '.join(['topic'] * 40)}"} for i in range(300)])
        for i in range(50):
            bank.record({"task": f"deploy {i}", "error": "timeout " * 50})
        proposal = bank.consolidate()
        assert proposal is not None and proposal.tokens_in <= CONSOLIDATION_MIN_TOKENS_IN


def test_a_reply_refused_as_too_long_is_counted_in_the_dream_log(tmp_path: Path) -> None:
    llm = Script(["word " * 20_000])
    with open_bank(tmp_path, llm) as bank:
        seed(bank)
        with pytest.raises(LessonbankError, match="phase survey: the model replied"):
            bank.consolidate()
        [run] = bank.dreams()
        assert run.outcome == "failed" and run.tokens_in > 0 and run.tokens_out > 8_000
        tokens, _ = spent_today(bank.store, bank.namespace, datetime.now(UTC))
        assert tokens == run.tokens_in + run.tokens_out
