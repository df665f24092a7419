"""Scopes: namespaces apart by id, and who a lesson serves within a namespace.

Who a lesson serves (:func:`serves`), the one rule of recall, listing and context: a lesson
without an agent serves every agent, one with an agent serves that agent; likewise for the task
type and the goal (:data:`SHARED_SCOPE_FIELDS`). A filter on an agent therefore returns the
agent's own lessons and the shared ones, as the context's learned rules always did.

Namespaces apart by id: the rules every store applies to ids and reads by id.

- An id is global to a database, so an id a caller chose (an episode's, a lesson's, a job's) that
  another namespace already holds is refused with an :class:`~lessonbank.errors.InputError` on
  ``id``, before anything is written; the same id again in its own namespace is the store's
  ordinary repeat (an episode: a no-op). The error never names the other namespace.
- A read by id given a ``namespace`` answers from that namespace only: another namespace's record
  is not found. ``namespace=None`` reads any namespace (operators, workers holding a job).
"""

from __future__ import annotations

from lessonbank.errors import InputError

# The scope fields a lesson may leave empty to serve every value (see ``serves``).
SHARED_SCOPE_FIELDS: tuple[str, ...] = ("agent", "task_type", "goal_id")


def serves(wanted: str | None, value: str | None) -> bool:
    """Whether a lesson whose scope field holds ``value`` serves a request for ``wanted``: yes when
    nothing is wanted, when the lesson leaves the field empty (shared), or when they are equal."""
    return wanted is None or not value or value == wanted


def check_id_free(kind: str, record_id: str, namespace: str, holder: str | None) -> None:
    """Refuse ``record_id`` for a ``kind`` of ``namespace`` when namespace ``holder`` holds it."""
    if holder is not None and holder != namespace:
        raise InputError(
            f"{kind} id {record_id!r} is already used in another namespace; choose another id, "
            "or leave it out to get a fresh one",
            field="id",
        )


def visible(asked: str | None, namespace: str | None) -> bool:
    """Whether a record of ``namespace`` answers a read asked about namespace ``asked`` (None: any)."""
    return asked is None or namespace == asked
