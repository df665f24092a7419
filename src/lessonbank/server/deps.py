"""What a route asks of a request: who sent it (:func:`principal`) and the bank of the namespace it
may act on in a role (:func:`bank_for`). Routes of the REST API, the MCP endpoint and the dashboard
all go through these, so access control is written once."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from lessonbank.bank import LessonBank
from lessonbank.server.auth import KeyStore, Principal, Role, token_of
from lessonbank.server.banks import Banks, check_namespace
from lessonbank.server.errors import FORBIDDEN, UNAUTHORIZED, body


def principal(
    request: Request,
    authorization: str | None = Header(default=None),
    x_api_key: str | None = Header(default=None),
) -> Principal:
    """The request's principal; 401 without a valid key while keys exist."""
    keys: KeyStore = request.app.state.keys
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


def allowed(who: Principal, namespace: str, role: Role) -> None:
    """403 unless ``who`` may act as ``role`` on ``namespace``."""
    check_namespace(namespace)
    if not who.may(namespace, role):
        raise HTTPException(
            status_code=403,
            detail=body(FORBIDDEN, f"key {who.name!r} may not {role} namespace {namespace!r}"),
        )


def bank_for(request: Request, who: Principal, namespace: str, role: Role) -> LessonBank:
    """The bank of ``namespace`` once ``who`` may act on it as ``role``."""
    allowed(who, namespace, role)
    banks: Banks = request.app.state.banks
    return banks.get(namespace)


Who = Annotated[Principal, Depends(principal)]


def reader(request: Request, namespace: str, who: Who) -> LessonBank:
    return bank_for(request, who, namespace, "read")


def writer(request: Request, namespace: str, who: Who) -> LessonBank:
    return bank_for(request, who, namespace, "write")


def admin(request: Request, namespace: str, who: Who) -> LessonBank:
    return bank_for(request, who, namespace, "admin")


# A route's parameter of one of these types gets the bank of its path's ``{namespace}``.
ReadBank = Annotated[LessonBank, Depends(reader)]
WriteBank = Annotated[LessonBank, Depends(writer)]
AdminBank = Annotated[LessonBank, Depends(admin)]
