"""The lesson reflector: tolerant parsing of seed 004's format, reflect() with repair, prompt building."""

from __future__ import annotations

import asyncio
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.errors import ParseError
from lessonbank.llm import FakeLLM
from lessonbank.models import Episode, VerificationResult
from lessonbank.reflectors.base import Parsed, ReflectorRun, reflect
from lessonbank.reflectors.lesson import (
    ATTEMPT_MAX_CHARS,
    MAX_TAGS,
    OUTCOME_MAX_CHARS,
    TASK_MAX_CHARS,
    LessonReflector,
    parse_lesson,
    parse_tags,
)

# The model output quoted in seed 004 ("Full cycle example", step 4), verbatim.
SEED_REPLY = (
    "<situation>Refactoring large Go files (>1000 lines)</situation>\n"
    "<mistake>Attempted full rewrite via @coder write</mistake>\n"
    "<correction>Use @coder patch or Edit tool for surgical changes</correction>\n"
    "<tags>go, refactor, large-file, edit-tool</tags>"
)
SEED_FIELDS = {
    "situation": "Refactoring large Go files (>1000 lines)",
    "mistake": "Attempted full rewrite via @coder write",
    "correction": "Use @coder patch or Edit tool for surgical changes",
    "tags": ["go", "refactor", "large-file", "edit-tool"],
}
GARBAGE = "I looked at the attempt and I think it mostly went fine, honestly."


def _retag(text: str, mapping: dict[str, str]) -> str:
    for name, replacement in mapping.items():
        text = text.replace(f"<{name}>", f"<{replacement}>").replace(f"</{name}>", f"</{replacement}>")
    return text


# --- parse_lesson: the seed and tolerated variations -------------------------------------------


def test_seed_reply_parses_to_its_four_fields() -> None:
    parsed = parse_lesson(SEED_REPLY)
    assert parsed.skip_reason is None
    assert parsed.fields == SEED_FIELDS


TOLERATED = {
    "upper-case tags": _retag(
        SEED_REPLY,
        {"situation": "SITUATION", "mistake": "MISTAKE", "correction": "CORRECTION", "tags": "TAGS"},
    ),
    "mixed-case tags, open and close differ": SEED_REPLY.replace("<situation>", "<Situation>")
    .replace("</situation>", "</SITUATION>")
    .replace("<tags>", "<Tags>"),
    "whitespace inside blocks": SEED_REPLY.replace("<situation>", "<situation>\n   \t")
    .replace("</situation>", "  \n</situation>")
    .replace("<correction>", "<correction>\n\n")
    .replace("surgical changes", "surgical\n   changes"),
    "whitespace inside the tag brackets": SEED_REPLY.replace("<situation>", "< situation >").replace(
        "</situation>", "< / situation >"
    ),
    "blank lines around blocks": "\n\n   " + SEED_REPLY.replace("\n", "\n\n\n  ") + "\n\n   \n",
    "all blocks on one line": SEED_REPLY.replace("\n", " "),
    "prose before and after": "Sure! Here is the lesson you asked for:\n\n"
    + SEED_REPLY
    + "\n\nLet me know if you need anything else.",
    "xml code fence": "```xml\n" + SEED_REPLY + "\n```",
    "bare code fence with prose": "Here it is:\n```\n" + SEED_REPLY + "\n```\nDone.",
    "missing closing tag on the last block": SEED_REPLY.removesuffix("</tags>"),
    "missing closing tag on a middle block": SEED_REPLY.replace("</mistake>", ""),
    "missing closing tag on the first block": SEED_REPLY.replace("</situation>", ""),
    "double quotes around values": SEED_REPLY.replace(
        "<situation>Refactoring large Go files (>1000 lines)</situation>",
        '<situation>"Refactoring large Go files (>1000 lines)"</situation>',
    ).replace(
        "<correction>Use @coder patch or Edit tool for surgical changes</correction>",
        "<correction>'Use @coder patch or Edit tool for surgical changes'</correction>",
    ),
    "backticks around a value": SEED_REPLY.replace(
        "<mistake>Attempted full rewrite via @coder write</mistake>",
        "<mistake>`Attempted full rewrite via @coder write`</mistake>",
    ),
    "blocks in a different order": "\n".join(reversed(SEED_REPLY.splitlines())),
}


@pytest.mark.parametrize("reply", list(TOLERATED.values()), ids=list(TOLERATED))
def test_tolerated_variations_parse_like_the_seed(reply: str) -> None:
    parsed = parse_lesson(reply)
    assert parsed.skip_reason is None
    assert parsed.fields == SEED_FIELDS


def test_inner_apostrophes_are_kept() -> None:
    parsed = parse_lesson(
        "<situation>When a file's size is huge</situation><correction>Don't rewrite it</correction>"
    )
    assert parsed.fields["situation"] == "When a file's size is huge"
    assert parsed.fields["correction"] == "Don't rewrite it"


def test_mistake_is_optional_but_reported_as_none() -> None:
    parsed = parse_lesson("<situation>s here</situation>\n<correction>c here</correction>\n<tags>a, b</tags>")
    assert parsed.fields["mistake"] is None
    assert parsed.fields["tags"] == ["a", "b"]


# --- tags ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("go, refactor, large-file", ["go", "refactor", "large-file"]),
        ("go; refactor; large-file", ["go", "refactor", "large-file"]),
        ("go\nrefactor\nlarge-file", ["go", "refactor", "large-file"]),
        ("go refactor large-file", ["go", "refactor", "large-file"]),
        ("Go, REFACTOR, Large File", ["go", "refactor", "large-file"]),
        ("Edit Tool; Large   File", ["edit-tool", "large-file"]),
        ("go, Go, GO , refactor", ["go", "refactor"]),
        ("#go, 'refactor', \"edit-tool\", [large-file]", ["go", "refactor", "edit-tool", "large-file"]),
        ("go,, ,refactor,", ["go", "refactor"]),
        ("", []),
        (None, []),
    ],
)
def test_parse_tags_splits_and_normalises(raw: str | None, expected: list[str]) -> None:
    assert parse_tags(raw) == expected


def test_more_than_five_tags_are_cut_to_five_in_order() -> None:
    reply = SEED_REPLY.replace(
        "<tags>go, refactor, large-file, edit-tool</tags>", "<tags>a1, b2, c3, d4, e5, f6, g7</tags>"
    )
    assert MAX_TAGS == 5
    assert parse_lesson(reply).fields["tags"] == ["a1", "b2", "c3", "d4", "e5"]


def test_tags_in_reply_are_lowercased_and_hyphenated() -> None:
    reply = SEED_REPLY.replace("go, refactor, large-file, edit-tool", "Go, Refactor, Large File, EDIT TOOL")
    assert parse_lesson(reply).fields["tags"] == ["go", "refactor", "large-file", "edit-tool"]


def test_newline_separated_single_word_tags_in_reply() -> None:
    reply = SEED_REPLY.replace("go, refactor, large-file, edit-tool", "\ngo\nrefactor\nlarge-file\n")
    assert parse_lesson(reply).fields["tags"] == ["go", "refactor", "large-file"]


def test_newline_separated_multi_word_tags_in_reply_stay_grouped() -> None:
    reply = SEED_REPLY.replace("go, refactor, large-file, edit-tool", "\nLarge File\nEdit Tool\n")
    assert parse_lesson(reply).fields["tags"] == ["large-file", "edit-tool"]


# --- skip and errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "<skip>nothing actionable</skip>",
        "  <SKIP> nothing   actionable </SKIP>\n",
        "The failure was a transient blip.\n```xml\n<skip>nothing actionable</skip>\n```",
        "<skip>nothing actionable",
    ],
)
def test_skip_block_gives_a_skip(reply: str) -> None:
    parsed = parse_lesson(reply)
    assert parsed.skip_reason == "nothing actionable"
    assert parsed.fields == {}


def test_empty_skip_block_still_skips_with_a_reason() -> None:
    assert parse_lesson("<skip></skip>").skip_reason == "nothing actionable"


@pytest.mark.parametrize(
    "reply",
    [
        GARBAGE,
        "",
        "   \n\t ",
        "<situation>Only a situation, no correction</situation>",
        "<correction>Only a correction</correction><tags>a, b</tags>",
        "<situation></situation><correction>   </correction>",
        '<situation>""</situation><correction>``</correction>',
        "<tags>go, refactor</tags>",
        "situation: big files\ncorrection: use patch",
    ],
)
def test_unusable_reply_raises_parse_error_carrying_raw(reply: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_lesson(reply)
    assert info.value.raw == reply


def test_parse_error_names_the_missing_block() -> None:
    with pytest.raises(ParseError, match="correction"):
        parse_lesson("<situation>big files</situation>")


# --- property: noise around valid values never changes them --------------------------------------

_VALUE_ALPHABET = st.characters(
    codec="utf-8",
    categories=("L", "N", "P", "Zs"),
    exclude_characters="<>\"'`",
)
_values = (
    st.text(_VALUE_ALPHABET, min_size=1, max_size=120)
    .map(lambda s: s.replace("  ", " \n "))
    .filter(lambda s: s.strip() != "")
)
_prose = st.sampled_from(
    [
        "",
        "Here is the lesson:",
        "Sure!\n\nI reflected on the attempt.",
        "Note: the agent should have read the file first.",
        "Hope this helps.",
    ]
)
_space = st.sampled_from(["", " ", "\n", "\n\n", "  \t", "\r\n"])


def _case(name: str, style: int) -> str:
    return [name, name.upper(), name.capitalize(), name.swapcase()][style]


@st.composite
def _noisy_reply(draw: st.DrawFn) -> tuple[str, str, str]:
    situation, correction = draw(_values), draw(_values)
    blocks = []
    for name, value in (("situation", situation), ("mistake", draw(_values)), ("correction", correction)):
        style = draw(st.integers(0, 3))
        blocks.append(
            f"<{_case(name, style)}>{draw(_space)}{value}{draw(_space)}</{_case(name, draw(st.integers(0, 3)))}>"
        )
    blocks.append(f"<tags>{draw(st.sampled_from(['go, refactor', 'a; b; c', 'x']))}</tags>")
    body = "".join(block + draw(_space) for block in blocks)
    fence = draw(st.sampled_from([("", ""), ("```xml\n", "\n```"), ("```\n", "\n```\n")]))
    reply = f"{draw(_prose)}{draw(_space)}{fence[0]}{body}{fence[1]}{draw(_space)}{draw(_prose)}"
    return reply, situation, correction


@settings(max_examples=200, deadline=None)
@given(_noisy_reply())
def test_noise_around_valid_values_does_not_change_them(case: tuple[str, str, str]) -> None:
    reply, situation, correction = case
    parsed = parse_lesson(reply)
    assert parsed.skip_reason is None
    assert parsed.fields["situation"] == " ".join(situation.split())
    assert parsed.fields["correction"] == " ".join(correction.split())


# --- reflect(): one call, one repair call, then a skip keeping the raw output ----------------------


def _episode(**kwargs: object) -> Episode:
    data: dict[str, object] = {"task": "refactor pkg/engine to extract Close", "error": "provider timeout"}
    data.update(kwargs)
    return Episode(**data)  # type: ignore[arg-type]


def _reflect(llm: FakeLLM, episode: Episode | None = None, trigger: str = "error") -> ReflectorRun:
    return asyncio.run(reflect(LessonReflector(), llm, episode or _episode(), trigger))


def test_reflect_valid_first_reply_makes_one_call() -> None:
    llm = FakeLLM([SEED_REPLY])
    run = _reflect(llm)
    assert run.llm_calls == 1
    assert len(llm.calls) == 1
    assert run.parsed.fields == SEED_FIELDS
    assert run.raw_output == SEED_REPLY
    assert run.error is None
    assert [m["role"] for m in llm.calls[0].messages] == ["system", "user"]
    assert llm.calls[0].temperature == 0.0


def test_reflect_malformed_then_valid_makes_one_repair_call() -> None:
    llm = FakeLLM([GARBAGE, SEED_REPLY])
    run = _reflect(llm)
    assert run.llm_calls == 2
    assert len(llm.calls) == 2
    assert run.parsed.skip_reason is None
    assert run.parsed.fields == SEED_FIELDS
    assert run.error is None
    repair = llm.calls[1].messages
    assert repair[-2] == {"role": "assistant", "content": GARBAGE}
    assert repair[-1]["role"] == "user"
    assert "<situation>" in repair[-1]["content"]
    assert "<skip>nothing actionable</skip>" in repair[-1]["content"]
    assert GARBAGE in run.raw_output and SEED_REPLY in run.raw_output


def test_reflect_malformed_twice_gives_a_skip_keeping_both_replies() -> None:
    second = "<situation>still no correction block</situation>"
    llm = FakeLLM([GARBAGE, second], default=SEED_REPLY)
    run = _reflect(llm)
    assert len(llm.calls) == 2  # no third call even though the LLM would have answered
    assert run.llm_calls == 2
    assert run.parsed.fields == {}
    assert run.parsed.skip_reason is not None
    assert run.parsed.skip_reason.startswith("unparseable")
    assert run.error == run.parsed.skip_reason
    assert GARBAGE in run.raw_output
    assert second in run.raw_output


def test_reflect_skip_reply_is_a_skip_without_repair() -> None:
    llm = FakeLLM(["<skip>nothing actionable</skip>"], default=SEED_REPLY)
    run = _reflect(llm)
    assert run.llm_calls == 1
    assert run.parsed.skip_reason == "nothing actionable"
    assert run.error is None


OPENAI_KEY = "sk-proj-" + "Q7wErTy9UiOpAsDfGhJkLzXcVbNm1234_5678-abcd"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
PASSWORD = "hunter2-correct-horse"


def test_reflect_prompt_carries_no_planted_secret() -> None:
    episode = _episode(
        task="call the billing API",
        error=f"401 Unauthorized: invalid key {OPENAI_KEY}",
        attempt=f"export DB_PASSWORD={PASSWORD}\naws configure set aws_access_key_id {AWS_KEY}",
        output=f"Authorization: Bearer {OPENAI_KEY}",
    )
    llm = FakeLLM([GARBAGE, SEED_REPLY])
    _reflect(llm, episode)
    assert len(llm.calls) == 2
    for call in llm.calls:
        sent = "\n".join(m["content"] for m in call.messages)
        for secret in (OPENAI_KEY, AWS_KEY, PASSWORD, OPENAI_KEY[8:30]):
            assert secret not in sent
    user = llm.calls[0].messages[1]["content"]
    assert "[REDACTED:" in user
    assert "401 Unauthorized" in user  # the surrounding error text still reaches the model


def test_secret_cut_by_truncation_does_not_leak_a_prefix() -> None:
    leaked = []
    for pad in range(700, 800):
        llm = FakeLLM([SEED_REPLY])
        _reflect(llm, _episode(error="x" * pad + " " + OPENAI_KEY))
        sent = llm.calls[0].messages[1]["content"]
        if OPENAI_KEY[8:18] in sent:
            leaked.append(pad)
    assert leaked == []


# --- the user prompt: truncation and bounds --------------------------------------------------------


def _section(prompt: str, name: str) -> str:
    match = re.search(rf"^{name}:\n(.*?)(?:\n\n[A-Z]+:\n|\Z)", prompt, re.DOTALL | re.MULTILINE)
    assert match is not None, prompt
    return match.group(1)


def test_long_attempt_is_cut_with_a_marker() -> None:
    attempt = "step " + "A" * 5000 + " LAST-WORDS"
    prompt = LessonReflector().user_prompt(_episode(attempt=attempt), "error")
    section = _section(prompt, "ATTEMPT")
    assert len(section) <= ATTEMPT_MAX_CHARS
    assert section.startswith("step AAAA")
    assert "truncated" in section
    assert "LAST-WORDS" not in prompt


def test_long_outcome_is_cut_with_a_marker() -> None:
    error = "Traceback: " + "E" * 3000 + " ERROR-TAIL"
    prompt = LessonReflector().user_prompt(_episode(error=error, output="O" * 3000), "error")
    section = _section(prompt, "OUTCOME")
    assert len(section) <= OUTCOME_MAX_CHARS
    assert section.startswith("status: failure\ntrigger: error\nerror: Traceback: EEE")
    assert "truncated" in section
    assert "ERROR-TAIL" not in prompt


def test_short_fields_are_kept_whole_without_marker() -> None:
    attempt, error = "rewrote engine.go in one write call", "timeout after 120s"
    prompt = LessonReflector().user_prompt(_episode(attempt=attempt, error=error), "error")
    assert _section(prompt, "ATTEMPT") == attempt
    assert f"error: {error}" in _section(prompt, "OUTCOME")
    assert "truncated" not in prompt


def test_attempt_just_over_the_limit_is_cut() -> None:
    attempt = "a" * (ATTEMPT_MAX_CHARS + 1)
    section = _section(LessonReflector().user_prompt(_episode(attempt=attempt), "error"), "ATTEMPT")
    assert section != attempt
    assert len(section) <= ATTEMPT_MAX_CHARS
    assert "truncated" in section


def test_actions_stand_in_for_a_missing_attempt() -> None:
    episode = _episode(actions=["read engine.go", {"tool": "write", "path": "engine.go"}])
    section = _section(LessonReflector().user_prompt(episode, "error"), "ATTEMPT")
    assert "read engine.go" in section and "'tool': 'write'" in section


def test_failed_checks_reach_the_outcome() -> None:
    episode = _episode(
        error=None,
        status="failure",
        verification=[
            VerificationResult(tool="pytest", status="failed", exit_code=1, stderr="3 tests failed"),
            VerificationResult(tool="mypy", status="passed", exit_code=0, stderr="NOT-SHOWN"),
        ],
    )
    outcome = _section(LessonReflector().user_prompt(episode, "failure"), "OUTCOME")
    assert "pytest failed (exit 1): 3 tests failed" in outcome
    assert "NOT-SHOWN" not in outcome


def test_whole_user_prompt_stays_bounded() -> None:
    huge = "z" * 120_000
    episode = _episode(
        task="t " + huge,
        attempt=huge,
        error=huge,
        output=huge,
        task_type="refactor",
        verification=[VerificationResult(tool="pytest", stderr=huge)],
        actions=[huge, huge],
    )
    prompt = LessonReflector().user_prompt(episode, "error")
    assert len(prompt) <= TASK_MAX_CHARS + ATTEMPT_MAX_CHARS + OUTCOME_MAX_CHARS + 100
    assert prompt.count("truncated") == 3


def test_huge_task_type_keeps_the_user_prompt_bounded() -> None:
    episode = _episode(task_type="k" * 100_000)
    prompt = LessonReflector().user_prompt(episode, "error")
    assert len(prompt) <= TASK_MAX_CHARS + ATTEMPT_MAX_CHARS + OUTCOME_MAX_CHARS + 100


# --- lessons() -------------------------------------------------------------------------------------


def test_lessons_from_the_seed_reply() -> None:
    episode = _episode(namespace="proj", task_type="refactor", agent="coder")
    [lesson] = LessonReflector().lessons(parse_lesson(SEED_REPLY), episode, "error")
    assert lesson.content == (
        "LESSON: Refactoring large Go files (>1000 lines)\n"
        "MISTAKE: Attempted full rewrite via @coder write\n"
        "CORRECTION: Use @coder patch or Edit tool for surgical changes"
    )
    assert lesson.tags == ["reflexion", "trigger:error", "go", "refactor", "large-file", "edit-tool"]
    assert (lesson.namespace, lesson.trigger, lesson.episode_id) == ("proj", "error", episode.id)
    assert (lesson.situation, lesson.correction) == (SEED_FIELDS["situation"], SEED_FIELDS["correction"])
    assert lesson.agent == "coder"
    assert lesson.source == "llm"


def test_lessons_without_mistake_say_not_stated() -> None:
    parsed = parse_lesson(
        "<situation>big files</situation><correction>use patch</correction><tags>a, b</tags>"
    )
    [lesson] = LessonReflector().lessons(parsed, _episode(), "manual")
    assert lesson.mistake == "(not stated)"
    assert "MISTAKE: (not stated)" in lesson.content


def test_too_few_tags_are_topped_up_from_the_task() -> None:
    parsed = Parsed(fields={"situation": "s", "mistake": None, "correction": "c", "tags": ["go"]})
    episode = _episode(task="The migration of database schema failed")
    [lesson] = LessonReflector().lessons(parsed, episode, "error")
    assert lesson.tags == ["reflexion", "trigger:error", "go", "migration"]


def test_top_up_ignores_a_task_type_already_in_tags_in_another_case() -> None:
    parsed = Parsed(fields={"situation": "s", "mistake": None, "correction": "c", "tags": ["rust"]})
    episode = _episode(task="refactor the borrow checker errors", task_type="Rust")
    [lesson] = LessonReflector().lessons(parsed, episode, "error")
    assert len(lesson.tags) - 2 >= 2, lesson.tags
