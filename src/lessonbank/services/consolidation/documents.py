"""A namespace's three documents (seed 002): core memory, the evolution log and the reflection log.

- **Core memory**: one Markdown document with four sections (Identity, Active Context, Persona,
  Critical Facts), hard cap :data:`CORE_CAP_TOKENS`. Rewritten by a cycle's phase 4 as part of its
  proposal, applied only with it. Pinned lessons are always in Critical Facts (:func:`with_pinned`).
- **Evolution log**: one entry per applied EVOLVE insight, numbered by reflection. Capped at
  :data:`EVOLUTION_CAP_TOKENS`: past it, entries older than the last :data:`EVOLUTION_RECENT` move to
  the archive, then the oldest kept ones too, until it fits (seed 002's archive strategy).
- **Reflection log**: one entry per cycle that made a proposal, its status kept in step with the
  decision. The last :data:`REFLECTION_FULL` entries are shown in full, older ones as one-line
  summaries; after :data:`REFLECTION_ARCHIVE_AFTER` reflections, entries older than the last
  :data:`REFLECTION_FULL` + summary window move to the archive.

All three live in the namespace's cycle state (``ConsolidationStore.cycle_state``) under
:data:`STATE_KEY`, so they are written in the same transaction as the proposal that changes them.
Pure functions over plain data: no store, no LLM.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from lessonbank.models import Lesson
from lessonbank.services.sections import inline
from lessonbank.text import estimate_tokens

STATE_KEY = "documents"
CORE_SECTIONS = ("Identity", "Active Context", "Persona", "Critical Facts")
CORE_CAP_TOKENS = 3_000
EVOLUTION_CAP_TOKENS = 2_000
EVOLUTION_RECENT = 10  # individual entries kept in the evolution log before the archive
REFLECTION_FULL = 20  # reflection-log entries shown in full
REFLECTION_SUMMARIES = 30  # older entries kept as one-line summaries before the archive
REFLECTION_ARCHIVE_AFTER = 50  # the reflection count from which old entries are archived
MILESTONES = {
    10: "first evolution summary: identify initial patterns",
    25: "review and consolidate the evolution threads",
    50: "major synthesis: what has fundamentally changed?",
    100: "deep retrospective: a state-of-understanding essay",
}
CORE_CONTEXT_HEADER = "## Core Memory"
EMPTY_CORE = "\n\n".join(f"## {name}\n" for name in CORE_SECTIONS).strip() + "\n"

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class EvolutionEntry:
    number: int  # the reflection that wrote it
    date: str  # YYYY-MM-DD
    text: str


@dataclass(frozen=True)
class ReflectionEntry:
    number: int
    date: str
    proposal_id: str
    status: str  # the proposal's status: pending, applied, partially_applied, rejected, reverted
    insight: str  # one line: the summary line of the log
    text: str  # the full entry


@dataclass(frozen=True)
class Documents:
    core_memory: str = ""
    evolution: tuple[EvolutionEntry, ...] = ()
    evolution_archive: tuple[EvolutionEntry, ...] = ()
    reflections: tuple[ReflectionEntry, ...] = ()
    reflection_archive: tuple[ReflectionEntry, ...] = ()
    first_reflection: str | None = None  # date of reflection #1
    count: int = 0  # reflections so far (cycles that made a proposal)

    # ------------------------------------------------------------------ state

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Documents:
        raw = state.get(STATE_KEY) or {}
        return cls(
            core_memory=str(raw.get("core_memory", "")),
            evolution=tuple(EvolutionEntry(**e) for e in raw.get("evolution", [])),
            evolution_archive=tuple(EvolutionEntry(**e) for e in raw.get("evolution_archive", [])),
            reflections=tuple(ReflectionEntry(**e) for e in raw.get("reflections", [])),
            reflection_archive=tuple(ReflectionEntry(**e) for e in raw.get("reflection_archive", [])),
            first_reflection=raw.get("first_reflection"),
            count=int(raw.get("count", 0)),
        )

    def into(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``state`` holding these documents."""
        return {**state, STATE_KEY: _plain(self)}

    # ------------------------------------------------------------------ changes

    def with_reflection(self, proposal_id: str, when: datetime, insight: str, text: str) -> Documents:
        """The next reflection logged (status pending), pruned by seed 002's rules."""
        number = self.count + 1
        entry = ReflectionEntry(
            number=number,
            date=f"{when:%Y-%m-%d}",
            proposal_id=proposal_id,
            status="pending",
            insight=_line(insight, 160),
            text=text.strip(),
        )
        kept, archive = [*self.reflections, entry], list(self.reflection_archive)
        if number > REFLECTION_ARCHIVE_AFTER:
            cut = len(kept) - (REFLECTION_FULL + REFLECTION_SUMMARIES)
            if cut > 0:
                archive += kept[:cut]
                kept = kept[cut:]
        return replace(
            self,
            reflections=tuple(kept),
            reflection_archive=tuple(archive),
            count=number,
            first_reflection=self.first_reflection or entry.date,
        )

    def with_status(self, proposal_id: str, status: str) -> Documents:
        """The reflection of ``proposal_id`` marked with the proposal's new status."""
        return replace(
            self,
            reflections=tuple(
                replace(e, status=status) if e.proposal_id == proposal_id else e for e in self.reflections
            ),
        )

    def with_evolution(
        self, texts: Iterable[str], number: int, when: datetime, count: TokenCounter = estimate_tokens
    ) -> Documents:
        """EVOLVE insights added as entries of reflection ``number``, then pruned to the cap."""
        added = [EvolutionEntry(number, f"{when:%Y-%m-%d}", t.strip()) for t in texts if t.strip()]
        if not added:
            return self
        kept, archive = [*self.evolution, *added], list(self.evolution_archive)
        newest = max(e.number for e in kept)
        if count(self._evolution_text(kept)) > EVOLUTION_CAP_TOKENS:
            archive += [e for e in kept if e.number <= newest - EVOLUTION_RECENT]
            kept = [e for e in kept if e.number > newest - EVOLUTION_RECENT]
        while len(kept) > 1 and count(self._evolution_text(kept)) > EVOLUTION_CAP_TOKENS:
            archive.append(kept.pop(0))
        if count(self._evolution_text(kept)) > EVOLUTION_CAP_TOKENS:  # one entry alone past the cap
            kept = [replace(kept[0], text=_fit(kept[0].text, EVOLUTION_CAP_TOKENS // 2, count))]
        return replace(self, evolution=tuple(kept), evolution_archive=tuple(archive))

    # ------------------------------------------------------------------ rendering

    def evolution_log(self) -> str:
        return self._evolution_text(self.evolution)

    def _evolution_text(self, entries: Iterable[EvolutionEntry]) -> str:
        reached = [f"#{m}" for m in MILESTONES if m <= self.count]
        lines = [
            "# Evolution",
            "",
            "## Overview",
            f"- First reflection: {self.first_reflection or 'none yet'}",
            f"- Total reflections: {self.count}",
            f"- Milestones reached: {', '.join(reached) if reached else 'none'}",
            "",
            "## Recent Reflections",
        ]
        for entry in entries:
            lines += ["", f"### Reflection #{entry.number} — {entry.date}", entry.text]
        return "\n".join(lines).strip() + "\n"

    def reflection_log(self, *, last: int | None = None) -> str:
        """The log: summary lines, then full entries (only the ``last`` full ones when given)."""
        full = self.reflections[-REFLECTION_FULL:]
        summaries = self.reflections[: len(self.reflections) - len(full)]
        lines = ["# Reflection Log"]
        if self.reflection_archive and last is None:
            first, final = self.reflection_archive[0].number, self.reflection_archive[-1].number
            lines += ["", "## Archived Reflections", f"- #{first}-{final}: archived"]
        if summaries and last is None:
            lines += ["", "## Summary Lines"]
            lines += [_summary_line(e) for e in summaries]
        shown = full if last is None else full[-last:]
        if shown:
            lines += ["", "## Full Entries"]
            for entry in shown:
                lines += ["", _summary_line(entry), entry.text]
        return "\n".join(lines).strip() + "\n"

    def archives(self) -> tuple[str, str]:
        """The evolution archive and the reflection archive, as Markdown."""
        evolution = ["# Evolution Archive"]
        for entry in self.evolution_archive:
            evolution += ["", f"### Reflection #{entry.number} — {entry.date}", entry.text]
        reflections = ["# Reflection Archive"]
        for r in self.reflection_archive:
            reflections += ["", _summary_line(r), r.text]
        return "\n".join(evolution) + "\n", "\n".join(reflections) + "\n"


def milestone(number: int) -> str | None:
    """What seed 002 asks of reflection ``number`` when it is a milestone (#10, 25, 50, 100)."""
    return MILESTONES.get(number)


def core_sections(text: str) -> dict[str, str]:
    """The core memory's sections by name (``## Name`` headings, any case); text before the first
    heading is dropped."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    names = {name.lower(): name for name in CORE_SECTIONS}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            title = stripped.lstrip("#").strip().rstrip(":").strip()
            if title.lower() in names:
                current = sections.setdefault(names[title.lower()], [])
                continue
        if current is not None:
            current.append(line.rstrip())
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}


def build_core(sections: Mapping[str, str]) -> str:
    return (
        "\n\n".join(f"## {name}\n{sections.get(name, '').strip()}".rstrip() for name in CORE_SECTIONS) + "\n"
    )


def with_pinned(core: str, pinned: Iterable[Lesson], count: TokenCounter = estimate_tokens) -> str:
    """``core`` with every pinned lesson in Critical Facts (one bullet each, added where missing),
    within :data:`CORE_CAP_TOKENS`: Active Context, then Persona, then Identity are cut first; the
    pinned facts are kept whole as long as they alone fit."""
    sections = core_sections(core)
    facts = sections.get("Critical Facts", "")
    missing = missing_pinned(core, pinned)
    if missing:
        sections["Critical Facts"] = "\n".join([facts, *missing]).strip()
    text = build_core(sections)
    for name in ("Active Context", "Persona", "Identity", "Critical Facts"):
        if count(text) <= CORE_CAP_TOKENS:
            break
        over = count(text) - CORE_CAP_TOKENS
        keep = max(0, count(sections.get(name, "")) - over)
        sections[name] = _fit(sections.get(name, ""), keep, count)
        text = build_core(sections)
    return text


def missing_pinned(core: str, pinned: Iterable[Lesson]) -> list[str]:
    """The Critical Facts bullets (``- <fact> [<lesson id>]``) of the pinned lessons ``core`` lacks:
    a fact is there when its id or its text is in Critical Facts."""
    facts = core_sections(core).get("Critical Facts", "")
    return [
        f"- {_line(lesson.content, 400)} [{lesson.id}]"
        for lesson in pinned
        if lesson.id not in facts and _line(lesson.content, 400) not in facts
    ]


def core_for_context(core: str, budget_tokens: int, count: TokenCounter = estimate_tokens) -> str:
    """The core memory as a context section, within ``budget_tokens`` ('' when empty or nothing
    fits). Its text is data like any lesson's: each line becomes one bullet (folded with
    :func:`~lessonbank.services.sections.inline`) under a heading written here, so nothing in it
    can open a section; Critical Facts come first, then Active Context, Identity and Persona, each
    cut at a line when the budget runs out."""
    sections = core_sections(core)
    header = CORE_CONTEXT_HEADER
    lines: list[str] = []
    for name in ("Critical Facts", "Active Context", "Identity", "Persona"):
        items = [inline(line.strip().lstrip("-*#> ").strip()) for line in sections.get(name, "").splitlines()]
        items = [item for item in items if item]
        if not items:
            continue
        heading = f"### {name}"
        if count("\n".join([header, *lines, heading, f"- {items[0]}"])) > budget_tokens:
            break
        lines.append(heading)
        for item in items:
            if count("\n".join([header, *lines, f"- {item}"])) > budget_tokens:
                break
            lines.append(f"- {item}")
    return "\n".join([header, *lines]) if lines else ""


def _summary_line(entry: ReflectionEntry) -> str:
    return (
        f"## Reflection #{entry.number} — {entry.date} | {entry.status} | Insight: {_quoted(entry.insight)}"
    )


def _quoted(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'


def _line(text: str, limit: int) -> str:
    one = inline(text)
    return one if len(one) <= limit else one[: limit - 1].rstrip() + "…"


def _fit(text: str, tokens: int, count: TokenCounter) -> str:
    """``text`` cut at a line (else a character) boundary so it counts at most ``tokens``."""
    if count(text) <= tokens:
        return text
    lines = text.splitlines()
    while lines and count("\n".join(lines)) > tokens:
        lines.pop()
    if lines:
        return "\n".join(lines)
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count(text[:middle]) <= tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def _plain(documents: Documents) -> dict[str, Any]:
    plain = asdict(documents)
    for key in ("evolution", "evolution_archive", "reflections", "reflection_archive"):
        plain[key] = list(plain[key])
    return plain


def core_fingerprint(core: str) -> str:
    """A rewrite of the core memory as remembered when a person turns it down."""
    return "core:" + hashlib.sha256(" ".join(core.split()).encode()).hexdigest()[:24]
