"""A proposal as seed 002's pending reflection: the Markdown a person reads before approving it.

Seed 002's sections, adapted to lessons: new knowledge (extract, merge, pattern), new connections,
proposed archival with scores, contradictions, core memory changes as a unified diff, evolution,
questions, what the screens withheld (:mod:`.screens`), and a footer (tokens used, memories
processed, next scheduled cycle). Each operation is shown with its id, so a person can approve some of them by id, its kind, the lessons it touches
(id and first line) and its reason.

Everything written by a model or a caller (lesson text, ids, reasons, questions, evolution
entries) is untrusted: it is folded onto one line after a fixed prefix
(:func:`lessonbank.services.sections.inline`), so it cannot open a heading or a list item, and a
``<`` that would open a tag is escaped, so it cannot open an HTML comment that hides the operations
after it. The core memory diff sits in a fence longer than any run of backticks in it. A pure
function: no I/O.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence

from lessonbank.models import Lesson
from lessonbank.proposals import Operation, Proposal
from lessonbank.services.consolidation.decay import days_idle
from lessonbank.services.sections import inline

SNIPPET_CHARS = 120
NONE = "- none"
FOOTER_HINT = (
    "> Reply with `approve`, `approve with changes`, `reject`, or `partial approve` "
    "with the operation ids to apply."
)
_BACKTICKS = re.compile(r"`+")
_HTML_OPEN = re.compile(r"<(?=[A-Za-z/!?])")  # what opens a tag or a comment in Markdown


def render_pending(
    proposal: Proposal,
    lessons_by_id: Mapping[str, Lesson],
    *,
    next_cycle: str | None,
    current_core: str | None = None,
) -> str:
    """The pending-reflection Markdown of ``proposal``; ``lessons_by_id`` gives the text of the
    lessons its operations name, ``current_core`` the core memory it would replace."""
    proposed = [op for op in proposal.operations if op.status != "dropped"]
    title = f"# Reflection Summary — {proposal.created_at:%Y-%m-%d} ({_text(proposal.namespace)})"
    parts = [title]
    if proposal.status != "pending":
        parts.append(_decision(proposal))
    if proposal.summary.strip():
        parts.append(_text(proposal.summary))
    parts += [
        _section(
            "🧠 New Knowledge Extracted",
            [_new(op, lessons_by_id) for op in _of(proposed, "extract", "merge", "pattern")],
        ),
        _section("🔗 New Connections", [_connect(op, lessons_by_id) for op in _of(proposed, "connect")]),
        _section(
            "📦 Proposed Archival (decay score < 0.05)",
            [_archive(op, lessons_by_id, proposal) for op in _of(proposed, "archive")],
        ),
        _section("⚠️ Contradictions Detected", [_flag(op, lessons_by_id) for op in _of(proposed, "flag")]),
        "## ✏️ Core Memory Changes\n" + _core_diff(current_core, proposal.core_memory),
        _section(
            "🌱 Philosophical Evolution",
            [_evolve(op) for op in _of(proposed, "evolve")] + _reflection(proposal),
        ),
        _section("❓ Questions for You", [f"- {_text(question)}" for question in proposal.questions]),
    ]
    withheld = proposal.metadata.get("withheld")
    if isinstance(withheld, list) and withheld:
        parts.append(_section("🛡️ Withheld by the Screen", [_withheld(entry) for entry in withheld]))
    dropped = [op for op in proposal.operations if op.status == "dropped"]
    if dropped:
        parts.append(
            _section(
                "Dropped by Validation",
                [f"- [{_text(op.id)}] {op.kind}: {_text(op.note or '')}" for op in dropped],
            )
        )
    parts.append(_footer(proposal, len(proposed), next_cycle))
    return "\n\n".join(parts) + "\n"


def _of(operations: Sequence[Operation], *kinds: str) -> list[Operation]:
    return [op for op in operations if op.kind in kinds]


def _text(value: object) -> str:
    """Untrusted text on one line, a ``<`` that would open a tag or comment escaped."""
    return _HTML_OPEN.sub("\\\\<", inline(value))


def snippet(text: str) -> str:
    """The first line of a lesson's text, on one line and cut to :data:`SNIPPET_CHARS`."""
    lines = text.strip().splitlines()
    first = _text(lines[0] if lines else "")
    return first if len(first) <= SNIPPET_CHARS else first[: SNIPPET_CHARS - 1].rstrip() + "…"


def _section(heading: str, items: Sequence[str]) -> str:
    return f"## {heading}\n" + ("\n".join(items) if items else NONE)


def _head(op: Operation) -> str:
    """An operation's id and kind; once decided, whether it was applied or rejected."""
    decided = f" ({op.status})" if op.status in ("applied", "rejected") else ""
    return f"- [{_text(op.id)}] {op.kind}{decided}"


def _decision(proposal: Proposal) -> str:
    """A decided proposal's status line: who decided, when, why."""
    status = proposal.status.replace("_", " ")
    by = f" by {_text(proposal.decided_by)}" if proposal.decided_by else ""
    when = f" on {proposal.decided_at:%Y-%m-%d %H:%M}" if proposal.decided_at is not None else ""
    why = f": {_text(proposal.decision_reason)}" if proposal.decision_reason else ""
    core = ""
    if proposal.core_memory is not None and proposal.status in ("applied", "partially_applied"):
        core = "; core memory rewrite " + ("applied" if proposal.metadata.get("core_applied") else "rejected")
    return f"**Status**: {status}{by}{when}{why}{core}. Nothing here is open for approval."


def _named(lesson_id: str, lessons_by_id: Mapping[str, Lesson], label: str = "") -> str:
    lesson = lessons_by_id.get(lesson_id)
    text = snippet(lesson.content) if lesson is not None else "(unknown lesson)"
    return f"  - {label}{_text(lesson_id)}: {text}"


def _why(op: Operation) -> list[str]:
    """The reason, and the note (what the screen found, who edited it) of an operation not dropped."""
    lines = [f"  - why: {_text(op.reason)}"] if op.reason.strip() else []
    return lines + ([f"  - note: {_text(op.note)}"] if op.note else [])


def _new(op: Operation, lessons_by_id: Mapping[str, Lesson]) -> str:
    content = snippet(op.lesson.content) if op.lesson is not None else ""
    label = "supersedes " if op.kind == "merge" else "from "
    lines = [f"{_head(op)}: {content}"]
    lines += [_named(lesson_id, lessons_by_id, label) for lesson_id in op.lesson_ids]
    return "\n".join(lines + _why(op))


def _connect(op: Operation, lessons_by_id: Mapping[str, Lesson]) -> str:
    ends = [_text(i) for i in op.lesson_ids]
    line = f"{_head(op)}: {' → '.join([ends[0], op.link or 'related', *ends[1:]])} (NEW)"
    return "\n".join([line, *(_named(i, lessons_by_id) for i in op.lesson_ids), *_why(op)])


def _archive(op: Operation, lessons_by_id: Mapping[str, Lesson], proposal: Proposal) -> str:
    lesson_id = op.lesson_ids[0] if op.lesson_ids else ""
    lesson = lessons_by_id.get(lesson_id)
    score = f"score: {op.score:.3f}" if op.score is not None else "score: ?"
    if lesson is None:
        return "\n".join([f"{_head(op)} {_text(lesson_id)}: (unknown lesson) ({score})", *_why(op)])
    idle = days_idle(lesson, proposal.created_at)
    used = "last accessed" if lesson.last_accessed is not None else "never accessed, written"
    line = f"{_head(op)} {_text(lesson_id)}: {snippet(lesson.content)} ({score}, {used} {idle:.0f} days ago)"
    return "\n".join([line, *_why(op)])


def _flag(op: Operation, lessons_by_id: Mapping[str, Lesson]) -> str:
    line = f"{_head(op)}: {' ↔ '.join(_text(i) for i in op.lesson_ids)}"
    return "\n".join([line, *(_named(i, lessons_by_id) for i in op.lesson_ids), *_why(op), _decision_of(op)])


def _decision_of(op: Operation) -> str:
    """What a person chose for a flag, or, while it is open, the choices and what each does."""
    ids = [_text(i) for i in op.lesson_ids]
    if op.decision is None:
        if op.status != "proposed":
            return "  - decision: none (nothing changed)"
        a, b = [*ids, "A", "B"][:2]
        return (
            f"  - decide: keep-a (keep {a}, archive {b}) | keep-b (keep {b}, archive {a}) | "
            "both (each with a narrower scope) | dismiss (not a contradiction); approved as is, nothing changes"
        )
    done = {
        "keep-a": f"kept {ids[0]}, archived {ids[-1]}",
        "keep-b": f"kept {ids[-1]}, archived {ids[0]}",
        "both": "kept both, narrowed",
        "dismiss": "not a contradiction",
    }[op.decision]
    return f"  - decision: {op.decision}: {done}"


def _evolve(op: Operation) -> str:
    return "\n".join([f"{_head(op)}: {_text(op.text or '')}", *_why(op)])


def _withheld(entry: object) -> str:
    """One text kept out of the proposal's writes: where, why (withheld: <reason>), and what it said."""
    found = entry if isinstance(entry, dict) else {}
    where, reason = _text(found.get("where", "?")), _text(found.get("reason", "?"))
    return f"- {where} (withheld: {reason}): {snippet(str(found.get('text', '')))}"


def _reflection(proposal: Proposal) -> list[str]:
    """Phase 5's sections (the model's words, each line folded and quoted)."""
    text = str(proposal.metadata.get("reflection") or "")
    lines = [_text(line.strip("# ")) for line in text.splitlines() if line.strip()]
    return [f"> {line}" for line in lines if line][:60]


def _core_diff(current: str | None, proposed: str | None) -> str:
    """The unified diff from the current core memory to the proposed one, fenced; or a line saying
    there is none."""
    if proposed is None or proposed == (current or ""):
        return "- no change"
    diff = difflib.unified_diff(
        (current or "").splitlines(), proposed.splitlines(), "core (current)", "core (proposed)", lineterm=""
    )
    body = "\n".join(diff)
    fence = "`" * max(3, 1 + max((len(run) for run in _BACKTICKS.findall(body)), default=0))
    return f"{fence}diff\n{body}\n{fence}"


def _footer(proposal: Proposal, operations: int, next_cycle: str | None) -> str:
    cost = f" (${proposal.cost_usd:.4f})" if proposal.cost_usd is not None else ""
    number = proposal.metadata.get("reflection_number")
    episodes = proposal.metadata.get("episodes")
    lines = [
        "---",
        *([f"**Reflection #**: {number}"] if number is not None else []),
        f"**Proposal**: {_text(proposal.id)} (cycle {_text(proposal.cycle_id)}, trigger {proposal.trigger})",
        f"**Operations**: {operations}",
        f"**Tokens used**: {proposal.tokens_in} in / {proposal.tokens_out} out{cost}",
        f"**Memories processed**: {proposal.items_processed}"
        + (f" ({episodes} new episodes)" if episodes is not None else ""),
        *(["**Reflections reviewed**: last 5 entries"] if "phases" in proposal.metadata else []),
        f"**Next scheduled cycle**: {_text(next_cycle) if next_cycle else 'none scheduled'}",
        *(["", FOOTER_HINT] if proposal.status == "pending" else []),
    ]
    return "\n".join(lines)
