"""What the REST API reads and answers around the request models of :mod:`lessonbank.requests`.

A route reads its operation's request model (the table in :mod:`lessonbank.operations` names it):
the path's ids, then the other fields as the JSON body (:func:`body_of`: the model itself when the
path names no id, else the model less those ids) or, for GET and DELETE, as query parameters
(:func:`query_of`). The limits are the model's. A bare count, flag or text is answered in a small
object (:data:`ENVELOPES`), as the operation's ``envelope`` says.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from lessonbank.operations import Operation


class Count(BaseModel):
    """How many records an operation touched."""

    count: int


class Done(BaseModel):
    done: bool


class CoreMemory(BaseModel):
    text: str


ENVELOPES: dict[str, type[BaseModel]] = {"count": Count, "done": Done, "text": CoreMemory}


def _part(operation: Operation, suffix: str, extra: Any) -> type[BaseModel] | None:
    model = operation.request
    assert model is not None, f"operation {operation.name} has no request model"
    ids = operation.path_ids
    fields = {name: field for name, field in model.model_fields.items() if name not in ids}
    if not fields:
        return None
    if not ids and model.model_config.get("extra") == extra:
        return model
    name = model.__name__.removesuffix("Request") + suffix
    config = ConfigDict(extra=extra)
    return create_model(name, __config__=config, **{n: (f.annotation, f) for n, f in fields.items()})  # type: ignore[call-overload,no-any-return]


@cache
def body_of(operation: Operation) -> type[BaseModel] | None:
    """The JSON body of ``operation``'s route: its request model, less the ids the path names (an
    unknown field is refused: a client's typo or a newer client)."""
    return _part(operation, "Body", "forbid")


@cache
def query_of(operation: Operation) -> type[BaseModel] | None:
    """The query parameters of ``operation``'s GET or DELETE route (an unknown one is ignored, as
    query strings go)."""
    return _part(operation, "Query", "ignore")
