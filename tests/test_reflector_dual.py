"""The dual reflector (seed 003): one prompt, a PRINCIPLE and a PROCEDURE parsed from messy replies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.errors import ParseError
from lessonbank.models import Episode
from lessonbank.reflectors.dual import (
    PROCEDURE_MAX_TOKENS,
    DualReflector,
    parse_dual,
    parse_principle,
    procedure_text,
)
from lessonbank.text import estimate_tokens

EPISODE = Episode(
    task="Fetch the latest CVEs for nginx 1.24 from the NVD API",
    task_type="vulnerability_scan",
    agent="scanner",
    status="failure",
    error="HTTP 503 from services.nvd.nist.gov",
    actions=["GET /rest/json/cves/2.0?keywordSearch=nginx"],
    duration_s=73.0,
    importance="high",
)

CLEAN = """PRINCIPLE: IF an API call fails with a 5xx error THEN retry with exponential backoff BECAUSE outages are usually transient
PROCEDURE:
1. Query NVD API with product name and version
2. On a 5xx response wait 1 s, 2 s, 4 s between retries
3. Filter results by severity >= HIGH"""

RULE = "IF an API call fails with a 5xx error THEN retry with exponential backoff BECAUSE outages are usually transient"
STEPS = [
    "Query NVD API with product name and version",
    "On a 5xx response wait 1 s, 2 s, 4 s between retries",
    "Filter results by severity >= HIGH",
]


def test_prompt_snapshot() -> None:
    (system, user) = DualReflector().messages(EPISODE, "high_importance")
    assert "PRINCIPLE: IF <condition> THEN <action> BECAUSE <reason>" in system["content"]
    assert user["content"] == (
        "Evaluate this completed task:\n"
        "\n"
        "Task: Fetch the latest CVEs for nginx 1.24 from the NVD API\n"
        "Agent: scanner\n"
        "Task type: vulnerability_scan\n"
        "Result: FAILURE\n"
        "Output: HTTP 503 from services.nvd.nist.gov\n"
        "Duration: 73s\n"
        "Steps taken:\n"
        "GET /rest/json/cves/2.0?keywordSearch=nginx\n"
        "\n"
        "Extract the PRINCIPLE and the PROCEDURE."
    )


def test_prompt_is_within_500_tokens_and_keeps_the_task_first() -> None:
    huge = EPISODE.model_copy(
        update={"task": "scan " * 2000, "error": "Traceback line\n" * 5000, "actions": ["step " * 300] * 50}
    )
    messages = DualReflector().messages(huge, "failure")
    assert sum(estimate_tokens(m["content"]) for m in messages) <= 500
    user = messages[1]["content"]
    assert user.startswith("Evaluate this completed task:\n\nTask: scan scan")
    assert "Result: FAILURE" in user and "Duration: 73s" in user


def test_clean_reply() -> None:
    fields = parse_dual(CLEAN).fields
    assert fields["condition"] == "an API call fails with a 5xx error"
    assert fields["action"] == "retry with exponential backoff"
    assert fields["reason"] == "outages are usually transient"
    assert fields["steps"] == STEPS


@pytest.mark.parametrize(
    "reply",
    [
        CLEAN.replace("PRINCIPLE:", "**PRINCIPLE:**").replace("PROCEDURE:", "**PROCEDURE:**"),
        CLEAN.replace("PRINCIPLE:", "1. PRINCIPLE:").replace("PROCEDURE:", "2. PROCEDURE:"),
        "```\n" + CLEAN + "\n```",
        "Here is my evaluation.\n\n" + CLEAN + "\n\nHope this helps!",
        CLEAN.replace("1. ", "- ").replace("2. ", "- ").replace("3. ", "* "),
        CLEAN.replace("\n1.", " 1.")
        .replace("\n2.", " 2.")
        .replace("\n3.", " 3.")
        .replace("PROCEDURE: ", "PROCEDURE:\n"),
        CLEAN.replace("PRINCIPLE:", "## Principle Reflection (normative)\n").replace(
            "PROCEDURE:", "## Procedure"
        ),
        CLEAN.lower().replace("principle:", "Principle:"),
    ],
)
def test_messy_replies_parse_to_the_same_rule_and_steps(reply: str) -> None:
    fields = parse_dual(reply).fields
    assert fields["condition"].lower() == "an api call fails with a 5xx error"
    assert [step.lower() for step in fields["steps"]][:3] == [step.lower() for step in STEPS]


@pytest.mark.parametrize(
    ("principle", "condition", "action", "reason"),
    [
        (
            "Always include the date of the data point when reporting financial data because undated figures are unreliable.",
            "reporting financial data",
            "Always include the date of the data point",
            "undated figures are unreliable",
        ),
        (
            "If the file is over 1000 lines, then edit it in place.",
            "the file is over 1000 lines",
            "edit it in place",
            "",
        ),
        (
            "API calls should always include a retry mechanism with exponential backoff.",
            "",
            "API calls should always include a retry mechanism with exponential backoff",
            "",
        ),
    ],
)
def test_principle_forms(principle: str, condition: str, action: str, reason: str) -> None:
    assert parse_principle(principle) == {"condition": condition, "action": action, "reason": reason}


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "PRINCIPLE: IF a THEN b",
        "PROCEDURE:\n1. do it",
        "PRINCIPLE:\nPROCEDURE:\n1. x",
        "PRINCIPLE: x\nPROCEDURE:\n",
    ],
)
def test_unusable_replies_are_parse_errors(reply: str) -> None:
    with pytest.raises(ParseError):
        parse_dual(reply)


noise = st.text(alphabet=st.sampled_from(list(" \n\t*_`>")), max_size=10)


@settings(max_examples=150, deadline=None)
@given(before=noise, after=noise)
def test_noise_around_a_valid_answer_is_ignored(before: str, after: str) -> None:
    fields = parse_dual(before + "\n" + CLEAN + "\n" + after).fields
    assert fields["action"] == "retry with exponential backoff"
    assert fields["steps"] == STEPS


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=2000))
def test_any_text_parses_or_is_a_parse_error(text: str) -> None:
    try:
        fields = parse_dual(text).fields
    except ParseError:
        return
    assert fields["action"] and 1 <= len(fields["steps"]) <= 8


def test_lessons_are_a_tactical_rule_and_a_replay_procedure() -> None:
    principle, procedure = DualReflector().lessons(parse_dual(CLEAN), EPISODE, "high_importance")
    assert principle.kind == "principle" and principle.content == RULE
    assert principle.agent == "scanner" and principle.metadata["stream"] == "tactical"
    assert procedure.kind == "procedure" and procedure.task_type == "vulnerability_scan"
    assert procedure.metadata["result"] == "failure" and procedure.metadata["steps"] == STEPS
    assert procedure.content == (
        "Task: Fetch the latest CVEs for nginx 1.24 from the NVD API\n"
        "Task type: vulnerability_scan\n"
        "Result: failure\n"
        "Steps:\n"
        "1. Query NVD API with product name and version\n"
        "2. On a 5xx response wait 1 s, 2 s, 4 s between retries\n"
        "3. Filter results by severity >= HIGH"
    )


def test_a_bare_principle_gets_the_task_type_as_its_condition() -> None:
    reply = "PRINCIPLE: Cross-reference at least two independent sources.\nPROCEDURE:\n1. search\n2. compare"
    principle, _ = DualReflector().lessons(parse_dual(reply), EPISODE, "failure")
    assert principle.content == (
        "IF the task type is vulnerability_scan THEN Cross-reference at least two independent sources"
    )


def test_procedure_is_cut_to_500_tokens() -> None:
    text = procedure_text("task", "t", "success", ["x" * 240] * 8)
    assert estimate_tokens(text) <= PROCEDURE_MAX_TOKENS
    assert text.startswith("Task: task\nTask type: t\nResult: success\nSteps:\n1. ")
