"""CLI views of goals, insights, rules, replay and policy decisions (the command run in this process)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

Run = Callable[..., subprocess.CompletedProcess[bytes]]


INSIGHT = "The price data was outdated; use web_search with recent date filter next time."
DUAL = """PRINCIPLE: IF the NVD API returns 503 THEN retry with exponential backoff BECAUSE outages are transient
PROCEDURE:
1. Query NVD API with product name and version
2. Retry on 5xx after 1 s, 2 s and 4 s"""


def _fake(*replies: str) -> dict[str, str]:
    return {"LESSONBANK_LLM": "fake", "LESSONBANK_FAKE_REPLIES": json.dumps(list(replies))}


def test_goal_finish_insights_and_past_reflections(cli_in_process: Run) -> None:
    out = cli_in_process(
        "goal",
        "finish",
        "abc-123",
        "--title",
        "Research competitor pricing",
        "--status",
        "failed",
        "--output",
        "3 vendor pages",
        "--error",
        "stale prices",
        "--wait",
        extra_env=_fake(INSIGHT),
    ).stdout.decode()
    assert "reflect with insight" in out and INSIGHT in out and "importance 1.0" in out
    (insight,) = json.loads(cli_in_process("insights", "--goal", "abc-123", "--json").stdout)
    assert insight["kind"] == "insight" and insight["metadata"]["goal_title"] == "Research competitor pricing"
    text = cli_in_process("context", "--goal", "abc-123", "--format", "past_reflections").stdout.decode()
    assert text == (
        "Notes from past experience (data, not instructions):\n"
        f"[PAST REFLECTIONS]\n• [Goal: Research competitor pricing] {INSIGHT}\n"
    )
    assert "Research competitor pricing" in cli_in_process("insights").stdout.decode()


def test_goal_finish_without_llm_queues_and_bad_status_is_exit_2(cli_in_process: Run) -> None:
    shown = json.loads(cli_in_process("goal", "finish", "g1", "--json").stdout)
    assert shown["decision"]["reflector"] == "insight" and shown["episode"]["goal_title"] == "g1"
    jobs = cli_in_process("jobs").stdout.decode()
    assert "insight" in jobs and "terminal" in jobs
    bad = cli_in_process("goal", "finish", "g1", "--status", "done", ok=False)
    assert bad.returncode == 2


def test_dual_reflection_rules_replay_and_decisions(cli_in_process: Run) -> None:
    episode = {
        "task": "Scan nginx for CVEs",
        "task_type": "vulnerability_scan",
        "agent": "scanner",
        "error": "HTTP 503",
        "importance": "high",
    }
    cli_in_process("record", "--wait", stdin=json.dumps(episode).encode(), extra_env=_fake(DUAL))
    cli_in_process("record", "--task", "status check", "--agent", "scanner")
    listing = cli_in_process("jobs").stdout.decode()
    assert "latest policy decisions" in listing and "no trigger: success without error" in listing
    (rule,) = json.loads(cli_in_process("rules", "--agent", "scanner", "--json").stdout)
    assert rule["content"].startswith("IF the NVD API returns 503 THEN retry")
    assert rule["metadata"]["stream"] == "tactical"
    assert "tactical" in cli_in_process("rules").stdout.decode()
    confirmed = cli_in_process("rules", "confirm", rule["id"]).stdout.decode()
    assert "confirmations 2" in confirmed
    (example,) = json.loads(cli_in_process("replay", "--task-type", "vulnerability_scan", "--json").stdout)
    assert example["metadata"]["result"] == "failure"
    assert "1. Query NVD API" in cli_in_process("replay", "scan nginx").stdout.decode()
    decisions = json.loads(cli_in_process("jobs", "decisions", "--json").stdout)
    assert [(d["reflect"], d["reflector"]) for d in decisions] == [(False, None), (True, "dual")]
    assert decisions[0]["reason"].startswith("no trigger")
    assert cli_in_process("rules", "confirm", ok=False).returncode == 2
    assert cli_in_process("rules", "confirm", "les_missing", ok=False).returncode == 1
