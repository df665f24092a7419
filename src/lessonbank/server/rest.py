"""The REST API: every operation of :class:`~lessonbank.LessonBank` under
``/api/v1/ns/{namespace}/…``, one route per operation of the table in :mod:`lessonbank.operations`,
answering the operation's result as JSON.

A route is declared from its operation's record (:func:`_serve`): its method, path and summary, its
arguments read as the operation's request model (:mod:`lessonbank.requests`: the path's ids, then
the query string for GET and DELETE or else the JSON body, see :mod:`.rest_models`), and the bank
method of the same name called with them. Each route takes the bank of its path's namespace from
:mod:`.deps` in the role the table gives (read, write, admin: see :mod:`.auth`), so no route can
reach another namespace, and ids are looked up in that namespace only (another namespace's id is
404). The bank's own errors become JSON with a stable code in :mod:`.app`. The bank is synchronous,
so each route calls it in the thread pool (one hop per request), never on the event loop.

Hand-written code is what a route adds to its operation: an audited decision names the key that made
it (the ``actor`` a client sends is kept, followed by the key); restoring a quarantined or pending
lesson is its approval, so it needs an admin key even though restoring an archived one needs write;
adding a lesson pinned or importing counters needs admin; flush waits on the event loop; an export
is streamed; analytics and a proposal's Markdown are read beside the bank's methods.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import anyio
import anyio.to_thread
from fastapi import APIRouter, Header, Path, Query
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel

from lessonbank.bank import LessonBank
from lessonbank.loop.analytics import analyze
from lessonbank.operations import ADMIN_LESSON_FIELDS, OPERATIONS, Operation, restore_operation, role_of
from lessonbank.requests import (
    MAX_BUDGET_TOKENS,
    NAME_CHARS,
    ClaudeHookRequest,
    ExportRequest,
    FlushRequest,
    ImportRequest,
    Request,
)
from lessonbank.server.auth import Principal
from lessonbank.server.deps import Bank, Who, authorize
from lessonbank.server.rest_models import ENVELOPES, Done, body_of, query_of
from lessonbank.services.expansion import ExpansionReport

router = APIRouter()
FLUSH_POLL_S = 0.05
FLUSH_LOOK_THREADS = 2  # looks at the queue by waiting flushes, at once: the other requests keep the rest
_FLUSH_LIMITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = (
    weakref.WeakKeyDictionary()
)
log = logging.getLogger("lessonbank.server")

Id = Annotated[str, Path(min_length=1, max_length=NAME_CHARS)]
EXPORT_TYPES = {"json": "application/json", "jsonl": "application/x-ndjson", "markdown": "text/markdown"}
# Result types the request models name by their name (they live above lessonbank.requests).
ABOVE: dict[str, Any] = {"ExpansionReport": ExpansionReport}
# What a route adds to its operation: (bank, request, principal, namespace) → the answer.
Handler = Callable[[LessonBank, Any, Principal, str], Any]
_KW = inspect.Parameter.KEYWORD_ONLY


def _route(name: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare operation ``name``'s route from the table (method, path, summary) for a function
    written by hand; the route is named after the operation, which is how
    :data:`~lessonbank.server.deps.Bank` finds its role."""
    operation = OPERATIONS[name]
    assert operation.rest is not None, f"operation {name} has no REST route"
    method, path = operation.rest
    return router.api_route(path, methods=[method], name=name, summary=operation.summary, **options)


def _serve(name: str, description: str | None = None, handler: Handler | None = None, **options: Any) -> None:
    """Declare operation ``name``'s route from its record: the path's ids, its request model as the
    query string (GET, DELETE) or the JSON body, and the bank method ``name`` called with the model's
    fields (or ``handler``, for a route that adds something)."""
    operation = OPERATIONS[name]
    assert operation.rest is not None and operation.request is not None, f"{name} has no REST route"
    method, path = operation.rest
    parameters = [inspect.Parameter("namespace", _KW, annotation=str)]
    parameters += [inspect.Parameter(id_, _KW, annotation=Id) for id_ in operation.path_ids]
    part = query_of(operation) if operation.in_query else body_of(operation)
    if part is not None:
        annotation = Annotated[part, Query()] if operation.in_query else part
        parameters.append(inspect.Parameter("arguments", _KW, annotation=annotation))
    parameters += [
        inspect.Parameter("bank", _KW, annotation=Bank),
        inspect.Parameter("who", _KW, annotation=Who),
    ]
    act = handler or _call_bank(operation)

    async def endpoint(**given: Any) -> Any:
        request = _request_of(operation, given)
        # The bank is synchronous: one hop to the thread pool per request. (A plain function would
        # make FastAPI hop again to validate its answer, a cost as large as a record's own.)
        return await anyio.to_thread.run_sync(act, given["bank"], request, given["who"], given["namespace"])

    endpoint.__signature__ = inspect.Signature(parameters, return_annotation=_answer(operation, options))  # type: ignore[attr-defined]
    endpoint.__name__ = name
    router.add_api_route(
        path,
        endpoint,
        methods=[method],
        name=name,
        summary=operation.summary,
        description=description or "",
        status_code=options.pop("status_code", 204 if operation.result is None else None),
        **options,
    )


def _answer(operation: Operation, options: dict[str, Any]) -> Any:
    """The route's answer type: the operation's result (or its envelope), none for a 204."""
    if "returns" in options:
        return options.pop("returns")
    if operation.envelope is not None:
        return ENVELOPES[operation.envelope]
    result = operation.result
    if result is None:
        return Response
    return ABOVE.get(result, result) if isinstance(result, str) else result


def _request_of(operation: Operation, given: dict[str, Any]) -> Request[Any]:
    """The operation's request model from a route's path ids and query or body, the ``actor`` it
    names naming the key too."""
    model = operation.request
    assert model is not None
    part: BaseModel | None = given.get("arguments")
    ids = {id_: given[id_] for id_ in operation.path_ids}
    if isinstance(part, model) and not ids:
        request = part
    else:
        values = {name: getattr(part, name) for name in type(part).model_fields} if part is not None else {}
        request = model.model_construct(**values, **ids)
    if "actor" in type(request).model_fields:
        request = request.model_copy(update={"actor": _actor(given["who"], request.actor)})  # type: ignore[attr-defined]
    return request


def _call_bank(operation: Operation) -> Handler:
    """Call the bank method of the operation's name with the request's fields; wrap the result in
    its envelope; answer 204 for an operation that returns nothing."""

    def call(bank: LessonBank, request: Request[Any], who: Principal, namespace: str) -> Any:
        result = getattr(bank, operation.name)(**arguments(request))
        if operation.envelope is not None:
            return ENVELOPES[operation.envelope](**{operation.envelope: result})
        return Response(status_code=204) if operation.result is None else result

    return call


def arguments(request: Request[Any]) -> dict[str, Any]:
    """A request model's fields as the keyword arguments of its bank method."""
    return {name: getattr(request, name) for name in type(request).model_fields}


def _actor(who: Principal, actor: str) -> str:
    """The audit log's actor: what the client says, and the key it used (a key cannot pass for another)."""
    if who.open or actor == who.name:
        return actor
    return f"{actor} (key {who.name})"[:NAME_CHARS]


# ---------------------------------------------------------------------- hand-written parts


def _add_lesson(bank: LessonBank, request: Any, who: Principal, namespace: str) -> Any:
    if request.pinned:
        authorize(who, namespace, "pin_lesson")
    return bank.add_lesson(**arguments(request))


def _restore(bank: LessonBank, request: Any, who: Principal, namespace: str) -> Any:
    authorize(who, namespace, restore_operation(bank.get_lesson(request.lesson_id)))
    return bank.restore(**arguments(request))


def _import_lessons(
    bank: LessonBank, request: ImportRequest, who: Principal, namespace: str
) -> dict[str, int]:
    records, ignored = request.lessons, 0
    if not who.may(namespace, role_of("import_counters")):
        records, ignored = _without_admin_fields(records)
        if ignored:
            log.warning(
                "import by key %r: counters and pins of %d lesson(s) ignored (they need admin)",
                who.name,
                ignored,
            )
    counts = bank.import_lessons(records)
    return {**counts, "counters_ignored": ignored} if ignored else counts


def _without_admin_fields(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """``records`` without the fields only an admin may set, and how many records had one."""
    kept, touched = [], 0
    for record in records:
        if any(record.get(name) not in (None, False, 0) for name in ADMIN_LESSON_FIELDS):
            touched += 1
        kept.append({key: value for key, value in record.items() if key not in ADMIN_LESSON_FIELDS})
    return kept, touched


def _export(bank: LessonBank, request: ExportRequest, who: Principal, namespace: str) -> StreamingResponse:
    chunks: Iterator[str] = bank.services.catalog.iter_export(request.format, live_only=request.live_only)
    return StreamingResponse(chunks, media_type=EXPORT_TYPES[request.format])


def _analytics(bank: LessonBank, request: Any, who: Principal, namespace: str) -> dict[str, Any]:
    return analyze(bank).as_dict()


def _proposal_markdown(bank: LessonBank, request: Any, who: Principal, namespace: str) -> PlainTextResponse:
    text = bank.services.consolidation.render(request.proposal_id)
    return PlainTextResponse(text, media_type="text/markdown; charset=utf-8")


# ---------------------------------------------------------------------- the routes, in the table's order

# The record route's call of the bank; :mod:`.record_path` answers most records with it too.
record_handler = _call_bank(OPERATIONS["record"])

# Routes that add something to the bank's call: their handler, and FastAPI options beside the table's.
_SPECIAL: dict[str, tuple[Handler | None, dict[str, Any]]] = {
    "record": (record_handler, {"status_code": 201}),
    "add_lesson": (_add_lesson, {"status_code": 201}),
    "restore": (_restore, {}),
    "import_lessons": (_import_lessons, {}),
    "export": (_export, {"returns": StreamingResponse}),
    "analytics": (_analytics, {}),
    "proposal_markdown": (
        _proposal_markdown,
        {"returns": PlainTextResponse, "response_class": PlainTextResponse},
    ),
}
_WRITTEN_OUT = {"flush", "claude_hook"}  # a route of its own below

for _operation in OPERATIONS.values():
    if _operation.rest is not None and _operation.name not in _WRITTEN_OUT:
        _handler, _options = _SPECIAL.get(_operation.name, (None, {}))
        _serve(_operation.name, _operation.description, _handler, tags=[_operation.tag], **_options)


@_route("flush", tags=["jobs"])
async def flush(namespace: str, body: FlushRequest, bank: Bank) -> Done:
    """Wait until no job is queued or running (at most ``timeout`` seconds).

    The wait is on the event loop, not in a thread: each look at the queue takes a thread of a small
    pool of its own for a moment, so any number of waiting clients never starves other requests."""
    deadline = time.monotonic() + body.timeout
    done = await anyio.to_thread.run_sync(bank.flush, 0.0, limiter=_flush_looks())
    while not done:
        done_or_not = await anyio.to_thread.run_sync(bank._flush_look, deadline, limiter=_flush_looks())
        if done_or_not is not None:
            return Done(done=done_or_not)
        await anyio.sleep(FLUSH_POLL_S)
    return Done(done=True)


@_route("claude_hook", tags=["integrations"])
def claude_hook(
    namespace: str,
    body: ClaudeHookRequest,
    bank: Bank,
    budget: Annotated[int | None, Header(alias="X-Lessonbank-Budget", ge=0, le=MAX_BUDGET_TOKENS)] = None,
) -> Response:
    """Answer a Claude Code ``http`` hook as ``lessonbank hooks claude`` answers a command hook.

    The answer is JSON (``hookSpecificOutput.additionalContext`` for SessionStart and
    UserPromptSubmit), plain text for PreCompact (added to the compaction's instructions), or an
    empty 200. A hook never breaks the session: a failure is logged and answered empty. Only a
    transcript under a ``.claude/projects`` folder is read. ``X-Lessonbank-Budget``: the context's
    token budget (default 800)."""
    from lessonbank.integrations.claude.hooks import ClaudeHooks, claude_transcript
    from lessonbank.integrations.claude.session import Sessions

    sessions = Sessions.under(bank.settings.home, namespace)
    hooks = ClaudeHooks(
        bank, sessions, budget_tokens=800 if budget is None else budget, readable=claude_transcript
    )
    try:
        answer = hooks.answer(body.model_dump(exclude_none=True))
    except Exception as exc:  # a hook never breaks the session
        log.warning("claude %s hook failed: %s: %s", body.hook_event_name, type(exc).__name__, exc)
        return Response(status_code=200)
    if answer.json is not None:
        return JSONResponse(answer.json)
    if answer.text is not None:
        return PlainTextResponse(answer.text)
    return Response(status_code=200)


def _flush_looks() -> anyio.CapacityLimiter:
    """The threads flush's looks share: one limiter per event loop (a limiter belongs to its loop)."""
    loop = asyncio.get_running_loop()
    limiter = _FLUSH_LIMITERS.get(loop)
    if limiter is None:
        limiter = _FLUSH_LIMITERS[loop] = anyio.CapacityLimiter(FLUSH_LOOK_THREADS)
    return limiter
