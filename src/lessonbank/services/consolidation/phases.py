"""The cycle's five LLM phases (seed 002): survey, meta-reflection, consolidate, rewrite core,
summarize; one call each, within the cycle's token budget.

**Budget.** A cycle has ``max_in`` input and ``max_out`` output tokens (30,000 and 8,000 by default).
Each phase gets a share of what is left (:data:`SHARES`), so what one phase does not use goes to the
next. A prompt is cut to its share before it is sent (:func:`lessonbank.reflectors.budget.fit_fields`,
counted with the bank's conservative token counter, which never counts fewer tokens than a BPE
tokenizer), and the call asks for at most its output share (``max_tokens``). Spent is what the
provider reports, or the count when that is larger; a reply that reports more output than was asked
for ends the cycle (a provider that ignored ``max_tokens`` must not take the budget past its cap).

**Failure.** A reply a phase cannot use (empty; phase 3 without any operation block and not
``NONE``; a core memory without its four sections) raises :class:`~lessonbank.errors.ParseError`
naming the phase, with the raw reply: the cycle records it in the dream log and proposes nothing.
One operation block that cannot be read is not a failure: it becomes a dropped operation whose note
says why, shown to the person with the proposal.

**Screens.** Each reply is redacted as it arrives, so no later prompt holds a secret the model
echoed. Operations and the core memory are screened as they are parsed (:mod:`.screens`): a lesson
that reads as instructions marked for quarantine, such a line of the core memory withheld
(``PhaseResult.withheld``).
"""

from __future__ import annotations

import difflib
import math
import re
import string
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast, get_args

from lessonbank.errors import BudgetExceededError, ParseError
from lessonbank.llm import LLM
from lessonbank.llm.base import Message, Usage
from lessonbank.llm.pricing import cost_of
from lessonbank.models import LESSON_MAX_CHARS, Episode, Lesson
from lessonbank.proposals import LinkType, Operation, OperationKind
from lessonbank.redact import redact
from lessonbank.reflectors.budget import OMITTED, Field, fit_fields
from lessonbank.services.consolidation import offers, prompts
from lessonbank.services.consolidation.documents import (
    CORE_CAP_TOKENS,
    CORE_SECTIONS,
    MILESTONES,
    core_sections,
)
from lessonbank.services.consolidation.operations import merged_lesson
from lessonbank.services.consolidation.prepass import Candidates
from lessonbank.services.consolidation.screens import Withheld, screened_document, screened_operation
from lessonbank.services.sections import inline
from lessonbank.text import TokenCounter

PHASES = ("survey", "meta", "consolidate", "core", "summarize")
# Each phase's share of the budget (input, output); seed 002's estimates: the survey reads the most,
# phase 3 writes the operations, phase 4 a core memory of up to 3,000 tokens.
SHARES: Mapping[str, tuple[float, float]] = {
    "survey": (0.45, 0.125),
    "meta": (0.12, 0.0875),
    "consolidate": (0.2, 0.35),
    "core": (0.16, 0.375),
    "summarize": (0.07, 0.0625),
}
LINKS: tuple[str, ...] = get_args(LinkType)
ROW_CHARS = 240  # one lesson or episode line in a prompt
_BLOCK_KEY = re.compile(r"^\s*(OPERATION|TARGET|CONTENT|REASON|EVOLUTION_CONTEXT)\s*:\s?(.*)$", re.IGNORECASE)


@dataclass
class CycleInput:
    """What a cycle reads (seed 002's input scope), gathered by the cycle."""

    namespace: str
    now: datetime
    core_memory: str
    episodes: Sequence[Episode]
    lessons: Sequence[Lesson]  # live, decay above 0.3, most relevant first
    fading: Sequence[tuple[Lesson, float, str]]  # (lesson, score, tier) below 0.5
    candidates: Candidates
    pending: Sequence[Lesson]  # quarantined lessons of untrusted agents
    pinned: Sequence[Lesson]
    by_id: Mapping[str, Lesson]  # every lesson of the namespace, for the operations' ids
    last_reflection: str | None
    reflection_log: str  # the last 5 entries
    evolution: str
    reflection_number: int
    milestone: str | None = None


@dataclass
class PhaseUsage:
    phase: str
    tokens_in: int
    tokens_out: int
    allowed_in: int
    allowed_out: int


@dataclass
class PhaseResult:
    """What the five phases produced, and what they spent."""

    operations: list[Operation] = field(default_factory=list)
    dropped: list[Operation] = field(default_factory=list)  # blocks that could not be read
    core_memory: str | None = None
    questions: list[str] = field(default_factory=list)
    insight: str = ""
    reflection: str = ""  # the summary sections, the reflection log's full entry
    withheld: Withheld = field(default_factory=list)  # texts kept out: they read as instructions
    usage: list[PhaseUsage] = field(default_factory=list)
    cost_usd: float | None = None
    offered: list[offers.Offer] = field(default_factory=list)  # pairs to confirm shown to phase 3

    @property
    def tokens_in(self) -> int:
        return sum(u.tokens_in for u in self.usage)

    @property
    def tokens_out(self) -> int:
        return sum(u.tokens_out for u in self.usage)


class Budget:
    """A cycle's tokens, spent phase by phase (see the module docstring)."""

    def __init__(self, max_in: int, max_out: int, max_cost_usd: float | None = None) -> None:
        self.max_in, self.max_out, self.max_cost_usd = max_in, max_out, max_cost_usd
        self.spent_in = self.spent_out = 0
        self.cost = 0.0

    def allowance(self, phase: str) -> tuple[int, int]:
        """The (input, output) tokens ``phase`` may use: its share of what the phases from it on have left."""
        later = PHASES[PHASES.index(phase) :]
        share_in = SHARES[phase][0] / sum(SHARES[p][0] for p in later)
        share_out = SHARES[phase][1] / sum(SHARES[p][1] for p in later)
        return int((self.max_in - self.spent_in) * share_in), int((self.max_out - self.spent_out) * share_out)

    def spend(
        self,
        phase: str,
        counted_in: int,
        usage: Usage,
        allowed: tuple[int, int],
        model: str,
        result: PhaseResult,
    ) -> None:
        """Count one reply into the budget and into ``result`` (its usage and cost), then raise
        :class:`BudgetExceededError` if it went past the phase's output or the cycle's cost cap: a
        reply refused is still paid for, so the dream log and the daily cap count it."""
        allowed_in, allowed_out = allowed
        tokens_in = max(counted_in, usage.input_tokens)
        tokens_out = usage.output_tokens
        self.spent_in += tokens_in
        self.spent_out += tokens_out
        cost = cost_of(model, usage)
        if cost is not None:
            self.cost += cost
            result.cost_usd = round(self.cost, 6)
        result.usage.append(PhaseUsage(phase, tokens_in, tokens_out, allowed_in, allowed_out))
        if tokens_out > allowed_out:
            raise BudgetExceededError(
                f"phase {phase}: the model replied {tokens_out} tokens where {allowed_out} were asked for; "
                "the cycle stops so its output budget holds",
                budget=allowed_out,
                needed=tokens_out,
            )
        if cost is not None and self.max_cost_usd is not None and self.cost > self.max_cost_usd:
            raise BudgetExceededError(
                f"phase {phase}: the cycle cost ${self.cost:.4f}, over its cap ${self.max_cost_usd:.4f}",
                budget=self.max_cost_usd,
                needed=self.cost,
            )


class Phases:
    """Runs the five phases of one cycle with one LLM."""

    def __init__(
        self, llm: LLM, budget: Budget, count: TokenCounter, *, deadline: float | None = None
    ) -> None:
        self.llm, self.budget, self.count = llm, budget, count
        self.deadline = deadline  # time.monotonic() past which no phase starts

    async def run(self, data: CycleInput, result: PhaseResult | None = None) -> PhaseResult:
        """The five phases over ``data``; ``result`` (a new one by default) collects what they
        produce and spend as they go, so a caller still has the usage when a phase fails."""
        result = result if result is not None else PhaseResult()
        survey = await self._call("survey", _survey_fields(data), prompts.SURVEY, result)
        meta = await self._call("meta", _meta_fields(data), prompts.META, result, data=data)
        named = _named_lessons(survey, data)
        share = int(self.budget.allowance("consolidate")[0] * offers.PROMPT_SHARE)
        pairs, result.offered = offers.render(data.candidates.offers, data.by_id, self.count, share)
        reply = await self._call(
            "consolidate",
            [
                Field("survey", survey, 12_000),
                Field("meta", meta, 4_000),
                Field("pairs", pairs or "none", max(len(pairs), 10)),  # bounded by tokens already
                Field("named", named, 16_000),
            ],
            prompts.CONSOLIDATE,
            result,
        )
        # Screened as parsed, so the later phases' prompts read them redacted too.
        kept, dropped = parse_operations(reply, data)
        parsed = [screened_operation(op) for op in [*kept, *dropped]]
        kept = [op for op in parsed if op.status != "dropped"]
        result.operations, result.dropped = kept, [op for op in parsed if op.status == "dropped"]
        # A lesson screened out is not echoed to the later phases: its instructions would reach them.
        described = describe([op for op in kept if op.lesson is None or op.lesson.status != "quarantined"])
        described = described or "none"
        _, core_out = self.budget.allowance("core")
        cap = min(CORE_CAP_TOKENS, core_out)
        core = await self._call(
            "core",
            [
                Field("core_memory", data.core_memory or "(empty: write the first one)", 14_000),
                Field("pinned", _rows(data.pinned) or "none", 6_000),
                Field("operations", described, 8_000),
                Field("meta", meta, 3_000),
                Field("themes", _themes(data), 1_000),
            ],
            prompts.REWRITE_CORE,
            result,
            extra={"cap": str(cap)},
            max_out=cap,
        )
        # None when the rewrite as a whole reads as instructions: the current one stays.
        result.core_memory = screened_document(check_core(core), "core memory", result.withheld)
        diff = "\n".join(
            difflib.unified_diff(
                data.core_memory.splitlines(),
                (result.core_memory or data.core_memory).splitlines(),
                lineterm="",
                n=1,
            )
        )
        summary = await self._call(
            "summarize",
            [
                Field("operations", described, 4_000),
                Field("meta", meta, 2_000),
                Field("core_diff", diff or "no change", 4_000),
            ],
            prompts.SUMMARIZE,
            result,
        )
        result.reflection = summary.strip()
        result.insight, result.questions = read_summary(summary)
        result.cost_usd = round(self.budget.cost, 6) if self.budget.cost else None
        return result

    async def _call(
        self,
        phase: str,
        fields: list[Field],
        template: str,
        result: PhaseResult,
        *,
        data: CycleInput | None = None,
        extra: Mapping[str, str] | None = None,
        max_out: int | None = None,
    ) -> str:
        past_deadline(self.deadline, f"phase {phase}")
        allowed_in, allowed_out = self.budget.allowance(phase)
        if max_out is not None:  # the core memory has its own cap: asking for more only wastes
            allowed_out = min(allowed_out, max_out)
        values = {"max_output": str(allowed_out), **(extra or {})}
        if data is not None:
            values["reflection_count"] = str(data.reflection_number)
            values["milestone"] = f" (a milestone: {data.milestone})" if data.milestone else ""
        frame = self.count(prompts.SYSTEM) + 8  # the system message and the two messages' framing

        def render(parts: dict[str, str]) -> str:
            return template.format(**parts, **values)

        prompt = fit_fields(fields, render, allowed_in - frame, self.count)
        counted = self.count(prompt) + frame
        if counted > allowed_in:
            raise BudgetExceededError(
                f"phase {phase}: its prompt needs {counted} tokens even cut to the bone; {allowed_in} are left",
                budget=allowed_in,
                needed=counted,
            )
        messages = [Message(role="system", content=prompts.SYSTEM), Message(role="user", content=prompt)]
        completion = await self.llm.complete(messages, max_tokens=allowed_out, temperature=0.2)
        self.budget.spend(
            phase, counted, completion.usage, (allowed_in, allowed_out), completion.model, result
        )
        # The model may echo a secret it read anywhere: redacted before a later prompt or a proposal holds it.
        text = redact(completion.text).strip()
        if not text:
            raise ParseError(f"phase {phase}: the model's reply is empty", raw=completion.text)
        return text


TEMPLATES: Mapping[str, str] = {
    "survey": prompts.SURVEY,
    "meta": prompts.META,
    "consolidate": prompts.CONSOLIDATE,
    "core": prompts.REWRITE_CORE,
    "summarize": prompts.SUMMARIZE,
}


def least_tokens_in(count: TokenCounter) -> int:
    """The smallest input budget of a cycle with which every phase's prompt fits, each field cut to
    its marker, even when every phase before it spent its whole share (then a phase is left its
    share of the whole budget). Settings refuse less (``CONSOLIDATION_MIN_TOKENS_IN``)."""
    frame = count(prompts.SYSTEM) + 8
    longest = max(MILESTONES.values(), key=len)
    values = {
        "max_output": "99999",
        "cap": str(CORE_CAP_TOKENS),
        "reflection_count": "99999",
        "milestone": f" (a milestone: {longest})",
    }
    need = 0
    for phase, template in TEMPLATES.items():
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name}
        prompt = template.format(**{name: OMITTED for name in names if name not in values}, **values)
        need = max(need, math.ceil((count(prompt) + frame) / SHARES[phase][0]))
    return need


def past_deadline(deadline: float | None, what: str) -> None:
    """TimeoutError when ``deadline`` (``time.monotonic()``) has passed: the cycle stops before ``what``.
    A cycle run by a job has one, a little under the job's timeout, since its thread cannot be cancelled."""
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError(f"the cycle ran past its time limit; stopped before {what}, nothing proposed")


# ---------------------------------------------------------------------------- prompt inputs


def _row(lesson: Lesson, *parts: object) -> str:
    text = inline(lesson.content)
    cut = text if len(text) <= ROW_CHARS else text[: ROW_CHARS - 1] + "…"
    return " | ".join([lesson.id, *(str(p) for p in parts), cut])


def _rows(lessons: Sequence[Lesson]) -> str:
    return "\n".join(_row(lesson, lesson.kind) for lesson in lessons)


def episode_row(episode: Episode) -> str:
    """One episode as the survey reads it: id, outcome, agent, task, then what went wrong (its
    error, else its failed checks) and what it produced, redacted, each cut to :data:`ROW_CHARS`."""
    failed = [
        f"{check.tool} {check.status}: {check.stderr or check.exit_code}"
        for check in episode.verification
        if check.status in ("failed", "error")
    ]
    error = episode.error or "; ".join(failed)
    parts = [episode.id, episode.status, episode.agent or "-", _cut(inline(episode.task), ROW_CHARS)]
    parts.append("error: " + (_cut(inline(redact(error)), ROW_CHARS) if error else "-"))
    parts.append("output: " + (_cut(inline(redact(episode.output)), ROW_CHARS) if episode.output else "-"))
    return " | ".join(parts)


def _survey_fields(data: CycleInput) -> list[Field]:
    episodes = "\n".join(episode_row(e) for e in data.episodes)
    lessons = "\n".join(_row(lesson, lesson.kind, "active", lesson.access_count) for lesson in data.lessons)
    fading = "\n".join(_row(lesson, f"{score:.3f}", tier) for lesson, score, tier in data.fading)
    pending = "\n".join(_row(lesson, lesson.agent or "-") for lesson in data.pending)
    return [
        Field("core_memory", data.core_memory or "(empty)", 14_000),
        Field("candidates", describe_candidates(data.candidates) or "none", 12_000),
        Field("pending", pending or "none", 6_000),
        Field("episodes", episodes or "none since the last cycle", 40_000),
        Field("fading", fading or "none", 8_000),
        Field("lessons", lessons or "none", 60_000),
        Field("last_reflection", data.last_reflection or "never (first cycle: the last 7 days)", 100),
    ]


def _meta_fields(data: CycleInput) -> list[Field]:
    return [
        Field("reflection_log", data.reflection_log or "(no reflections yet)", 10_000),
        Field("evolution", data.evolution or "(empty)", 10_000),
    ]


def _themes(data: CycleInput) -> str:
    seen: dict[str, int] = {}
    themes = [[e.task_type, *e.tags] for e in data.episodes] + [[x.task_type, *x.tags] for x in data.lessons]
    for theme in (t for row in themes for t in row):
        if theme:
            seen[theme] = seen.get(theme, 0) + 1
    ranked = sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))[:30]
    return ", ".join(f"{name} ({n})" for name, n in ranked) or "none"


def describe_candidates(candidates: Candidates) -> str:
    lines = [f"near duplicates: {', '.join(cluster)}" for cluster in candidates.clusters]
    lines += [f"contradiction: {a} vs {b}" for a, b in candidates.contradictions]
    lines += [f"archive (decay below 0.05): {i} ({score:.3f})" for i, score in candidates.archive]
    lines += [f"rule due for promotion to strategic: {i}" for i in candidates.promotions]
    if candidates.offers:
        lines.append(f"pairs to confirm in the consolidation step: {len(candidates.offers)}")
    return "\n".join(lines)


def _named_lessons(survey: str, data: CycleInput) -> str:
    """The lessons the survey plan names, and the candidates', so phase 3 can word its operations."""
    ids = list(dict.fromkeys([*re.findall(r"\bles_[0-9a-z]+\b", survey), *_candidate_ids(data.candidates)]))
    return "\n".join(_row(data.by_id[i], data.by_id[i].kind) for i in ids if i in data.by_id) or "none"


def _candidate_ids(candidates: Candidates) -> list[str]:
    ids = [i for cluster in candidates.clusters for i in cluster]
    ids += [i for pair in candidates.contradictions for i in pair]
    return ids


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------- replies


def parse_operations(reply: str, data: CycleInput) -> tuple[list[Operation], list[Operation]]:
    """Phase 3's operation blocks as operations: (read, unreadable as dropped with a note).

    ParseError when the reply holds no block at all and is not ``NONE``."""
    if reply.strip().strip(".").upper() == "NONE":
        return [], []
    blocks = _blocks(reply)
    if not blocks:
        raise ParseError(
            "phase consolidate: the reply has no operation block (---, OPERATION: ..., ---) and is not NONE",
            raw=reply,
        )
    kept: list[Operation] = []
    dropped: list[Operation] = []
    for block in blocks:
        try:
            kept.append(_operation(block, data))
        except ValueError as exc:
            kind = block.get("operation", "").strip().lower()
            dropped.append(
                Operation(
                    kind="evolve",
                    text=_cut(" ".join(f"{k}: {v}" for k, v in block.items()), 500),
                    status="dropped",
                    note=f"unreadable {kind or 'operation'}: {exc}",
                )
            )
    return kept, dropped


def _blocks(reply: str) -> list[dict[str, str]]:
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    key: str | None = None
    for line in [*reply.splitlines(), "---"]:
        if line.strip() == "---" or line.strip().startswith("```"):
            if "operation" in current:
                blocks.append({k: v.strip() for k, v in current.items()})
            current, key = {}, None
            continue
        match = _BLOCK_KEY.match(line)
        if match:
            key = match.group(1).lower()
            if key == "operation" and "operation" in current:  # a block without its closing ---
                blocks.append({k: v.strip() for k, v in current.items()})
                current = {}
            current[key] = match.group(2)
        elif key is not None:
            current[key] += "\n" + line
    return blocks


def _operation(block: Mapping[str, str], data: CycleInput) -> Operation:
    kind = block.get("operation", "").strip().lower()
    target = block.get("target", "").strip()
    content = block.get("content", "").strip()
    reason = " ".join(
        part for part in (block.get("reason", ""), block.get("evolution_context", "")) if part.strip()
    )
    reason = _cut(inline(reason), 1_000)
    ids = [] if target.lower() in ("", "none", "-", "n/a") else _ids(target)
    lessons = [i for i in ids if i.startswith("les_") or i in data.by_id]
    episodes = [i for i in ids if i.startswith("ep_")]
    if kind in ("extract", "pattern"):
        lesson = _new_lesson(kind, content, lessons, episodes, data)
        return Operation(kind=cast(OperationKind, kind), lesson_ids=lessons, lesson=lesson, reason=reason)
    if kind == "merge":
        sources = [data.by_id[i] for i in lessons if i in data.by_id]
        if len(sources) < 2:
            raise ValueError(f"a merge names two lessons of the bank, got {target!r}")
        merged = merged_lesson(sources, data.now)
        if content:
            merged = merged.model_copy(update={"content": _lesson_text(content)})
        return Operation(
            kind="merge", lesson_ids=merged.metadata["merged_from"], lesson=merged, reason=reason
        )
    if kind == "connect":
        link = next((word for word in re.split(r"[\s,>|-]+", target.lower()) if word in LINKS), "related")
        return Operation(
            kind="connect", lesson_ids=lessons[:2], link=cast(LinkType, link), reason=reason or content
        )
    if kind == "flag":
        return Operation(kind="flag", lesson_ids=lessons, reason=reason or _cut(inline(content), 1_000))
    if kind in ("archive", "admit"):
        return Operation(
            kind=cast(OperationKind, kind),
            lesson_ids=lessons[:1] if lessons else [target],
            reason=reason or content,
        )
    if kind == "evolve":
        return Operation(kind="evolve", text=_cut(content, 2_000), reason=reason)
    raise ValueError(f"unknown operation {kind!r}")


def _ids(target: str) -> list[str]:
    return [word for word in re.split(r"[\s,;]+|->", target) if word and word.lower() not in LINKS]


def _new_lesson(kind: str, content: str, lessons: list[str], episodes: list[str], data: CycleInput) -> Lesson:
    if not content:
        raise ValueError(f"{kind} has no CONTENT")
    metadata: dict[str, Any] = {"from_episodes": episodes} if episodes else {}
    if kind == "pattern":
        steps = [line.strip(" -*\t") for line in content.splitlines() if line.strip(" -*\t")]
        metadata["steps"] = [re.sub(r"^\d+[.)]\s*", "", step) for step in steps]
    return Lesson(
        namespace=data.namespace,
        kind="procedure" if kind == "pattern" else "lesson",
        content=_lesson_text(content),
        source="consolidation",
        episode_id=episodes[0] if episodes else None,
        metadata=metadata,
        created_at=data.now,
        updated_at=data.now,
    )


def _lesson_text(content: str) -> str:
    return content.strip()[:LESSON_MAX_CHARS]


def describe(operations: Sequence[Operation]) -> str:
    """Operations as lines for the later phases' prompts."""
    lines = []
    for op in operations:
        what = op.lesson.content if op.lesson is not None else (op.text or "")
        ends = ", ".join(op.lesson_ids)
        link = f" ({op.link})" if op.link else ""
        lines.append(_cut(inline(f"{op.kind.upper()}{link} [{ends}] {what} (why: {op.reason})"), 400))
    return "\n".join(lines)


def check_core(reply: str) -> str:
    """Phase 4's reply as a core memory document: its four sections, or ParseError."""
    text = reply.strip()
    if text.startswith("```"):
        text = "\n".join(line for line in text.splitlines() if not line.strip().startswith("```"))
    sections = core_sections(text)
    missing = [name for name in CORE_SECTIONS if name not in sections]
    if missing:
        raise ParseError(
            f"phase core: the core memory lacks the section(s) {', '.join(missing)} "
            f"(it needs ## {', ## '.join(CORE_SECTIONS)})",
            raw=reply,
        )
    return "\n\n".join(f"## {name}\n{sections[name]}".rstrip() for name in CORE_SECTIONS) + "\n"


def read_summary(summary: str) -> tuple[str, list[str]]:
    """(key insight, questions) of phase 5's sections; missing ones are empty, not an error."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in summary.splitlines():
        if line.lstrip().startswith("#"):
            current = sections.setdefault(line.strip("# ").lower(), [])
        elif current is not None:
            current.append(line)
    insight = next((" ".join(v).strip() for k, v in sections.items() if "insight" in k), "")
    asked = next((v for k, v in sections.items() if "question" in k), [])
    questions = [line.strip(" -*\t") for line in asked if line.strip(" -*\t")]
    questions = [q for q in questions if q.lower().rstrip(".") != "none"][:10]
    return _cut(inline(insight), 300), [_cut(inline(q), 500) for q in questions]
