"""What both remote facades share: a request model as one HTTP request (:func:`call_of`, from the table
of operations), the answer parsed back into the operation's result type, and a server's JSON error
turned back into the error class the embedded bank would have raised.

Every message these errors carry names the server by :func:`~lessonbank.redact.redact_url`: a
password in the URL the caller gave never reaches an error, a log or a traceback's last line.

A :class:`Call` is pure data: :class:`~lessonbank.remote.RemoteBank` sends it with ``httpx.Client``,
:class:`~lessonbank.remote.AsyncRemoteBank` with ``httpx.AsyncClient``, so the two can never build a
request differently.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from lessonbank.errors import (
    BudgetExceededError,
    ConfigError,
    ConflictError,
    CycleFailedError,
    InputError,
    LessonbankError,
    LLMError,
    NotFoundError,
    ParseError,
    StoreError,
)
from lessonbank.integrations.agent_files import write_export as export_lessons
from lessonbank.models import Lesson
from lessonbank.operations import BY_REQUEST, Operation
from lessonbank.redact import redact, redact_url
from lessonbank.requests import ConsolidateRequest, ExpandRequest, FlushRequest, Request
from lessonbank.services.expansion import ExpansionReport
from lessonbank.services.transfer import (
    STATE_KEY,
    ExportTarget,
    Mark,
    check_format,
)

T = TypeVar("T")

API_PREFIX = "/api/v1"
IMPORT_BATCH = 1_000  # records per import request; the server takes up to 10,000
IMPORT_BATCH_BYTES = 2 * 1024 * 1024  # half the server's default body cap
MAX_FLUSH_S = 60.0  # the server waits at most this long per flush request; a longer flush asks again
CYCLE_TIMEOUT_S = 900.0  # a waited-for consolidation cycle calls the model several times
EXPAND_WAIT_S = 600.0  # one LLM call per lesson, on the server
_NS = "/ns/{namespace}"
# Result types the request models name by their name (they live above lessonbank.requests).
ABOVE: dict[str, Any] = {"ExpansionReport": ExpansionReport}

# The server's error codes (lessonbank.server.errors) → the class the embedded bank raises. A key that
# is missing, unknown or not allowed here is the caller's configuration; a body over the cap is input.
ERRORS: dict[str, type[LessonbankError]] = {
    "invalid_input": InputError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "budget_exceeded": BudgetExceededError,
    "cycle_failed": CycleFailedError,
    "not_configured": ConfigError,
    "llm_error": LLMError,
    "parse_error": ParseError,
    "store_error": StoreError,
    "unauthorized": ConfigError,
    "forbidden": ConfigError,
    "too_large": InputError,
}


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request under ``/api/v1/ns/{namespace}``; ``parse`` turns the decoded JSON (or the text,
    with ``text``) into what the bank method returns."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    text: bool = False
    wait_s: float = 0.0  # how long the server may take on purpose, added to the client's timeout


def base_url(url: str, namespace: str) -> str:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        got = redact_url(url) if isinstance(url, str) else type(url).__name__
        raise ConfigError(f"a lessonbank server URL starts with http:// or https://, got {got!r}")
    if not isinstance(namespace, str) or not namespace.strip():
        raise InputError("namespace must be a non-empty string", field="namespace")
    return f"{url.rstrip('/')}{API_PREFIX}/ns/{quote(namespace, safe='')}"


def segment(value: object, name: str) -> str:
    """An id as one path segment: a slash or '..' in it cannot reach another route."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{name} must be a non-empty string, got {value!r}"[:300], field=name)
    return quote(value, safe="")


def seconds(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise InputError(f"{name} must be a number of seconds ≥ 0, got {value!r}", field=name)
    return float(value)


def timeout_of(call: Call[Any], timeout: float) -> httpx.Timeout:
    return httpx.Timeout(timeout, read=timeout + call.wait_s)


# ---------------------------------------------------------------------- answers


def parse(call: Call[T], response: httpx.Response) -> T:
    """The call's result from a 2xx ``response``; anything else raises the bank's error."""
    if response.status_code >= 300:
        raise error_of(response)
    if response.status_code == 204:
        return call.parse(None)
    if call.text:
        return call.parse(response.text)
    try:
        data = response.json()
    except ValueError:
        raise StoreError(
            f"{redact_url(str(response.url))} answered {response.status_code} with a body that is not JSON"
        ) from None
    return call.parse(data)


def error_of(response: httpx.Response) -> LessonbankError:
    """The error the embedded bank would raise, from the server's ``{"error": {code, message, …}}``."""
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        # Not our server's answer: a proxy's page, a server of another version.
        return StoreError(
            f"{redact_url(str(response.url))} answered {response.status_code} {response.reason_phrase}"
        )
    cls = ERRORS.get(code, InputError if 400 <= response.status_code < 500 else LessonbankError)
    built = _build(cls, message, error)
    built.args = (message,)  # the server's words, exactly, whatever the constructor would write
    return built


def _build(cls: type[LessonbankError], message: str, error: Mapping[str, Any]) -> LessonbankError:
    field_name, record_id = error.get("field"), error.get("record_id")
    if cls is InputError:
        return InputError(message, field=field_name)
    if cls is NotFoundError:
        found = re.match(r"no (.+?) with id ", message)
        return NotFoundError(found.group(1) if found else "record", str(record_id or ""))
    if cls is ConflictError:
        return ConflictError(message, record_id=record_id)
    if cls is CycleFailedError:
        return CycleFailedError(message, record_id=record_id)
    if cls is BudgetExceededError:
        return BudgetExceededError(message, budget=math.nan, needed=math.nan)  # not sent over HTTP
    if cls is LLMError:
        return LLMError(message, provider="remote")
    if cls is ParseError:
        return ParseError(message)
    return cls(message)


def transport_error(url: str, exc: httpx.HTTPError) -> StoreError:
    """A request that got no answer: the bank the client uses is out of reach, like a store. The URL
    may carry credentials (``http://user:password@host``) and httpx's words may quote it: redacted."""
    shown = redact_url(url)
    if isinstance(exc, httpx.TimeoutException):
        return StoreError(f"the lessonbank server at {shown} did not answer in time ({type(exc).__name__})")
    return StoreError(redact(f"cannot reach the lessonbank server at {shown}: {exc}"))


@contextmanager
def transport_errors(url: str) -> Iterator[None]:
    """Inside it, an httpx error on the way to the server at ``url`` is :func:`transport_error`'s."""
    try:
        yield
    except httpx.HTTPError as exc:
        raise transport_error(url, exc) from exc


# ---------------------------------------------------------------------- requests


def call_of(request: Request[T]) -> Call[T]:
    """``request`` as the REST route of its operation answers it: the path's ids filled from the
    model, the other fields as query parameters (GET, DELETE) or the JSON body. Nothing is validated
    here: the server does, as the embedded bank would (a refused value is its InputError)."""
    operation = BY_REQUEST[type(request)]
    assert operation.rest is not None, f"operation {operation.name} has no REST route"
    method, path = operation.rest
    values = {name: getattr(request, name) for name in type(request).model_fields}
    path = path.removeprefix(_NS)
    for name in operation.path_ids:
        path = path.replace(f"{{{name}}}", segment(values.pop(name), name))
    sent = {name: _jsonable(name, value) for name, value in values.items()}
    return Call(
        method,
        path,
        _parser(operation),
        params=query(**sent) if operation.in_query else {},
        json=None if operation.in_query or not sent else sent,
        text=operation.envelope is None and operation.result is str,
        wait_s=_wait_of(request),
    )


def _jsonable(name: str, value: Any) -> Any:
    try:
        return to_jsonable_python(dict(value) if isinstance(value, Mapping) else value)
    except ValueError as exc:
        raise InputError(f"the {name} cannot be sent as JSON: {exc}"[:300], field=name) from None


def _wait_of(request: Request[Any]) -> float:
    """How long the server may take on purpose to answer ``request``."""
    if isinstance(request, FlushRequest):
        return float(request.timeout)
    if isinstance(request, ConsolidateRequest):
        return CYCLE_TIMEOUT_S if request.wait is True and request.dry_run is False else 0.0
    if isinstance(request, ExpandRequest):
        return EXPAND_WAIT_S
    return 0.0


@cache
def _parser(operation: Operation) -> Callable[[Any], Any]:
    """The operation's answer as its result type (out of its envelope, if the route wraps it)."""
    result = operation.result
    if isinstance(result, str):  # a type that lives above the request models, named by them
        result = ABOVE[result]
    validate = TypeAdapter(result).validate_python
    if operation.envelope is None:
        return validate
    key = operation.envelope
    return lambda data: validate(data[key])


def query(**params: Any) -> dict[str, Any]:
    """Query parameters without the unset ones (httpx would send None as an empty value)."""
    return {key: value for key, value in params.items() if value is not None and value != []}


def import_batches(records: Iterable[Lesson | dict[str, Any]]) -> Iterator[tuple[list[Any], int]]:
    """``records`` as request-sized lists, each with how many records could not be sent as JSON
    (skipped, as the embedded bank skips an invalid record)."""
    batch: list[Any] = []
    size = skipped = 0
    for record in records:
        try:
            item = (
                record.model_dump(mode="json") if isinstance(record, Lesson) else to_jsonable_python(record)
            )
            length = len(json.dumps(item))
        except (TypeError, ValueError):
            skipped += 1
            continue
        if batch and (len(batch) >= IMPORT_BATCH or size + length > IMPORT_BATCH_BYTES):
            yield batch, skipped
            batch, size, skipped = [], 0, 0
        batch.append(item)
        size += length
    if batch or skipped:
        yield batch, skipped


def add_counts(total: dict[str, int], counts: Mapping[str, int]) -> None:
    for key, value in counts.items():
        total[key] = total.get(key, 0) + value


# ---------------------------------------------------------------------- export


def write_export(lines: Iterable[str], dest: ExportTarget, format: str, namespace: str) -> int:
    """Write an export fetched as JSON Lines to ``dest`` in ``format``, rendered here exactly as the
    embedded bank renders it; returns how many lessons it holds."""
    check_format(format)
    written = 0

    def marked() -> Iterator[tuple[Lesson, Mark]]:
        nonlocal written
        for line in lines:
            if not line.strip():
                continue
            record = json.loads(line)
            mark = record.pop(STATE_KEY, None)
            written += 1
            yield Lesson.model_validate(record), mark

    exported = export_lessons(marked(), format, namespace, dest)  # skills, agents-md: the live ones
    return written if exported is None else exported
