"""Errors over HTTP: every failure is JSON with a stable code, never an HTML page or a bare 500.

    {"error": {"code": "not_found", "message": "no lesson with id 'les_x'", "field": null}}

The codes (and statuses) follow lessonbank's error classes, so a client can branch on them and
:class:`lessonbank.remote.RemoteBank` raises the same class the embedded bank would.
"""

from __future__ import annotations

import logging
from typing import Any

from lessonbank import errors
from lessonbank.redact import redact

log = logging.getLogger("lessonbank.server")

# (class, code, HTTP status), most specific first: the first match names a raised error.
CODES: tuple[tuple[type[errors.LessonbankError], str, int], ...] = (
    (errors.InputError, "invalid_input", 422),
    (errors.NotFoundError, "not_found", 404),
    (errors.ConflictError, "conflict", 409),
    (errors.BudgetExceededError, "budget_exceeded", 429),
    (errors.CycleFailedError, "cycle_failed", 500),
    (errors.ConfigError, "not_configured", 503),
    (errors.LLMError, "llm_error", 502),
    (errors.ParseError, "parse_error", 502),
    (errors.StoreError, "store_error", 503),
)
UNAUTHORIZED = "unauthorized"  # no key, or an unknown or revoked one: 401
FORBIDDEN = "forbidden"  # the key may not do this here: 403
TOO_LARGE = "too_large"  # a request body over the limit: 413
INTERNAL = "internal"  # a bug: 500, logged with its traceback


def code_of(exc: BaseException) -> tuple[str, int]:
    """The stable code and HTTP status of ``exc``."""
    for cls, code, status in CODES:
        if isinstance(exc, cls):
            return code, status
    if isinstance(exc, errors.LessonbankError):
        return "error", 500
    return INTERNAL, 500


def body(code: str, message: str, *, field: str | None = None, **extra: Any) -> dict[str, Any]:
    """The JSON body of an error response; the message is redacted like every log line."""
    return {"error": {"code": code, "message": redact(message), "field": field, **extra}}


def error_body(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) of ``exc``."""
    code, status = code_of(exc)
    if code == INTERNAL:
        log.error("internal error serving a request", exc_info=exc)
        return status, body(code, "internal error; the server's log has the details")
    extra: dict[str, Any] = {}
    record_id = getattr(exc, "record_id", None)
    if record_id is not None:
        extra["record_id"] = record_id
    return status, body(code, str(exc), field=getattr(exc, "field", None), **extra)
