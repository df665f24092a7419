"""How a LangGraph store item is kept as a lesson: pure functions of items and lessons, no I/O.

Identity: an item is one lesson of the bank's namespace, its id derived from the bank namespace, the
item's LangGraph namespace and its key (:func:`lesson_id`), so a get is a read by id. Its address
(namespace and key) is in ``metadata["item"]``, which scopes its content hash
(:func:`lessonbank.lessons.hash_scope`): two keys holding the same text stay two lessons.

What is kept where:

- ``content``: the item's text, read from the fields the store indexes (default: every string in
  the value), cut to the lesson limit; what recall ranks and a context block renders.
- ``metadata["langgraph"]``: the LangGraph namespace, key, the value as JSON (secrets redacted, as
  every lessonbank write), the TTL in minutes, the index setting, and the item's creation and
  update times; ``get`` returns this value.
- ``tags``: ``langgraph`` and one tag per namespace prefix up to :data:`PREFIX_DEPTH` labels (a hash
  of the prefix, since labels are case-sensitive and tags are not), so a search under a prefix lists
  only the lessons under it.
- ``expires_at``: the TTL's deadline, so expired items are neither listed nor recalled by any store.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from lessonbank.errors import InputError
from lessonbank.lessons import ITEM_KEY
from lessonbank.models import LESSON_MAX_CHARS, Lesson, truncated

ITEM_TAG = "langgraph"
PAYLOAD_KEY = "langgraph"
PREFIX_DEPTH = 16  # prefix tags per item; MAX_TAGS is 32, and deeper prefixes are checked in Python
WHOLE_VALUE = "$"

Namespace = tuple[str, ...]


def address(namespace: Namespace, key: str) -> str:
    """The item's address as one string (JSON: no two namespace/key pairs give the same)."""
    return json.dumps([list(namespace), key], ensure_ascii=False, separators=(",", ":"))


def lesson_id(bank_namespace: str, namespace: Namespace, key: str) -> str:
    """The id of the lesson holding the item (the bank namespace is part of it: ids are global)."""
    digest = hashlib.sha256(f"{bank_namespace}\x1f{address(namespace, key)}".encode()).hexdigest()
    return f"les_lg{digest[:32]}"


def prefix_tag(prefix: Namespace) -> str:
    digest = hashlib.sha256(json.dumps(list(prefix), ensure_ascii=False).encode()).hexdigest()
    return f"lg:{digest[:16]}"


def item_tags(namespace: Namespace) -> list[str]:
    return [
        ITEM_TAG,
        *(prefix_tag(namespace[:depth]) for depth in range(1, min(len(namespace), PREFIX_DEPTH) + 1)),
    ]


def search_tags(prefix: Namespace) -> list[str]:
    """The tags every item under ``prefix`` carries."""
    return [ITEM_TAG, prefix_tag(prefix[:PREFIX_DEPTH])] if prefix else [ITEM_TAG]


def check_namespace(namespace: object, *, root: bool) -> Namespace:
    """A namespace as LangGraph allows it (labels non-empty strings without ``.``); ``root``: also
    non-empty and not under ``langgraph`` (what an item may be put in)."""
    if not isinstance(namespace, tuple) or not all(isinstance(label, str) and label for label in namespace):
        raise InputError(f"a namespace is a tuple of non-empty strings, got {namespace!r}", field="namespace")
    if any("." in label for label in namespace):
        raise InputError(f"namespace labels cannot contain periods: {namespace!r}", field="namespace")
    if root and (not namespace or namespace[0] == "langgraph"):
        raise InputError(
            f"an item's namespace is not empty and does not start with 'langgraph': {namespace!r}",
            field="namespace",
        )
    return namespace


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def item_text(key: str, value: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The text a lesson holds for an item: the strings at ``fields`` (``$``: every string in the
    value), else the value as JSON, else the key; cut to the lesson limit."""
    from langgraph.store.base.embed import get_text_at_path, tokenize_path

    parts: list[str] = []
    for path in fields:
        if path == WHOLE_VALUE:
            parts.extend(_strings(value))
        else:
            parts.extend(
                text for text in get_text_at_path(dict(value), tokenize_path(path)) if isinstance(text, str)
            )
    text = "\n".join(part.strip() for part in parts if part.strip())
    if not text:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True) if value else key
    return truncated(text, LESSON_MAX_CHARS)


def check_value(value: object) -> dict[str, Any]:
    """The value as a JSON object (a copy), or InputError naming what is wrong."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InputError(
            f"an item's value is a mapping with string keys, got {type(value).__name__}", field="value"
        )
    try:
        copied: dict[str, Any] = json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InputError(f"an item's value must be JSON-serializable: {exc}", field="value") from None
    return copied


def check_ttl(ttl: object) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl) or ttl <= 0:
        raise InputError(f"ttl is a number of minutes > 0 or None, got {ttl!r}", field="ttl")
    return float(ttl)


def payload(lesson: Lesson) -> dict[str, Any] | None:
    """The item a lesson holds, or None when it is not an item."""
    found = lesson.metadata.get(PAYLOAD_KEY)
    if not isinstance(found, dict) or lesson.metadata.get(ITEM_KEY) is None:
        return None
    return found


def item_namespace(found: Mapping[str, Any]) -> Namespace:
    return tuple(found["namespace"])


def times(found: Mapping[str, Any]) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(found["created_at"]), datetime.fromisoformat(found["updated_at"])


# ------------------------------------------------------------------------------------------ filters


def matches_filter(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` passes a search filter, as LangGraph's stores read one: each field equal,
    a nested mapping compared field by field, a list element by element, and the operators
    ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` (a comparison with a missing or
    non-numeric field is false, as in PostgreSQL's JSONB)."""
    if not wanted:
        return True
    return all(_compare(value.get(key), expected) for key, expected in wanted.items())


def _compare(actual: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in expected):
            return all(_operator(actual, op, operand) for op, operand in expected.items())
        return isinstance(actual, Mapping) and all(_compare(actual.get(k), v) for k, v in expected.items())
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(expected)
            and all(_compare(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return bool(actual == expected)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


_ORDER = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(actual == operand)
    if op == "$ne":
        return bool(actual != operand)
    if op not in _ORDER:
        raise InputError(
            f"unsupported filter operator {op!r}; use $eq, $ne, $gt, $gte, $lt or $lte", field="filter"
        )
    left, right = _number(actual), _number(operand)
    return left is not None and right is not None and bool(_ORDER[op](left, right))


# --------------------------------------------------------------------------------------- namespaces


def namespace_matches(match_type: str, path: Sequence[str], namespace: Namespace) -> bool:
    """Whether ``namespace`` matches a ``prefix`` or ``suffix`` condition (``*`` matches any label)."""
    if match_type not in ("prefix", "suffix"):
        raise InputError(f"unsupported match type {match_type!r}; use prefix or suffix", field="match_type")
    if len(namespace) < len(path):
        return False
    labels = namespace if match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want == "*" or want == have for want, have in zip(path, labels, strict=False))


def listed_namespaces(
    namespaces: Iterable[Namespace],
    conditions: Sequence[tuple[str, Sequence[str]]],
    *,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[Namespace]:
    """The namespaces a list-namespaces call answers: matching every condition, cut to
    ``max_depth`` labels (duplicates then folded), sorted, then the page."""
    kept = {ns for ns in namespaces if all(namespace_matches(kind, path, ns) for kind, path in conditions)}
    if max_depth is not None:
        kept = {ns[:max_depth] for ns in kept}
    return sorted(kept)[offset : offset + limit]
