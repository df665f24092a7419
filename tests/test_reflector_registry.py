"""Reflectors are registered by name; a custom reflector gets a repair call with its own or a generic hint."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from lessonbank.errors import ConfigError, ParseError
from lessonbank.llm import FakeLLM
from lessonbank.llm.base import Message
from lessonbank.models import Episode, Lesson
from lessonbank.reflectors import (
    DualReflector,
    LessonReflector,
    Parsed,
    build_reflectors,
    register_reflector,
    registered_reflectors,
)
from lessonbank.reflectors.base import DEFAULT_REPAIR_HINT, ReflectorRun, reflect
from lessonbank.reflectors.registry import unregister_reflector


class VerdictReflector:
    """A user's reflector: it wants one line 'VERDICT: <text>' and knows no repair hint."""

    name = "verdict"
    max_output_tokens = 50

    def messages(self, episode: Episode, trigger: str) -> list[Message]:
        return [Message(role="user", content=f"Give a line 'VERDICT: …' about: {episode.task}")]

    def parse(self, text: str) -> Parsed:
        if not text.startswith("VERDICT:"):
            raise ParseError("no VERDICT line", raw=text)
        return Parsed(fields={"verdict": text.removeprefix("VERDICT:").strip()})

    def lessons(self, parsed: Parsed, episode: Episode, trigger: str) -> list[Lesson]:
        return []


class HintedVerdictReflector(VerdictReflector):
    repair_hint = "Start your answer with 'VERDICT:'."


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    yield
    for name in ("verdict", "lesson"):
        unregister_reflector(name)


def _run(reflector: VerdictReflector, replies: list[str]) -> tuple[FakeLLM, ReflectorRun]:
    llm = FakeLLM(replies)
    return llm, asyncio.run(reflect(reflector, llm, Episode(task="deploy the service"), "error"))


def test_a_custom_reflectors_malformed_first_reply_is_repaired_with_the_generic_hint() -> None:
    llm, run = _run(VerdictReflector(), ["I think it went fine", "VERDICT: retry with a longer timeout"])
    assert run.llm_calls == 2 and run.error is None
    assert run.parsed.fields == {"verdict": "retry with a longer timeout"}
    repair = llm.calls[1].messages[-1]["content"]
    assert repair == f"Your reply could not be read: no VERDICT line. {DEFAULT_REPAIR_HINT}"


def test_a_reflectors_own_repair_hint_is_used() -> None:
    llm, _ = _run(HintedVerdictReflector(), ["nope", "VERDICT: fine"])
    assert llm.calls[1].messages[-1]["content"].endswith("Start your answer with 'VERDICT:'.")


def test_two_malformed_replies_are_a_skip_that_keeps_the_parse_error() -> None:
    _, run = _run(VerdictReflector(), ["nope", "still nope"])
    assert run.parsed.skip_reason == "unparseable output after one repair: no VERDICT line"
    assert run.error == run.parsed.skip_reason


def test_the_built_in_reflectors_are_registered_and_carry_their_own_hints() -> None:
    assert set(registered_reflectors()) >= {"lesson", "insight", "dual", "reflexion"}
    reflectors = build_reflectors()
    assert {name: r.name for name, r in reflectors.items()} == {name: name for name in reflectors}
    assert all(getattr(r, "repair_hint", "") not in ("", DEFAULT_REPAIR_HINT) for r in reflectors.values())
    assert build_reflectors()["lesson"] is not reflectors["lesson"]  # fresh instances per bank


def test_a_registered_reflector_is_built_for_every_bank_afterwards() -> None:
    register_reflector("verdict", VerdictReflector)
    assert "verdict" in registered_reflectors()
    assert isinstance(build_reflectors()["verdict"], VerdictReflector)
    register_reflector("verdict", VerdictReflector)  # the same factory again is a no-op
    with pytest.raises(ConfigError, match="replace=True"):
        register_reflector("verdict", HintedVerdictReflector)
    register_reflector("verdict", HintedVerdictReflector, replace=True)
    assert isinstance(build_reflectors()["verdict"], HintedVerdictReflector)
    unregister_reflector("verdict")
    assert "verdict" not in registered_reflectors()


def test_replacing_a_built_in_and_unregistering_restores_it() -> None:
    register_reflector("lesson", DualReflector, replace=True)
    with pytest.raises(ConfigError, match="calls itself 'dual'"):
        build_reflectors()
    unregister_reflector("lesson")
    assert isinstance(build_reflectors()["lesson"], LessonReflector)


@pytest.mark.parametrize("name", ["", " lesson", "off"])
def test_unusable_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="not usable"):
        register_reflector(name, VerdictReflector)
