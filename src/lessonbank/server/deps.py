"""What a route asks of a request: who sent it (:func:`principal`) and the bank of the namespace it
may act on for an operation (:func:`bank_for`). The role an operation needs comes from the table in
:mod:`lessonbank.operations`; routes of the REST API, the MCP endpoint and the dashboard all go
through these, so access control is written once.

A REST route takes ``bank: Bank``: the bank of its path's ``{namespace}``, once the request's key
holds the role of the route's operation (the route is named after it, see :mod:`.rest`)."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import Depends, Header, HTTPException, Request

from lessonbank.bank import LessonBank
from lessonbank.operations import OPERATIONS, role_of
from lessonbank.server.auth import KeyStore, Principal, token_of
from lessonbank.server.banks import Banks, check_namespace
from lessonbank.server.errors import FORBIDDEN, UNAUTHORIZED, body


async def principal(
    request: Request,
    authorization: str | None = Header(default=None),
    x_api_key: str | None = Header(default=None),
) -> Principal:
    """The request's principal; 401 without a valid key while keys exist. Run on the event loop (the
    key file is read again only when it changed): a thread hop per request costs more than the check."""
    return principal_of(request.app.state.keys, authorization, x_api_key)


def principal_of(keys: KeyStore, authorization: str | None, x_api_key: str | None) -> Principal:
    """The principal of a request's ``Authorization`` and ``X-API-Key`` headers (see :func:`principal`)."""
    found = keys.principal(token_of(authorization, x_api_key))
    if found is None:
        raise HTTPException(
            status_code=401,
            detail=body(
                UNAUTHORIZED, "a valid API key is required (Authorization: Bearer lbk_… or X-API-Key)"
            ),
            headers={"WWW-Authenticate": "Bearer"},
        )
    return found


def authorize(who: Principal, namespace: str, operation: str) -> None:
    """403 unless ``who`` may do ``operation`` (a name in :data:`~lessonbank.operations.OPERATIONS`)
    on ``namespace``."""
    check_namespace(namespace)
    role = role_of(operation)
    if not who.may(namespace, role):
        raise HTTPException(
            status_code=403,
            detail=body(
                FORBIDDEN,
                f"key {who.name!r} may not {role} namespace {namespace!r} "
                f"({operation.replace('_', ' ')} needs the {role} role)",
            ),
        )


def bank_for(request: Request, who: Principal, namespace: str, operation: str) -> LessonBank:
    """The bank of ``namespace`` once ``who`` may do ``operation`` on it."""
    authorize(who, namespace, operation)
    banks: Banks = request.app.state.banks
    return banks.get(namespace)


Who = Annotated[Principal, Depends(principal)]


async def _route_bank(request: Request, namespace: str, who: Who) -> LessonBank:
    name = getattr(request.scope.get("route"), "name", None)
    if name not in OPERATIONS:  # a route outside the table: a bug, so fail closed
        raise HTTPException(status_code=403, detail=body(FORBIDDEN, "this route names no bank operation"))
    return await bank_of(request.app.state.banks, who, namespace, name)


async def bank_of(banks: Banks, who: Principal, namespace: str, operation: str) -> LessonBank:
    """The bank of ``namespace`` once ``who`` may do ``operation`` on it, from the event loop: an
    open bank is taken on the loop; opening one (migrations, a first connection) is not."""
    authorize(who, namespace, operation)
    opened = banks.opened(namespace)
    return opened if opened is not None else await anyio.to_thread.run_sync(banks.get, namespace)


# A route's parameter of this type gets the bank of its path's ``{namespace}`` for its operation.
Bank = Annotated[LessonBank, Depends(_route_bank)]
