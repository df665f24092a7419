"""``LessonBankStore``: a LangGraph ``BaseStore`` whose items are lessons of one bank namespace.

Invariants (see :mod:`.items` for how an item is kept):

- One item, one lesson: put writes it (a new item through the store's bulk import, an existing one
  overwritten in place, keeping its creation time), ``value=None`` deletes it. Reads by id.
- ``get`` returns the value exactly as put, but for secrets, which are redacted before anything is
  stored, as every lessonbank write does (a key named like ``api_key`` is masked, ``sk-…`` too).
- Items live in the bank's namespace: every LangGraph namespace of one store is in one lessonbank
  namespace, so ``context()`` and ``recall()`` of that bank see them. Archived, superseded and
  expired lessons are not items any more; a quarantined one (its text reads as instructions to a
  model) is still returned by ``get`` and ``search`` but never ranked by a query nor injected.
- ``search`` without a query: newest update first (then namespace, key), after the filter. With a
  query: the items lessonbank's recall ranks (lexical, hybrid with an embedder), best first, with
  their score, then the other items under the prefix in the order above with no score, as
  LangGraph's in-memory store fills a page with unembedded items.
- A batch answers its reads from the state before the batch, then applies its puts (the last put
  of a key wins), as LangGraph's in-memory store does.
- TTL (minutes, from the last write or, unless ``refresh_ttl=False``, read): the lesson's
  ``expires_at``, on the bank's clock. Expired items are never returned; :meth:`sweep` deletes them.
- Not atomic across processes: two processes putting the same new key at once may leave two lessons
  for it (reads then answer the newer one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from lessonbank.errors import InputError
from lessonbank.integrations.langgraph import items
from lessonbank.integrations.langgraph.items import Namespace
from lessonbank.lessons import ITEM_KEY
from lessonbank.models import Hit, Lesson
from lessonbank.ports import LessonQuery, WriteResult
from lessonbank.redact import redact_value
from lessonbank.services.writing import guarded

if TYPE_CHECKING:
    from lessonbank.services.wiring import Services


VISIBLE = ("active", "pending", "quarantined")  # archived: a person removed it from use
PAGE = 1_000  # lessons read per store call while scanning


class Bank(Protocol):
    """What the store uses of a bank: ``LessonBank`` or ``AsyncLessonBank`` (both have these)."""

    services: Services

    @property
    def namespace(self) -> str: ...


class LessonBankStore(BaseStore):
    """A LangGraph store over a lessonbank bank: ``StateGraph(...).compile(store=LessonBankStore(bank))``.

    ``index``: the value fields whose text a lesson holds (what a query ranks and a context block
    shows), in LangGraph's path syntax (``"text"``, ``"memory.content"``, ``"notes[*]"``); default
    ``["$"]``, every string in the value. ``ttl``: LangGraph's TTL settings (``default_ttl`` minutes,
    ``refresh_on_read``). Time is the bank's clock.
    """

    supports_ttl = True

    def __init__(
        self, bank: Bank, *, index: Sequence[str] | None = None, ttl: TTLConfig | None = None
    ) -> None:
        fields = ["$"] if index is None else list(index)
        if isinstance(index, str) or not fields or not all(isinstance(f, str) and f for f in fields):
            raise InputError(f"index is a list of field paths such as ['text'], got {index!r}", field="index")
        self.services: Services = bank.services
        self.namespace = bank.namespace
        self.fields = fields
        self.ttl_config = ttl

    # ------------------------------------------------------------------------------- the batch

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results: list[Result] = []
        puts: dict[tuple[Namespace, str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                items.check_namespace(op.namespace, root=True)
                puts[(op.namespace, self._key(op.key))] = op
                results.append(None)
            else:
                raise InputError(f"unknown store operation {type(op).__name__}", field="op")
        for op in puts.values():
            self._put(op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The bank's services are synchronous (the async bank runs them in a thread too).
        return await asyncio.to_thread(self.batch, list(ops))

    def sweep(self) -> int:
        """Delete the bank namespace's expired lessons (expired items among them); returns how many."""
        return self.services.scope.store.purge_expired(self.namespace)

    # --------------------------------------------------------------------------------- reads

    def _now(self) -> float:
        return self.services.scope.clock()

    def _visible(self, lesson: Lesson, now: float) -> dict[str, Any] | None:
        found = items.payload(lesson)
        if found is None or lesson.status not in VISIBLE or lesson.superseded_by is not None:
            return None
        if lesson.expires_at is not None and lesson.expires_at.timestamp() <= now:
            return None
        return found

    def _lesson(self, namespace: Namespace, key: str) -> Lesson | None:
        lesson_id = items.lesson_id(self.namespace, namespace, key)
        found = self.services.scope.store.get_lessons([lesson_id], namespace=self.namespace)
        return found[0] if found else None

    def _get(self, op: GetOp) -> Item | None:
        namespace = items.check_namespace(op.namespace, root=False)
        lesson = self._lesson(namespace, self._key(op.key))
        now = self._now()
        if lesson is None or (found := self._visible(lesson, now)) is None:
            return None
        if op.refresh_ttl:
            self._refresh([lesson], now)
        return _item(found)

    def _scan(self, prefix: Namespace) -> Iterator[tuple[Lesson, dict[str, Any]]]:
        """Every item under ``prefix`` (lessons read a page at a time, newest first)."""
        store, now = self.services.scope.store, self._now()
        query = LessonQuery(self.namespace, tags=items.search_tags(prefix), statuses=VISIBLE)
        offset = 0
        while True:
            page = store.list_lessons(query, limit=PAGE, offset=offset)
            for lesson in page:
                found = self._visible(lesson, now)
                if found is not None and items.item_namespace(found)[: len(prefix)] == prefix:
                    yield lesson, found
            if len(page) < PAGE:
                return
            offset += PAGE

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = items.check_namespace(op.namespace_prefix, root=False)
        _check_page(op.limit, op.offset)
        matching = [
            (lesson, found)
            for lesson, found in self._scan(prefix)
            if items.matches_filter(found["value"], op.filter)
        ]
        matching.sort(key=lambda pair: _newest_first(pair[1]))
        scores: dict[str, float] = {}
        if op.query is not None and op.query.strip() and matching:
            ranked = {lesson.id for lesson, found in matching if found.get("index") is not False}
            scores = self._ranks(op.query, prefix, ranked, op.offset + op.limit)
            matching.sort(key=lambda pair: pair[0].id not in scores)  # stable: ranked first, rest kept
            matching[: len(scores)] = sorted(matching[: len(scores)], key=lambda pair: -scores[pair[0].id])
        page = matching[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            self._refresh([lesson for lesson, _ in page], self._now())
        return [_search_item(found, scores.get(lesson.id)) for lesson, found in page]

    def _ranks(self, query: str, prefix: Namespace, wanted: set[str], needed: int) -> dict[str, float]:
        """Recall's scores for the lessons of ``wanted`` it ranks, at least ``needed`` of them when
        it ranks that many (recall is asked for more until then)."""
        context = self.services.context
        filters = context.query(tags=items.search_tags(prefix))
        k = max(needed, 10)
        while True:
            hits: list[Hit] = context.recall(query, k, filters)
            scores = {hit.lesson.id: hit.score for hit in hits if hit.lesson.id in wanted}
            if len(scores) >= needed or len(hits) < k or len(scores) == len(wanted):
                return scores
            k *= 4

    def _list_namespaces(self, op: ListNamespacesOp) -> list[Namespace]:
        _check_page(op.limit, op.offset)
        if op.max_depth is not None and (isinstance(op.max_depth, bool) or op.max_depth < 1):
            raise InputError(f"max_depth is a whole number ≥ 1, got {op.max_depth!r}", field="max_depth")
        conditions = []
        for condition in op.match_conditions or ():
            items.check_namespace(tuple(condition.path), root=False)
            conditions.append((condition.match_type, tuple(condition.path)))
        return items.listed_namespaces(
            (items.item_namespace(found) for _, found in self._scan(())),
            conditions,
            max_depth=op.max_depth,
            limit=op.limit,
            offset=op.offset,
        )

    def _refresh(self, lessons: Sequence[Lesson], now: float) -> None:
        """Move the deadline of items with a TTL to ``ttl`` minutes from now (a read uses them)."""
        store = self.services.scope.store
        ids = [lesson.id for lesson in lessons if _ttl(lesson) is not None]
        if not ids:
            return
        # Read again: a query's recall has just counted a use on them, which must not be written over.
        for lesson in store.get_lessons(ids, namespace=self.namespace):
            minutes = _ttl(lesson)
            if minutes is not None:
                store.update_lesson(lesson.model_copy(update={"expires_at": _deadline(now, minutes)}))

    # --------------------------------------------------------------------------------- writes

    def _put(self, op: PutOp) -> None:
        namespace, key = op.namespace, self._key(op.key)
        store = self.services.scope.store
        lesson_id = items.lesson_id(self.namespace, namespace, key)
        if op.value is None:
            store.delete_lesson(self.namespace, lesson_id)
            return
        value = redact_value(items.check_value(op.value))
        minutes = items.check_ttl(op.ttl)
        if op.index is not None and op.index is not False and not isinstance(op.index, list):
            raise InputError(
                f"index is False, None or a list of field paths, got {op.index!r}", field="index"
            )
        now = self._now()
        stamp = datetime.fromtimestamp(now, UTC)
        previous = self._lesson(namespace, key)
        kept = self._visible(previous, now) if previous is not None else None
        created = kept["created_at"] if kept is not None else stamp.isoformat()
        fields = self.fields if op.index is None or op.index is False else op.index
        record = {
            "id": lesson_id,
            "namespace": self.namespace,
            "kind": "lesson",
            "content": items.item_text(key, value, fields),
            "tags": items.item_tags(namespace),
            "source": "manual",
            "expires_at": None if minutes is None else _deadline(now, minutes),
            "created_at": previous.created_at if previous is not None else stamp,
            "updated_at": stamp,
            "metadata": {
                ITEM_KEY: items.address(namespace, key),
                items.PAYLOAD_KEY: {
                    "namespace": list(namespace),
                    "key": key,
                    "value": value,
                    "ttl": minutes,
                    "index": op.index,
                    "created_at": created,
                    "updated_at": stamp.isoformat(),
                },
            },
        }
        try:
            lesson = guarded(record)  # secrets in the text redacted; instruction-like text quarantined
        except ValueError as exc:
            raise InputError(f"item {key!r} cannot be stored: {exc}", field="value") from None
        if previous is not None:
            store.update_lesson(lesson.model_copy(update=_kept(previous, lesson, alive=kept is not None)))
        else:
            store.import_lessons([lesson])
        self.services.intake.embed_written([WriteResult(lesson, "added")])

    @staticmethod
    def _key(key: object) -> str:
        if not isinstance(key, str) or not key:
            raise InputError(f"an item's key is a non-empty string, got {key!r}", field="key")
        return key


def _check_page(limit: object, offset: object) -> None:
    for value, name in ((limit, "limit"), (offset, "offset")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"{name} must be a whole number ≥ 0, got {value!r}", field=name)


def _deadline(now: float, minutes: float) -> datetime:
    return datetime.fromtimestamp(now, UTC) + timedelta(minutes=minutes)


def _newest_first(found: dict[str, Any]) -> tuple[float, Namespace, str]:
    return (
        -datetime.fromisoformat(found["updated_at"]).timestamp(),
        items.item_namespace(found),
        found["key"],
    )


def _fields(found: dict[str, Any]) -> dict[str, Any]:
    """What an ``Item`` and a ``SearchItem`` hold of a found item."""
    created, updated = items.times(found)
    return {
        "namespace": items.item_namespace(found),
        "key": found["key"],
        "value": found["value"],
        "created_at": created,
        "updated_at": updated,
    }


def _item(found: dict[str, Any]) -> Item:
    return Item(**_fields(found))


def _search_item(found: dict[str, Any], score: float | None) -> SearchItem:
    return SearchItem(**_fields(found), score=score)


def _ttl(lesson: Lesson) -> float | None:
    minutes = (items.payload(lesson) or {}).get("ttl")
    return float(minutes) if isinstance(minutes, int | float) and not isinstance(minutes, bool) else None


def _kept(previous: Lesson, new: Lesson, *, alive: bool) -> dict[str, Any]:
    """What an overwrite keeps of the lesson it replaces: a person's pin and importance; and, when
    the text is the same, what using it taught (uses, credit, confidence)."""
    if not alive:
        return {}
    fields = ["pinned", "importance"]
    if previous.content == new.content:
        fields += ["access_count", "last_accessed", "helpful", "harmful", "confidence"]
    return {name: getattr(previous, name) for name in fields}
