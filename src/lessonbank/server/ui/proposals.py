"""The proposal pages: the list, and one proposal as a readable diff with its decision forms.

A pending proposal is one form: a checkbox per operation (approve some), a text area for each text
an operation would write and for the core memory rewrite (approve with changes), a FLAG's decision
(keep A, keep B, both with the scope and text each keeps, dismiss, or none: see
:mod:`lessonbank.services.consolidation.flags`), and two buttons (approve all, approve the ticked
ones); reject and revert are forms of their own. Pure functions: markup out, every value escaped.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from lessonbank.models import Lesson
from lessonbank.proposals import Operation, Proposal
from lessonbank.server.ui.html import (
    attr,
    badge,
    button,
    clip,
    esc,
    hidden,
    link,
    pairs,
    post_form,
    render_markdown,
    segment,
    table,
    when,
)
from lessonbank.server.ui.views import lesson_link
from lessonbank.services.consolidation.edits import CORE_ID as CORE
from lessonbank.services.consolidation.edits import EDITABLE
from lessonbank.services.consolidation.flags import SIDES, decision_text
from lessonbank.services.consolidation.operations import SCOPE_FIELDS


def proposals(ns: str, listed: Sequence[Proposal]) -> str:
    tones = {
        "pending": "warn",
        "applied": "good",
        "partially_applied": "good",
        "rejected": "muted",
        "reverted": "muted",
        "failed": "bad",
    }
    return table(
        ["proposal", "status", "created", "operations", "summary"],
        (
            [
                link(f"/proposals/{segment(p.id)}", ns, p.id),
                badge(p.status, tones.get(p.status, "")),
                when(p.created_at),
                esc(sum(op.status != "dropped" for op in p.operations)),
                esc(clip(p.summary, 160)),
            ]
            for p in listed
        ),
        empty="No proposal yet: a consolidation cycle writes one for you to review.",
    )


def _original(op: Operation) -> str | None:
    """What approve-with-changes may rewrite in ``op`` (None: it writes no text)."""
    if op.kind not in EDITABLE:
        return None
    return op.lesson.content if op.lesson is not None else (op.text or "")


def proposal_detail(
    ns: str, csrf: str, proposal: Proposal, rendered: str, lessons: Mapping[str, Lesson], current_core: str
) -> str:
    pending = proposal.status == "pending"
    facts = pairs(
        {
            "status": badge(proposal.status, "warn" if pending else ""),
            "trigger": esc(proposal.trigger),
            "created": when(proposal.created_at),
            "decided": esc(f"{proposal.decided_by or '—'} {proposal.decision_reason or ''}")
            + " "
            + when(proposal.decided_at),
            "spend": esc(
                f"{proposal.tokens_in} in · {proposal.tokens_out} out · ${float(proposal.cost_usd or 0):.4f}"
            ),
            "summary": f'<span class="text">{esc(proposal.summary)}</span>',
        }
    )
    cards = [_operation(ns, op, lessons, pending) for op in proposal.operations]
    if proposal.core_memory is not None:
        cards.append(_core(proposal.core_memory, current_core, pending))
    questions = "".join(f"<li>{esc(q)}</li>" for q in proposal.questions)
    decide = ""
    if pending:
        decide = (
            '<div class="actions">'
            + button("Approve all", name="decision", value="approve", tone="good")
            + button("Approve selected", name="decision", value="partial")
            + '<span class="muted">Edited text is applied either way.</span></div>'
        )
    form = (
        f'<form method="post" action="/proposals/{esc(segment(proposal.id))}/approve">'
        f"{hidden('csrf', csrf)}{hidden('ns', ns)}{''.join(cards)}{decide}</form>"
    )
    others = []
    if pending:
        others.append(
            post_form(
                f"/proposals/{segment(proposal.id)}/reject",
                ns,
                csrf,
                '<input name="reason" placeholder="why (optional)" maxlength="500"> '
                + button("Reject", tone="danger"),
            )
        )
    if proposal.status in ("applied", "partially_applied"):
        others.append(
            post_form(f"/proposals/{segment(proposal.id)}/revert", ns, csrf, button("Revert", tone="danger"))
        )
    return (
        f'<div class="card">{facts}</div>'
        + (f"<h2>Questions for you</h2><ul>{questions}</ul>" if questions else "")
        + "<h2>Operations</h2>"
        + form
        + (f'<div class="actions">{"".join(others)}</div>' if others else "")
        + f"<h2>As the pending reflection reads</h2>{render_markdown(rendered)}"
    )


def _operation(ns: str, op: Operation, lessons: Mapping[str, Lesson], pending: bool) -> str:
    live = op.status != "dropped"
    pick = (
        f'<label><input type="checkbox" name="only" value={attr(op.id)} checked> apply</label>'
        if pending and live
        else ""
    )
    if op.kind == "flag" and pending and live:  # decided below; no decision changes nothing
        pick = hidden("only", op.id)
    head = f'<div class="head">{pick}{badge(op.kind.upper())}{badge(op.status, "muted")}<code>{esc(op.id)}</code>'
    head += (
        (f"{badge(op.link)}" if op.link else "")
        + (f'<span class="muted">score {op.score:.3f}</span>' if op.score is not None else "")
        + "</div>"
    )
    gone = "del" if op.kind in ("merge", "archive") else ""  # superseded or archived once applied
    touched = "".join(
        f'<li class="{gone}">{lesson_link(ns, lesson_id, lesson_id)} {esc(clip(lessons[lesson_id].content, 160)) if lesson_id in lessons else "(unknown lesson)"}</li>'
        for lesson_id in op.lesson_ids
    )
    body = f'<ul class="diff">{touched}</ul>' if touched else ""
    original = _original(op)
    if original is not None:
        if pending and live:
            body += f'<textarea name={attr("edit:" + op.id)} maxlength="20000">{esc(original)}</textarea>'
        else:
            body += f'<pre class="diff"><span class="add">{esc(original)}</span></pre>'
    if op.kind == "flag" and live and len(op.lesson_ids) == 2:
        body += _flag_decision(op, lessons) if pending else _flag_decided(op)
    reason = f'<p class="muted">why: {esc(op.reason)}</p>' if op.reason.strip() else ""
    note = f'<p class="muted">note: {esc(op.note)}</p>' if op.note else ""
    return f'<div class="card op {esc(op.kind)}">{head}{body}{reason}{note}</div>'


def _core(proposed: str, current: str, pending: bool) -> str:
    lines = difflib.unified_diff(
        current.splitlines(), proposed.splitlines(), "core memory now", "proposed", lineterm="", n=2
    )
    diff = "".join(
        f'<span class="{"add" if line.startswith("+") else "del" if line.startswith("-") else ""}">{esc(line) or " "}</span>'
        for line in lines
    )
    pick = (
        f'<label><input type="checkbox" name="only" value="{CORE}" checked> apply</label>' if pending else ""
    )
    edit = (
        f'<h2>Edit the rewrite</h2><textarea name="edit:{CORE}" class="core" maxlength="40000">{esc(proposed)}</textarea>'
        if pending
        else ""
    )
    return f'<div class="card op evolve"><div class="head">{pick}{badge("CORE MEMORY")}</div><pre class="diff">{diff or "(no change)"}</pre>{edit}</div>'


def original_texts(proposal: Proposal) -> dict[str, str]:
    """The editable texts of ``proposal`` by operation id (and ``core``), to tell edits apart."""
    found = {op.id: text for op in proposal.operations if (text := _original(op)) is not None}
    if proposal.core_memory is not None:
        found[CORE] = proposal.core_memory
    return found


FLAG_CHOICES = (
    ("", "No decision: nothing changes"),
    ("keep-a", "Keep A, archive B"),
    ("keep-b", "Keep B, archive A"),
    ("both", "Keep both, each with the narrower scope and text below"),
    ("dismiss", "Dismiss: they do not contradict (not proposed again)"),
)


def _flag_decision(op: Operation, lessons: Mapping[str, Lesson]) -> str:
    """A flag's choices, and each lesson's text and scope to narrow for "both"."""
    name = f"flag:{op.id}"
    a, b = op.lesson_ids
    choices = "".join(
        f'<div><label class="choice"><input type="radio" name={attr(name)} value={attr(value)}'
        f"{' checked' if not value else ''}> {esc(label.replace('A', f'A ({a})', 1).replace('B', f'B ({b})', 1) if value.startswith('keep-') else label)}</label></div>"
        for value, label in FLAG_CHOICES
    )
    sides = []
    for side, lesson_id in zip(SIDES, op.lesson_ids, strict=False):
        lesson = lessons.get(lesson_id)
        text = lesson.content if lesson is not None else ""
        scope = "".join(
            f"<label>{esc(field.replace('_', ' '))} <input name={attr(f'{name}:{side}.{field}')} "
            f"value={attr(getattr(lesson, field) or '' if lesson is not None else '')} "
            f'placeholder="every" maxlength="200"></label>'
            for field in SCOPE_FIELDS
        )
        sides.append(
            f'<div class="flag-side"><strong>{side.upper()}</strong> <code>{esc(lesson_id)}</code>'
            f'<textarea name={attr(f"{name}:{side}.text")} maxlength="20000">{esc(text)}</textarea>'
            f"{scope}</div>"
        )
    return f'<fieldset class="flag-decision"><legend>Decide</legend>{choices}{"".join(sides)}</fieldset>'


def _flag_decided(op: Operation) -> str:
    a, b = op.lesson_ids
    said = {
        None: "no decision: nothing changed",
        "keep-a": f"kept {a}, archived {b}",
        "keep-b": f"kept {b}, archived {a}",
        "both": "kept both, narrowed",
        "dismiss": "dismissed: not a contradiction",
    }
    return f'<p class="muted">decision: {esc(said.get(op.decision, op.decision or ""))}</p>'


def flag_edits(proposal: Proposal, form: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """The flags' decisions a proposal form sends, as their edits (in the proposal's edit format)."""
    edits: dict[str, str] = {}
    for op in proposal.operations:
        name = f"flag:{op.id}"
        decision = (form.get(name) or [""])[0].strip()
        if op.kind != "flag" or op.status == "dropped" or not decision:
            continue
        fields: dict[str, str] = {}
        if decision == "both":
            for side in SIDES:
                for field in ("text", *SCOPE_FIELDS):
                    values = form.get(f"{name}:{side}.{field}")
                    if values:
                        fields[f"{side}.{field}"] = values[0]
        edits[op.id] = decision_text(decision, fields)
    return edits
