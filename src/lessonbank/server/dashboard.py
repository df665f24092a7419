"""The dashboard at ``/``: what the agents learned, for a person to see, search, correct and approve.

Pages (each takes ``?ns=`` for the namespace): the overview with charts of learning, lessons (recall
search, filters, utility, decay tier, links, supersession), one lesson (archive, restore, forget,
its history, the episode it was learned from), the latest episodes, one episode (the policy's
decision, its reflections and lessons), "why" (what
``context()`` would inject for a task and why the rest was left out), jobs (failures, dead letters,
retry) and proposals (a readable diff; approve, approve some, approve with edits, reject, revert).

Server-rendered HTML with no script at all; the bank's Python API does the work. Safety:

- lesson text is untrusted: every value is escaped where it enters the markup (:mod:`.ui.html`), and
  every page carries a Content-Security-Policy that allows no script and no inline style, so even a
  missed escape could not run anything;
- changes are POST forms: each must carry this process's CSRF token (a random value a page of
  another origin cannot read) and, when the browser says where it comes from (``Origin``,
  ``Sec-Fetch-Site``), come from this origin;
- access is the API's: a key (header, or the cookie ``/login`` sets, HttpOnly and SameSite=Strict)
  scoped to namespaces and a role; with no key at all the server is open, as the API is.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from importlib.resources import files
from typing import Annotated
from urllib.parse import parse_qs, urlencode, urlsplit

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from lessonbank.bank import LessonBank
from lessonbank.errors import InputError, LessonbankError, NotFoundError
from lessonbank.loop.analytics import analyze
from lessonbank.models import Lesson
from lessonbank.operations import OPERATIONS, restore_operation
from lessonbank.retrieval.scoring import utility
from lessonbank.server.auth import KeyStore, Principal, token_of
from lessonbank.server.deps import authorize, bank_for
from lessonbank.server.errors import code_of
from lessonbank.server.ui import charts, views
from lessonbank.server.ui import proposals as proposal_views
from lessonbank.server.ui.html import esc, page, segment
from lessonbank.services.consolidation.decay import decay_score, tier_of
from lessonbank.services.context import Considered

router = APIRouter(include_in_schema=False)

COOKIE = "lessonbank_key"
CSRF_TOKEN = secrets.token_urlsafe(32)  # per process: a restart invalidates open forms, nothing else
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
LIST_LIMIT = 100
CHAIN_MAX = 20
NOTICES = {
    "archived": "Lesson archived: it is no longer recalled or injected.",
    "restored": "Lesson active again.",
    "forgotten": "Lesson deleted.",
    "edited": "Lesson saved.",
    "retried": "Dead jobs queued again.",
    "approved": "Proposal applied.",
    "rejected": "Proposal rejected; its operations will not be proposed again.",
    "reverted": "Proposal reverted.",
}
_ASSETS = files("lessonbank.server.ui")


# ---------------------------------------------------------------------- plumbing


def _html(markup: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(markup, status_code=status, headers=HEADERS)


def _who(request: Request) -> Principal | None:
    keys: KeyStore = request.app.state.keys
    token = token_of(request.headers.get("authorization"), request.headers.get("x-api-key"))
    return keys.principal(token or request.cookies.get(COOKIE))


def _ns(request: Request) -> str:
    chosen = request.query_params.get("ns") or request.app.state.settings.namespace
    return str(chosen).strip()


class Page:
    """What a page handler gets: the request, its principal and namespace, and the bank in a role."""

    def __init__(self, request: Request, who: Principal, ns: str) -> None:
        self.request, self.who, self.ns = request, who, ns

    def bank(self, operation: str) -> LessonBank:
        """The namespace's bank, once the principal may do ``operation`` (see :mod:`lessonbank.operations`)."""
        return bank_for(self.request, self.who, self.ns, operation)

    def namespaces(self) -> list[str]:
        try:
            known = self.bank("lessons").store.namespaces()
        except (LessonbankError, HTTPException):
            known = []
        return [name for name in dict.fromkeys([self.ns, *known]) if self.who.may(name, "read")]

    def render(self, title: str, active: str, body: str, status: int = 200) -> HTMLResponse:
        notice = NOTICES.get(self.request.query_params.get("done", ""))
        markup = page(title, body, ns=self.ns, active=active, namespaces=self.namespaces(), notice=notice)
        return _html(markup, status)


def _guarded(request: Request, build: Callable[[Page], Response], ns: str | None = None) -> Response:
    """Run ``build`` for the request's principal on ``ns`` (default: the query's); a bank error or a
    refusal becomes an HTML page."""
    try:
        who = _who(request)
    except LessonbankError as exc:  # the key file vanished or broke under a closed server
        _, status = code_of(exc)
        return _html(page("Unavailable", views.error(str(exc)), ns="", active=""), status)
    if who is None:
        if request.method == "GET":
            return RedirectResponse(f"/login?{urlencode({'next': request.url.path})}", status_code=303)
        return _html(
            page("Sign in needed", views.error("A valid API key is required."), ns="", active=""), 401
        )
    current = Page(request, who, ns if ns is not None else _ns(request))
    try:
        return build(current)
    except HTTPException as exc:
        detail = exc.detail.get("error", {}).get("message") if isinstance(exc.detail, dict) else exc.detail
        return current.render("Not allowed", "", views.error(str(detail)), exc.status_code)
    except LessonbankError as exc:
        _, status = code_of(exc)
        return current.render("Something went wrong", "", views.error(str(exc)), status)


async def _form(request: Request) -> dict[str, list[str]]:
    """A POST's url-encoded fields, once it passed the CSRF checks (403 otherwise)."""
    raw = (await request.body()).decode("utf-8", errors="replace")
    fields = parse_qs(raw, keep_blank_values=True)
    token = (fields.get("csrf") or [""])[0]
    if not hmac.compare_digest(token.encode(), CSRF_TOKEN.encode()) or not _same_origin(request):
        raise HTTPException(status_code=403, detail="the form is stale or not from this dashboard; reload it")
    return fields


def _same_origin(request: Request) -> bool:
    if request.headers.get("sec-fetch-site") not in (None, "same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == request.headers.get("host")


Form = Annotated[dict[str, list[str]], Depends(_form)]


def _field(form: Mapping[str, list[str]], name: str) -> str:
    return (form.get(name) or [""])[0]


def _done(path: str, ns: str, notice: str, **params: str) -> RedirectResponse:
    return RedirectResponse(f"{path}?{urlencode({'ns': ns, 'done': notice, **params})}", status_code=303)


def _posted(request: Request, form: Mapping[str, list[str]], act: Callable[[Page], Response]) -> Response:
    """A POST: the namespace comes from the form (the page it was on), the rest as for a page."""
    return _guarded(request, act, _field(form, "ns").strip() or request.app.state.settings.namespace)


def _now(bank: LessonBank) -> datetime:
    return datetime.fromtimestamp(bank.clock(), UTC)


def _decay(bank: LessonBank, lessons: list[Lesson]) -> dict[str, views.Decayed]:
    now = _now(bank)
    scores = {lesson.id: decay_score(lesson, now) for lesson in lessons}
    return {key: views.Decayed(score, tier_of(score)) for key, score in scores.items()}


# ---------------------------------------------------------------------- assets and sign-in


@router.get("/static/dashboard.css")
def stylesheet() -> Response:
    css = _ASSETS.joinpath("dashboard.css").read_text("utf-8")
    return Response(css, media_type="text/css", headers={"Cache-Control": "max-age=300"})


@router.get("/favicon.ico")
def favicon() -> Response:
    icon = _ASSETS.joinpath("favicon.svg").read_text("utf-8")
    return Response(icon, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


@router.get("/login")
def login_page(request: Request) -> Response:
    target = request.query_params.get("next", "/")
    form = (
        '<form method="post" action="/login" class="filters">'
        f'<input type="hidden" name="csrf" value="{esc(CSRF_TOKEN)}">'
        f'<input type="hidden" name="next" value="{esc(target)}">'
        '<label>API key<input name="key" type="password" autocomplete="off" required></label>'
        '<button type="submit">Sign in</button></form>'
        '<p class="muted">Create one with <code>lessonbank keys create</code>. It is kept in an '
        "HttpOnly cookie for this site only.</p>"
    )
    return _html(page("Sign in", form, ns="", active=""))


@router.post("/login")
def login(request: Request, form: Form) -> Response:
    keys: KeyStore = request.app.state.keys
    token = _field(form, "key").strip()
    try:
        found = keys.principal(token)
    except LessonbankError as exc:
        return _html(page("Unavailable", views.error(str(exc)), ns="", active=""), code_of(exc)[1])
    if found is None:
        return _html(page("Sign in", views.error("That key is not valid."), ns="", active=""), 401)
    target = _field(form, "next")
    target = target if target.startswith("/") and not target.startswith("//") else "/"
    response = RedirectResponse(target, status_code=303)
    secure = request.url.scheme == "https"
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=secure, path="/")
    return response


# ---------------------------------------------------------------------- overview and charts


@router.get("/")
def overview(request: Request) -> Response:
    def build(p: Page) -> Response:
        bank = p.bank("stats")
        stats = bank.stats()
        days = sorted(stats.get("by_day", {}).items())[-30:]
        lessons = bank.lessons(limit=1000)
        buckets = [0] * 10
        for lesson in lessons:
            buckets[min(9, int(utility(lesson.helpful, lesson.harmful) * 10))] += 1
        loops = analyze(bank).loops[-6:]
        drawn = [
            charts.bars(
                "Reflections per day", [(day[5:], float(row.get("reflections", 0))) for day, row in days]
            ),
            charts.bars(
                "Reflection cost per day",
                [(day[5:], float(row.get("cost_usd", 0.0))) for day, row in days],
                unit="$",
                tone="cost",
            ),
            charts.bars(
                "Lesson utility (live lessons; 0.5 = no outcome yet)",
                [(f"{i / 10:.1f}", float(n)) for i, n in enumerate(buckets)],
                tone="util",
            ),
            charts.lines("Loop reward per iteration", [(s.loop_id, s.rewards) for s in loops]),
        ]
        pending = len(bank.proposals(status="pending", limit=1000))
        cycles = bank.dreams(limit=1000)
        return p.render("Overview", "overview", views.overview(p.ns, stats, drawn, pending, cycles))

    return _guarded(request, build)


# ---------------------------------------------------------------------- lessons


@router.get("/lessons")
def lessons(
    request: Request, q: str = "", kind: str = "", tag: str = "", status: str = "", tier: str = ""
) -> Response:
    def build(p: Page) -> Response:
        bank = p.bank("lessons")
        tags = [tag] if tag.strip() else []
        hits = []
        if q.strip():
            hits = bank.recall(q, k=50, kind=kind or None, tags=tags)
            wanted = status or "active"
            listed = [hit.lesson for hit in hits if hit.lesson.status == wanted]
        else:
            listed = bank.lessons(
                kind=kind or None, tags=tags, status=status or "active", limit=LIST_LIMIT, tier=tier or None
            )
        decay = _decay(bank, listed)
        if q.strip() and tier:
            listed = [lesson for lesson in listed if decay[lesson.id].tier == tier]
        body = views.lesson_filters(p.ns, q, kind, tag, status, tier) + views.lesson_rows(
            p.ns, listed, decay, hits
        )
        return p.render("Lessons", "lessons", body)

    return _guarded(request, build)


@router.get("/lessons/{lesson_id}")
def lesson_page(request: Request, lesson_id: str) -> Response:
    def build(p: Page) -> Response:
        bank = p.bank("get_lesson")
        lesson = bank.get_lesson(lesson_id)
        chain = _chain(bank, lesson)
        linked_ids = [
            str(item.get("to")) for item in lesson.metadata.get("links") or [] if isinstance(item, dict)
        ]
        linked = {}
        for other in linked_ids:
            try:
                linked[other] = bank.get_lesson(other)
            except NotFoundError:
                continue
        decayed = _decay(bank, [lesson])[lesson.id]
        audit = bank.audit(lesson_id=lesson.id, limit=50)
        body = views.lesson_detail(p.ns, CSRF_TOKEN, lesson, decayed, chain, linked, audit)
        return p.render("Lesson", "lessons", body)

    return _guarded(request, build)


def _chain(bank: LessonBank, lesson: Lesson) -> list[Lesson]:
    """The lessons ``lesson`` superseded (oldest first), itself, and those that superseded it."""
    older: list[Lesson] = []
    newer: list[Lesson] = []
    for field, into in (("supersedes", older), ("superseded_by", newer)):
        current, seen = lesson, {lesson.id}
        while (next_id := getattr(current, field)) and next_id not in seen and len(into) < CHAIN_MAX:
            try:
                current = bank.get_lesson(next_id)
            except NotFoundError:
                break
            seen.add(current.id)
            into.append(current)
    chain = [*reversed(older), lesson, *newer]
    return chain if len(chain) > 1 else []


def _lesson_action(action: str, notice: str) -> Callable[..., Response]:
    """A lesson form's handler; ``action`` is its operation in the table (and its role)."""

    def act(request: Request, lesson_id: str, form: Form) -> Response:
        def run(p: Page) -> Response:
            bank = p.bank(action)
            actor = f"dashboard:{p.who.name}"
            if action == "archive":
                bank.archive(lesson_id, reason="archived from the dashboard", actor=actor)
            elif action == "restore":  # of a lesson never approved, its approval: admin
                authorize(p.who, p.ns, restore_operation(bank.get_lesson(lesson_id)))
                bank.restore(lesson_id, actor=actor)
            elif action == "edit_lesson":
                _edit(bank, lesson_id, form, actor)
            else:
                if _field(form, "confirm") != "yes":
                    raise InputError("tick the box to confirm the deletion", field="confirm")
                bank.forget(lesson_id, actor=actor)
                return _done("/lessons", p.ns, notice)
            return _done(f"/lessons/{segment(lesson_id)}", p.ns, notice)

        return _posted(request, form, run)

    return act


for _operation, _notice in (
    ("archive", "archived"),
    ("restore", "restored"),
    ("forget", "forgotten"),
    ("edit_lesson", "edited"),
):
    _method, _path = OPERATIONS[_operation].dashboard or ("", "")
    router.add_api_route(_path, _lesson_action(_operation, _notice), methods=[_method])


def _edit(bank: LessonBank, lesson_id: str, form: Mapping[str, list[str]], actor: str) -> None:
    """Pin / unpin (a ``pinned`` button), or the tags and importance of the edit form."""
    pinned = _field(form, "pinned")
    if pinned:
        bank.edit_lesson(lesson_id, pinned=pinned == "yes", actor=actor)
        return
    try:
        importance = float(_field(form, "importance"))
    except ValueError:
        raise InputError("importance is a number from 0 to 1", field="importance") from None
    tags = [tag.strip() for tag in _field(form, "tags").split(",") if tag.strip()]
    bank.edit_lesson(lesson_id, tags=tags, importance=importance, actor=actor)


# ---------------------------------------------------------------------- episode and why


@router.get("/episodes")
def episodes(request: Request, agent: str = "") -> Response:
    def build(p: Page) -> Response:
        bank = p.bank("decisions")
        listed = bank.store.recent_episodes(p.ns, agent=agent.strip() or None, limit=LIST_LIMIT)
        return p.render("Episodes", "episodes", views.episodes(p.ns, agent, listed))

    return _guarded(request, build)


@router.get("/episodes/{episode_id}")
def episode_page(request: Request, episode_id: str) -> Response:
    def build(p: Page) -> Response:
        bank = p.bank("show")
        shown = bank.show(episode_id)
        if "episode" not in shown:
            raise NotFoundError("episode", episode_id)
        produced = []
        for lesson_id in dict.fromkeys(i for r in shown["reflections"] for i in r.get("lesson_ids", [])):
            try:
                produced.append(bank.get_lesson(lesson_id))
            except NotFoundError:
                continue  # forgotten since
        return p.render("Episode", "episodes", views.episode_detail(p.ns, shown, produced))

    return _guarded(request, build)


@router.get("/why")
def why(request: Request, task: str = "", budget: int = 800) -> Response:
    def build(p: Page) -> Response:
        if not task.strip():
            return p.render("Why this context?", "why", views.why(p.ns, task, budget, None, "", 0, {}))
        if not 1 <= budget <= 100_000:
            raise InputError("the budget is 1 to 100,000 tokens", field="budget")
        bank = p.bank("context")
        considered, block, used = explain(bank, task, budget)
        by_status = bank.stats().get("lessons_by_status", {})
        left_out = {name: int(by_status.get(name, 0)) for name in ("pending", "quarantined", "archived")}
        flagged = bank.services.consolidation.open_flags()
        body = views.why(p.ns, task, budget, considered, block, used, left_out, flagged)
        return p.render("Why this context?", "why", body)

    return _guarded(request, build)


def explain(bank: LessonBank, task: str, budget: int) -> tuple[list[Considered], str, int]:
    """What ``bank.context(task, budget_tokens=budget)`` injects in its long-term memory section and
    why the other recalled lessons are out, from the context service (a preview, not a use)."""
    shown = bank.services.context.explain(task, budget, bank.services.context.query())
    return shown.considered, shown.block, shown.tokens


# ---------------------------------------------------------------------- jobs


@router.get("/jobs")
def jobs(request: Request, status: str = "") -> Response:
    def build(p: Page) -> Response:
        bank = p.bank("jobs")
        if status:
            listed = bank.jobs(status=status, limit=LIST_LIMIT)
        else:  # failures: dead letters, and jobs that failed at least once and wait for a retry
            listed = bank.jobs(status="dead", limit=LIST_LIMIT)
            listed += [
                job for job in bank.jobs(status=["queued", "leased"], limit=LIST_LIMIT) if job.last_error
            ]
        body = views.jobs(p.ns, CSRF_TOKEN, listed, bank.pending(), status)
        return p.render("Jobs", "jobs", body)

    return _guarded(request, build)


@router.post("/jobs/retry")
def retry(request: Request, form: Form) -> Response:
    def run(p: Page) -> Response:
        chosen = [job_id for job_id in form.get("job_id", []) if job_id]
        p.bank("retry_jobs").retry_jobs(chosen or None)
        return _done("/jobs", p.ns, "retried")

    return _posted(request, form, run)


# ---------------------------------------------------------------------- proposals


@router.get("/proposals")
def proposals(request: Request) -> Response:
    def build(p: Page) -> Response:
        return p.render(
            "Proposals",
            "proposals",
            proposal_views.proposals(p.ns, p.bank("proposals").proposals(limit=LIST_LIMIT)),
        )

    return _guarded(request, build)


@router.get("/proposals/{proposal_id}")
def proposal_page(request: Request, proposal_id: str) -> Response:
    def build(p: Page) -> Response:
        bank = p.bank("proposal")
        proposal = bank.proposal(proposal_id)
        rendered = bank.services.consolidation.render(proposal.id)
        touched = sorted({i for op in proposal.operations for i in op.lesson_ids})
        lessons: dict[str, Lesson] = {}
        for lesson_id in touched:
            try:
                lessons[lesson_id] = bank.get_lesson(lesson_id)
            except NotFoundError:
                continue
        # What the rewrite replaces: kept on the proposal by the cycle; else, while pending, today's.
        current = proposal.metadata.get("core_before")
        if current is None and proposal.status == "pending":
            current = bank.core_memory()
        current = str(current or "")
        body = proposal_views.proposal_detail(p.ns, CSRF_TOKEN, proposal, rendered, lessons, current)
        return p.render(f"Proposal {proposal.id}", "proposals", body)

    return _guarded(request, build)


@router.post("/proposals/{proposal_id}/approve")
def approve(request: Request, proposal_id: str, form: Form) -> Response:
    def run(p: Page) -> Response:
        bank = p.bank("approve")
        proposal = bank.proposal(proposal_id)
        originals = proposal_views.original_texts(proposal)
        edits = proposal_views.flag_edits(proposal, form)
        for key, values in form.items():
            if key.startswith("edit:") and key[5:] in originals:
                text = values[0].replace("\r\n", "\n")  # browsers send a textarea's lines as CRLF
                if text.strip() != originals[key[5:]].strip():
                    edits[key[5:]] = text
        only = None
        if _field(form, "decision") == "partial":
            only = form.get("only", [])
            if not only:
                raise InputError(
                    "tick at least one operation to approve, or reject the proposal", field="only"
                )
        bank.approve(proposal_id, only=only, edits=edits or None, actor=f"dashboard:{p.who.name}")
        return _done(f"/proposals/{segment(proposal_id)}", p.ns, "approved")

    return _posted(request, form, run)


@router.post("/proposals/{proposal_id}/reject")
def reject(request: Request, proposal_id: str, form: Form) -> Response:
    def run(p: Page) -> Response:
        reason = _field(form, "reason").strip() or None
        p.bank("reject").reject(proposal_id, reason=reason, actor=f"dashboard:{p.who.name}")
        return _done(f"/proposals/{segment(proposal_id)}", p.ns, "rejected")

    return _posted(request, form, run)


@router.post("/proposals/{proposal_id}/revert")
def revert(request: Request, proposal_id: str, form: Form) -> Response:
    def run(p: Page) -> Response:
        p.bank("revert").revert(proposal_id, actor=f"dashboard:{p.who.name}")
        return _done(f"/proposals/{segment(proposal_id)}", p.ns, "reverted")

    return _posted(request, form, run)
