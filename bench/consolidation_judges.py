"""What the consolidation bench's models see of the pairs the pre-pass offers to confirm, and two stand-ins
that answer them. Imported by ``consolidation_bank.py``; not a benchmark of its own.

- :func:`offered_in`: the pairs of phase 3's ``PAIRS TO CONFIRM`` section, as a model reads them;
- :class:`Seen`: wraps a model, recording the offered pairs and the tokens their section takes;
- **stand-ins that are not a judge** (reported apart, never as the bank's figure):

  - ``perfect-judge``: an **upper bound**. It answers MERGE for exactly the offered pairs whose two texts
    the labels say are one item (it reads the labels: no model can do better with these offers within
    the cycle's output tokens), grouping pairs that share a lesson into one MERGE;
  - ``confirm-all``: a judge that says yes to every offered pair (one MERGE each, in the prompt's order):
    what the guards, the screens and validation leave of that, the worst a careless model could do.

Both keep the pre-pass's wording (no CONTENT: the merge keeps its best source's text) and stop before
the phase's output tokens (``Stay within N tokens``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lessonbank.llm.base import Message
from lessonbank.llm.fake import FakeLLM
from lessonbank.services.consolidation import prompts
from lessonbank.text import estimate_tokens

_SECTION = re.compile(r"^PAIRS TO CONFIRM [^\n]*\n(.*?)\n\nLESSONS NAMED IN THE PLAN", re.S | re.M)
_ROW = re.compile(r"^\s*(?:\d+\.\s+)?(les_\w+) \| ", re.M)
_MAX_OUTPUT = re.compile(r"Stay within (\d+) tokens")
CONSOLIDATE = "Execute the consolidation plan"


def offered_in(prompt: str) -> tuple[list[tuple[str, str]], int]:
    """The pairs to confirm in phase 3's prompt, in its order, and the tokens of their section."""
    found = _SECTION.search(prompt)
    if found is None or found.group(1).strip() == "none":
        return [], 0
    ids = _ROW.findall(found.group(1))
    return [(ids[n], ids[n + 1]) for n in range(0, len(ids) - 1, 2)], estimate_tokens(found.group(1))


class Seen:
    """A model's answers, with what phase 3 showed it of the offered pairs recorded."""

    def __init__(self, answer: Callable[[Sequence[Message]], str]) -> None:
        self.offered: list[tuple[str, str]] = []
        self.tokens = 0
        self.answer = answer

    def __call__(self, messages: Sequence[Message]) -> str:
        prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
        if messages[0]["content"] == prompts.SYSTEM and prompt.startswith(CONSOLIDATE):
            self.offered, self.tokens = offered_in(prompt)
        return self.answer(messages)

    def llm(self) -> FakeLLM:
        return FakeLLM(default=self)


def _merges(groups: Sequence[Sequence[str]], prompt: str, reason: str) -> str:
    limit = int(m.group(1)) if (m := _MAX_OUTPUT.search(prompt)) else 0
    blocks: list[str] = []
    for ids in groups:
        block = f"---\nOPERATION: MERGE\nTARGET: {', '.join(ids)}\nREASON: {reason}\n---"
        if estimate_tokens("\n".join([*blocks, block])) + 8 > limit:
            break
        blocks.append(block)
    return "\n".join(blocks) or "NONE"


def judge(
    replies: Mapping[str, str], confirms: Callable[[str, str], bool], *, grouped: bool, reason: str
) -> Seen:
    """A stand-in that answers MERGE for the offered pairs ``confirms`` accepts, the other phases as
    ``replies`` (their openings) say."""
    seen: Seen

    def answer(messages: Sequence[Message]) -> str:
        prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
        if messages[0]["content"] != prompts.SYSTEM:
            return "not a reflection"
        if prompt.startswith(CONSOLIDATE):
            pairs = [pair for pair in seen.offered if confirms(*pair)]
            return _merges(_components(pairs) if grouped else pairs, prompt, reason)
        return next((reply for opening, reply in replies.items() if prompt.startswith(opening)), "")

    seen = Seen(answer)
    return seen


def _components(pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Pairs sharing a lesson as one group, in the order of their first pair."""
    head: dict[str, str] = {}

    def find(x: str) -> str:
        while head.setdefault(x, x) != x:
            x = head[x]
        return x

    for a, b in pairs:
        head[find(a)] = find(b)
    groups: dict[str, list[str]] = {}
    for a, b in pairs:
        group = groups.setdefault(find(a), [])
        group += [i for i in (a, b) if i not in group]
    return list(groups.values())


def perfect_judge(replies: Mapping[str, str], items: Mapping[str, str]) -> Seen:
    """The upper bound: confirms exactly the offered pairs the labels say are one item."""
    return judge(replies, lambda a, b: items[a] == items[b], grouped=True, reason="one lesson (labels)")


def confirm_all(replies: Mapping[str, str], items: Mapping[str, Any]) -> Seen:
    """Says yes to every offered pair."""
    return judge(replies, lambda a, b: True, grouped=False, reason="looks the same")


STAND_INS = {"perfect-judge": perfect_judge, "confirm-all": confirm_all}
