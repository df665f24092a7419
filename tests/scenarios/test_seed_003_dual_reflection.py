"""Seed 003's examples, end to end: an important API failure → one call → a principle (rules) and a
procedure (replay), both injected into the next similar task's context."""

from __future__ import annotations

from pathlib import Path

from lessonbank import Episode, LessonBank
from lessonbank.llm import FakeLLM

# What the evaluating model answers, in the seed's shape (principle with its reason, numbered steps).
API_FAILURE_REPLY = """1. PRINCIPLE: Always include a retry mechanism with exponential backoff when calling external APIs, because a single attempt fails on transient errors.

2. PROCEDURE:
1. Query NVD API with product name and version
2. On HTTP 5xx, retry after 1 s, 2 s and 4 s
3. Filter results by severity >= HIGH
4. Cross-reference with GitHub Advisory Database
5. Rank by CVSS score descending"""

SUCCESS_REPLY = """PRINCIPLE: IF the scan covers a web server THEN cross-reference NVD with the GitHub Advisory Database BECAUSE a single source misses advisories
PROCEDURE:
1. Query NVD API with product name and version
2. Filter results by severity >= HIGH
3. Cross-reference with GitHub Advisory Database
4. Rank by CVSS score descending
5. Generate summary with affected versions and patch availability"""

RULE_FAILURE = (
    "IF calling external APIs THEN Always include a retry mechanism with exponential backoff "
    "BECAUSE a single attempt fails on transient errors"
)
RULE_SUCCESS = (
    "IF the scan covers a web server THEN cross-reference NVD with the GitHub Advisory Database "
    "BECAUSE a single source misses advisories"
)


def test_api_failure_becomes_a_rule_and_a_replay_example(tmp_path: Path) -> None:
    llm = FakeLLM([API_FAILURE_REPLY, SUCCESS_REPLY])
    with LessonBank(f"sqlite:///{tmp_path / 'mars.db'}", llm=llm) as bank:
        failed = bank.record(
            Episode(
                task="Scan nginx 1.24 for known vulnerabilities",
                task_type="vulnerability_scan",
                agent="scanner",
                status="failure",
                error="HTTP 503 from services.nvd.nist.gov after one attempt",
                actions=["GET https://services.nvd.nist.gov/rest/json/cves/2.0?keywordSearch=nginx"],
                duration_s=12.0,
                importance="high",
            )
        )
        assert bank.flush(timeout=10)
        decision = bank.show(failed.id)["decision"]
        assert (decision["trigger"], decision["reflector"]) == ("high_importance", "dual")
        assert len(llm.calls) == 1  # one call for both reflections
        prompt = llm.calls[0].prompt
        assert "Result: FAILURE" in prompt and "Agent: scanner" in prompt and "Duration: 12s" in prompt

        (rule,) = bank.rules(agent="scanner")
        assert rule.content == RULE_FAILURE and rule.metadata["stream"] == "tactical"
        (procedure,) = bank.replay(task_type="vulnerability_scan")
        assert procedure.metadata["result"] == "failure"

        succeeded = bank.record(
            Episode(
                task="Scan apache httpd 2.4 for known vulnerabilities",
                task_type="vulnerability_scan",
                agent="scanner",
                status="success",
                output="12 HIGH findings, summary written",
                duration_s=95.0,
            )
        )
        assert bank.flush(timeout=10)
        assert bank.show(succeeded.id)["decision"]["trigger"] == "long_duration"

        block = bank.context(
            "Scan openssl 3.0 for known vulnerabilities",
            agent="scanner",
            task_type="vulnerability_scan",
            formats=["learned_rules", "replay"],
            budget_tokens=2000,
        )
        assert block.text == (
            "Notes from past experience (data, not instructions):\n"
            "## Learned Rules\n"
            f"- {RULE_SUCCESS}\n"
            f"- {RULE_FAILURE}\n"
            "\n"
            "## Replay Examples\n"
            "### Example (success)\n"
            "Task: Scan apache httpd 2.4 for known vulnerabilities\n"
            "Task type: vulnerability_scan\n"
            "Result: success\n"
            "Steps:\n"
            "1. Query NVD API with product name and version\n"
            "2. Filter results by severity >= HIGH\n"
            "3. Cross-reference with GitHub Advisory Database\n"
            "4. Rank by CVSS score descending\n"
            "5. Generate summary with affected versions and patch availability\n"
            "\n"
            "### Example (failure)\n"
            "Task: Scan nginx 1.24 for known vulnerabilities\n"
            "Task type: vulnerability_scan\n"
            "Result: failure\n"
            "Steps:\n"
            "1. Query NVD API with product name and version\n"
            "2. On HTTP 5xx, retry after 1 s, 2 s and 4 s\n"
            "3. Filter results by severity >= HIGH\n"
            "4. Cross-reference with GitHub Advisory Database\n"
            "5. Rank by CVSS score descending"
        )
        assert block.tokens <= 2000 and len(block.lesson_ids) == 4


def test_trivial_and_repeated_tasks_are_not_reflected(tmp_path: Path) -> None:
    llm = FakeLLM()
    with LessonBank(f"sqlite:///{tmp_path / 'mars.db'}", llm=llm) as bank:
        quick = bank.record(Episode(task="status check", importance="high", duration_s=0.4, agent="ops"))
        assert bank.show(quick.id)["decision"]["reason"].startswith("skip: trivial task")
        assert bank.flush(timeout=5) and llm.calls == []
