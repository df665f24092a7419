"""The body of each dashboard page but the proposals' (:mod:`.proposals`), from a bank's records. Pure functions: no I/O, markup out.

Every value from a record goes through :func:`~.html.esc` (directly or via the helpers of
:mod:`.html`): lessons, reasons, errors and ids were written by agents, models or people.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_args

from lessonbank.models import LESSON_KINDS, LESSON_STATUSES, Decision, Episode, Hit, Job, Lesson
from lessonbank.proposals import DreamRun
from lessonbank.retrieval.scoring import utility
from lessonbank.server.ui.html import (
    attr,
    badge,
    button,
    clip,
    esc,
    hidden,
    href,
    link,
    options,
    pairs,
    post_form,
    segment,
    table,
    when,
)
from lessonbank.services.consolidation.decay import Tier
from lessonbank.services.context import Considered

# The records' own vocabularies, in the order the filters list them.
KINDS = LESSON_KINDS
STATUSES = LESSON_STATUSES
TIERS: tuple[str, ...] = get_args(Tier)
STATUS_TONES = {  # of lessons, reflections and episodes (their outcome)
    "active": "good",
    "quarantined": "bad",
    "pending": "warn",
    "archived": "muted",
    "success": "good",
    "failure": "bad",
    "partial": "warn",
}
TIER_TONES = {"active": "good", "fading": "warn", "dormant": "muted", "archive": "bad"}


@dataclass
class Decayed:
    """A lesson's decay score and tier now (seed 002)."""

    score: float
    tier: str


def lesson_link(ns: str, lesson_id: str, text: object | None = None) -> str:
    return link(f"/lessons/{segment(lesson_id)}", ns, lesson_id if text is None else text)


def outcome(lesson: Lesson) -> str:
    """Helpful and harmful outcomes and the utility recall weighs them into."""
    share = utility(lesson.helpful, lesson.harmful)
    tone = "good" if share > 0.5 else ("bad" if share < 0.5 else "muted")
    return f'{badge(f"+{lesson.helpful} / −{lesson.harmful}", tone)}<span class="muted">{share:.2f}</span>'


def tier_badge(decayed: Decayed) -> str:
    return badge(f"{decayed.tier} {decayed.score:.2f}", TIER_TONES.get(decayed.tier, ""))


def status_badge(status: str) -> str:
    tone = STATUS_TONES.get(status, "")
    return badge(status, tone)


# ---------------------------------------------------------------------- overview


def overview(
    ns: str, stats: Mapping[str, Any], charts: Sequence[str], pending: int, cycles: Sequence[DreamRun]
) -> str:
    """Cards that link to what they count, the charts, and the spend: one row per reflector (a
    reflection is one episode reflected on; it may take more than one LLM call) and one for the
    consolidation cycles, so the cards' totals are the table's."""
    by_status = stats.get("lessons_by_status", {})
    reflectors = stats.get("by_reflector", {})
    numbers = [
        ("active lessons", by_status.get("active", 0), "/lessons", {}),
        ("proposals pending review", pending, "/proposals", {}),
        ("quarantined lessons", by_status.get("quarantined", 0), "/lessons", {"status": "quarantined"}),
        ("episodes", stats.get("episodes", 0), "/episodes", {}),
        ("reflections on episodes", sum(stats.get("reflections", {}).values()), "/episodes", {}),
        ("LLM calls of reflections", stats.get("llm_calls", 0), "#spend", {}),
        ("reflection cost", f"${float(stats.get('cost_usd') or 0.0):.4f}", "#spend", {}),
        ("dead jobs", stats.get("jobs", {}).get("dead", 0), "/jobs", {"status": "dead"}),
    ]
    cards = "".join(
        f'<a class="card" href={attr(target) if target.startswith("#") else href(target, ns, **params)}>'
        f'<span class="n">{esc(value)}</span><span class="l">{esc(label)}</span></a>'
        for label, value, target, params in numbers
    )
    rows = [
        [
            esc(name),
            esc(int(row.get("reflections", 0))),
            esc(int(row.get("calls", 0))),
            esc(int(row.get("tokens_in", 0))),
            esc(int(row.get("tokens_out", 0))),
            esc(f"${float(row.get('cost_usd', 0.0)):.4f}"),
        ]
        for name, row in sorted(reflectors.items())
    ]
    if cycles:
        rows.append(
            [
                link("/proposals", ns, "consolidation cycles"),
                esc(len(cycles)),
                '<span class="muted">—</span>',
                esc(sum(run.tokens_in for run in cycles)),
                esc(sum(run.tokens_out for run in cycles)),
                esc(f"${sum(run.cost_usd or 0.0 for run in cycles):.4f}"),
            ]
        )
    spend = table(
        ["reflector", "runs", "LLM calls", "tokens in", "tokens out", "cost"],
        rows,
        empty="No reflection has run yet.",
    )
    return (
        f'<div class="cards">{cards}</div><h2>Learning</h2><div class="charts">{"".join(charts)}</div>'
        f'<h2 id="spend">Spend</h2>{spend}'
        '<p class="muted">Runs: reflections on episodes, or consolidation cycles. Cost counts models '
        f"with a known price. Model: {esc(stats.get('llm') or 'none configured')}</p>"
    )


# ---------------------------------------------------------------------- lessons


def lesson_filters(ns: str, q: str, kind: str, tag: str, status: str, tier: str) -> str:
    return (
        '<form method="get" action="/lessons" class="filters">'
        f"{hidden('ns', ns)}"
        f'<label>search (recall)<input name="q" value={attr(q)} maxlength="2000" '
        'placeholder="a task, as an agent would ask"></label>'
        f'<label>kind<select name="kind">{options(KINDS, kind)}</select></label>'
        f'<label>tag<input name="tag" value={attr(tag)} maxlength="100"></label>'
        f'<label>status<select name="status">{options(STATUSES, status, blank="active")}</select></label>'
        f'<label>tier<select name="tier">{options(TIERS, tier)}</select></label>'
        f"{button('Filter')}</form>"
    )


def lesson_rows(
    ns: str, lessons: Sequence[Lesson], decay: Mapping[str, Decayed], hits: Sequence[Hit] = ()
) -> str:
    scored = {hit.lesson.id: hit for hit in hits}
    headers = ["lesson", "kind", "status", "tier", "outcomes · utility", "used", "links"]
    if hits:
        headers.insert(1, "score (lexical · vector · prior · utility)")
    rows = []
    for lesson in lessons:
        links = lesson.metadata.get("links") or []
        chain = []
        if lesson.superseded_by:
            chain.append(badge("superseded", "muted"))
        if lesson.supersedes:
            chain.append(badge("supersedes", ""))
        if lesson.pinned:
            chain.append(badge("pinned", "good"))
        tags = " ".join(badge(tag, "muted") for tag in lesson.tags[:5])
        row = [
            f'<div class="text">{lesson_link(ns, lesson.id, clip(lesson.content))}</div>{"".join(chain)}{tags}',
            badge(lesson.kind),
            status_badge(lesson.status),
            tier_badge(decay[lesson.id]),
            outcome(lesson),
            esc(lesson.access_count),
            esc(len(links)) if links else '<span class="muted">—</span>',
        ]
        hit = scored.get(lesson.id)
        if hits:
            parts = (
                f'<b>{hit.score:.3f}</b> <span class="muted">{hit.lexical:.2f} · {hit.vector:.2f} · '
                f"{hit.temporal:.2f} · {hit.utility:.2f}</span>"
                if hit
                else ""
            )
            row.insert(1, parts)
        rows.append(row)
    return table(headers, rows, empty="No lesson matches.")


def lesson_detail(
    ns: str,
    csrf: str,
    lesson: Lesson,
    decayed: Decayed,
    chain: Sequence[Lesson],
    linked: Mapping[str, Lesson],
    audit: Sequence[Any],
) -> str:
    fields: dict[str, str] = {
        "id": esc(lesson.id),
        "kind": badge(lesson.kind),
        "status": status_badge(lesson.status),
        "decay": tier_badge(decayed)
        + ('<span class="muted"> pinned: never decays</span>' if lesson.pinned else ""),
        "outcomes · utility": outcome(lesson),
        "used": f"{esc(lesson.access_count)} times, last {when(lesson.last_accessed)}",
        "importance · confidence": esc(f"{lesson.importance:.2f} · {lesson.confidence:.2f}"),
        "tags": " ".join(badge(tag, "muted") for tag in lesson.tags) or "—",
        "scope": esc(
            " · ".join(
                f"{k} {v}"
                for k, v in (
                    ("task type", lesson.task_type),
                    ("agent", lesson.agent),
                    ("goal", lesson.goal_id),
                )
                if v
            )
            or "namespace-wide"
        ),
        "source": esc(f"{lesson.source}" + (f", trigger {lesson.trigger}" if lesson.trigger else "")),
        "learned from": provenance(ns, lesson),
        **({"merged from": merged_from(ns, lesson)} if lesson.metadata.get("merged_from") else {}),
        "created": when(lesson.created_at),
        "expires": when(lesson.expires_at),
    }
    for name in ("situation", "mistake", "correction"):
        value = getattr(lesson, name)
        if value:
            fields[name.replace("_", " ")] = f'<span class="text">{esc(value)}</span>'
    body = f'<div class="card"><pre>{esc(lesson.content)}</pre>{pairs(fields)}</div>'
    body += '<div class="card actions">' + lesson_actions(ns, csrf, lesson) + "</div>"
    links = lesson.metadata.get("links") or []
    body += "<h2>Links</h2>" + table(
        ["type", "direction", "lesson"],
        (
            [
                badge(item.get("type", "")),
                esc(item.get("direction", "")),
                lesson_link(
                    ns,
                    str(item.get("to", "")),
                    clip(linked[item["to"]].content, 100) if item.get("to") in linked else item.get("to"),
                ),
            ]
            for item in links
            if isinstance(item, dict)
        ),
        empty="No links.",
    )
    body += "<h2>Supersession chain</h2>" + table(
        ["", "lesson", "status", "created"],
        (
            [
                "this" if item.id == lesson.id else "",
                lesson_link(ns, item.id, clip(item.content, 120)),
                status_badge(item.status) + (badge("superseded", "muted") if item.superseded_by else ""),
                when(item.created_at),
            ]
            for item in chain
        ),
        empty="Not part of a chain.",
    )
    body += "<h2>History</h2>" + table(
        ["when", "action", "actor", "summary", "proposal"],
        (
            [
                when(entry.at),
                badge(entry.action),
                esc(entry.actor),
                esc(entry.summary),
                link(f"/proposals/{segment(entry.proposal_id)}", ns, entry.proposal_id)
                if entry.proposal_id
                else "",
            ]
            for entry in audit
        ),
        empty="No change recorded.",
    )
    return body


def _contradiction(ns: str, others: Sequence[str]) -> str:
    """A mark for a lesson a pending proposal flags as contradicting ``others`` (nothing for none)."""
    if not others:
        return ""
    linked = ", ".join(lesson_link(ns, other, other) for other in others)
    return f' {badge("flagged", "warn")} <span class="muted">contradicts {linked} (pending review)</span>'


def merged_from(ns: str, lesson: Lesson) -> str:
    """The lessons a merge made this one of, as links (nothing when it is no merge)."""
    sources = [str(i) for i in lesson.metadata.get("merged_from") or []]
    return ", ".join(lesson_link(ns, source, source) for source in sources)


def provenance(ns: str, lesson: Lesson) -> str:
    """The episode(s) the lesson was learned from, as links, with the task it was learned on."""
    found = [lesson.episode_id] if lesson.episode_id else []
    found += [str(i) for i in lesson.metadata.get("from_episodes") or [] if str(i) not in found]
    links = ", ".join(link(f"/episodes/{segment(i)}", ns, f"episode {i}") for i in found)
    task = f'<span class="text">{esc(lesson.learned_from)}</span>' if lesson.learned_from else ""
    return " · ".join(part for part in (links, task) if part) or "—"


def lesson_actions(ns: str, csrf: str, lesson: Lesson) -> str:
    base = f"/lessons/{segment(lesson.id)}"
    forms = []
    if lesson.status != "archived":
        forms.append(post_form(f"{base}/archive", ns, csrf, button("Archive", tone="quiet")))
    if lesson.status != "active":
        label = "Approve (make active)" if lesson.status in ("pending", "quarantined") else "Restore"
        forms.append(post_form(f"{base}/restore", ns, csrf, button(label, tone="good")))
    forms.append(
        post_form(
            f"{base}/forget",
            ns,
            csrf,
            '<label><input type="checkbox" name="confirm" value="yes" required> delete for good</label> '
            + button("Forget", tone="danger"),
        )
    )
    pin = "Unpin" if lesson.pinned else "Pin (never decays, always in core memory)"
    forms.append(
        post_form(
            f"{base}/edit", ns, csrf, button(pin, name="pinned", value="no" if lesson.pinned else "yes")
        )
    )
    forms.append(
        post_form(
            f"{base}/edit",
            ns,
            csrf,
            f'<label>tags <input name="tags" value={attr(", ".join(lesson.tags))} size="40"></label> '
            f'<label>importance <input name="importance" value={attr(f"{lesson.importance:.2f}")} size="4"></label> '
            + button("Save"),
        )
    )
    note = (
        '<span class="muted">Lesson text is not edited in place: add a lesson that supersedes it, or '
        "approve a proposal with changes to rewrite what a cycle writes.</span>"
    )
    return "".join(forms) + note


# ---------------------------------------------------------------------- episode


def _or_dash(value: object) -> str:
    return "—" if value is None else str(value)


def episodes(ns: str, agent: str, listed: Sequence[tuple[Episode, Decision | None]]) -> str:
    """The latest episodes: outcome, agent, task, error and what the policy decided."""
    chooser = (
        '<form method="get" action="/episodes" class="filters">'
        f'{hidden("ns", ns)}<label>agent<input name="agent" value={attr(agent)} maxlength="200"></label>'
        f"{button('Show')}</form>"
    )
    rows = []
    for episode, decision in listed:
        verdict = '<span class="muted">—</span>'
        if decision is not None:
            verdict = (
                badge(f"reflect: {decision.trigger}", "good") if decision.reflect else badge("skip", "muted")
            )
        rows.append(
            [
                link(f"/episodes/{segment(episode.id)}", ns, f"{episode.created_at:%Y-%m-%d %H:%M}"),
                status_badge(episode.status),
                esc(episode.agent or "—"),
                f'<span class="text">{link(f"/episodes/{segment(episode.id)}", ns, clip(episode.task, 200))}</span>',
                f'<span class="text">{esc(clip(episode.error or "", 200)) or "—"}</span>',
                verdict,
            ]
        )
    return chooser + table(
        ["recorded", "outcome", "agent", "task", "error", "decision"],
        rows,
        empty="No episode recorded" + (f" by agent {agent}." if agent else " yet."),
    )


def episode_detail(ns: str, shown: Mapping[str, Any], produced: Sequence[Lesson]) -> str:
    episode = shown["episode"]
    decision = shown.get("decision")
    fields = {
        "task": f'<span class="text">{esc(episode.get("task"))}</span>',
        "status": status_badge(str(episode.get("status"))),
        "agent · task type": esc(
            " · ".join(str(v) for v in (episode.get("agent"), episode.get("task_type")) if v) or "—"
        ),
        "goal": esc(episode.get("goal_title") or episode.get("goal_id") or "—"),
        "error": f'<span class="text">{esc(episode.get("error") or "—")}</span>',
        "output": f'<span class="text">{esc(clip(str(episode.get("output") or "—"), 600))}</span>',
        "reward · duration": esc(
            f"{_or_dash(episode.get('reward'))} · {_or_dash(episode.get('duration_s'))}"
            + (" s" if episode.get("duration_s") is not None else "")
        ),
        "importance · signals": esc(
            f"{episode.get('importance')} · {', '.join(episode.get('signals') or []) or 'none'}"
        ),
        "recorded": when(episode.get("created_at")),
    }
    body = f'<div class="card">{pairs(fields)}</div><h2>The policy\'s decision</h2>'
    if decision:
        verdict = badge("reflect", "good") if decision.get("reflect") else badge("skip", "muted")
        body += (
            '<div class="card">'
            + pairs(
                {
                    "decision": verdict,
                    "trigger": esc(decision.get("trigger") or "—"),
                    "reflector": esc(decision.get("reflector") or "—"),
                    "reason": esc(decision.get("reason")),
                    "job": link("/jobs", ns, decision["job_id"]) if decision.get("job_id") else "—",
                }
            )
            + "</div>"
        )
    else:
        body += '<p class="empty">No decision recorded.</p>'
    body += "<h2>Reflections</h2>" + table(
        ["reflector", "status", "output", "model · tokens · cost", "when"],
        (
            [
                esc(r.get("reflector")),
                status_badge(str(r.get("status"))),
                f'<span class="text">{esc(r.get("skip_reason") or clip(str(r.get("raw_output") or ""), 400))}</span>',
                esc(
                    f"{r.get('model') or '—'} · {r.get('tokens_in', 0)}+{r.get('tokens_out', 0)} · ${float(r.get('cost_usd') or 0):.4f}"
                ),
                when(r.get("created_at")),
            ]
            for r in shown.get("reflections", [])
        ),
        empty="No reflection yet.",
    )
    body += "<h2>Lessons it produced</h2>" + table(
        ["lesson", "kind", "status"],
        (
            [
                lesson_link(ns, lesson.id, clip(lesson.content)),
                badge(lesson.kind),
                status_badge(lesson.status),
            ]
            for lesson in produced
        ),
        empty="None.",
    )
    return body


# ---------------------------------------------------------------------- why


def why(
    ns: str,
    task: str,
    budget: int,
    considered: Sequence[Considered] | None,
    block: str,
    used: int,
    left_out: Mapping[str, int],
    flagged: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """``flagged``: lesson id → the lessons a pending proposal flags it as contradicting; an injected
    one is marked, since the prompt then holds a lesson a person may still overrule."""
    form = (
        '<form method="get" action="/why" class="filters">'
        f"{hidden('ns', ns)}"
        f'<label>task<input name="task" value={attr(task)} maxlength="2000" required></label>'
        f'<label>budget (tokens)<input name="budget" type="number" min="1" max="100000" value={attr(budget)}></label>'
        f"{button('Explain')}</form>"
    )
    if considered is None:
        return (
            form
            + '<p class="muted">Type a task: this shows which lessons <code>context()</code> would inject into its prompt, and why the others were left out. Nothing is counted as used.</p>'
        )
    rows = [
        [
            esc(item.rank),
            badge("injected", "good") if item.injected else badge("left out", "muted"),
            lesson_link(ns, item.hit.lesson.id, clip(item.hit.lesson.content, 120))
            + _contradiction(ns, (flagged or {}).get(item.hit.lesson.id, ())),
            f"<b>{item.hit.score:.3f}</b>",
            esc(f"{item.hit.lexical:.2f}"),
            esc(f"{item.hit.vector:.2f}"),
            esc(f"{item.hit.temporal:.2f}"),
            esc(f"{item.hit.utility:.2f}"),
            esc(item.tokens),
            esc(item.reason),
        ]
        for item in considered
    ]
    excluded = ", ".join(f"{count} {status}" for status, count in left_out.items() if count)
    summary = (
        f"<p>Long-term memory section: <b>{esc(used)}</b> of <b>{esc(budget)}</b> tokens used, "
        f"{esc(sum(item.injected for item in considered))} lesson(s) injected. "
        "Score = relevance blended with the prior (use, recency, confidence, importance), times (0.5 + utility)."
        + (f" Never recalled because of their status: {esc(excluded)}." if excluded else "")
        + "</p>"
    )
    return (
        form
        + summary
        + table(
            ["#", "", "lesson", "score", "lexical", "vector", "prior", "utility", "tokens", "why"],
            rows,
            empty="No lesson matches this task.",
        )
        + f"<h2>The block</h2><pre>{esc(block) or '(empty: nothing would be injected)'}</pre>"
    )


# ---------------------------------------------------------------------- jobs


def jobs(ns: str, csrf: str, listed: Sequence[Job], counts: Mapping[str, int], status: str) -> str:
    tally = " ".join(
        badge(f"{name} {count}", "bad" if name == "dead" and count else "muted")
        for name, count in sorted(counts.items())
    )
    chooser = (
        '<form method="get" action="/jobs" class="filters">'
        f'{hidden("ns", ns)}<label>status<select name="status">'
        f"{options(('queued', 'waiting', 'leased', 'done', 'dead'), status, blank='failures and dead letters')}"
        f"</select></label>{button('Show')}</form>"
    )
    retry_all = (
        post_form("/jobs/retry", ns, csrf, button("Retry every dead job", tone="good"))
        if counts.get("dead")
        else ""
    )
    rows = []
    for job in listed:
        retry = (
            post_form("/jobs/retry", ns, csrf, hidden("job_id", job.id) + button("Retry", tone="quiet"))
            if job.status == "dead"
            else ""
        )
        target = link(f"/episodes/{segment(job.episode_id)}", ns, job.episode_id) if job.episode_id else ""
        rows.append(
            [
                esc(job.id),
                badge(job.kind),
                badge(job.status, "bad" if job.status == "dead" else "muted"),
                esc(f"{job.attempts}/{job.max_attempts}"),
                f'<span class="text">{esc(job.last_error or job.detail or "")}</span>',
                target,
                when(job.updated_at),
                retry,
            ]
        )
    return f"<p>{tally}</p>{chooser}{retry_all}" + table(
        ["job", "kind", "status", "attempts", "last error", "episode", "updated", ""],
        rows,
        empty="No failed job.",
    )


def error(message: str) -> str:
    return f'<p class="error">{esc(message)}</p>'
