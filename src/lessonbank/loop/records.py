"""Loop records: every iteration of a loop is an Episode whose metadata holds its AIWG record.

Identity: an iteration is (namespace, ``loop_id``, ``iteration``); its record is
``episode.metadata["reflexion"]``, valid against the AIWG reflection-memory schema, and
``episode.metadata["reflexion_run"]`` holds what the schema has no place for (loop status,
reflection model, tokens, cost, low-quality indicators, lessons written and recalled).

Reading is a scan of the namespace's episodes (the Store protocol has no loop index), in
memory: fine for thousands of iterations; loops are ordered by their first iteration's time
and iterations by the integer ``iteration``, never by text.

Files: ``DIR/<loop-id>/NNN.json``, zero-padded so a plain directory listing sorts, numbered from
001 as seed 001 lays them out (``.aiwg/ralph/reflections/<loop-id>/001.json`` is iteration 0).
One numbering for both writers: a loop given ``records_dir`` writes each record as it runs
(:func:`write_live_record`) and :func:`export_aiwg` writes them afterwards, so exporting into the
live folder rewrites the same files. Every file is written whole (a temporary file renamed into
place), so a reader never sees half a record.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lessonbank.errors import InputError, NotFoundError
from lessonbank.models import Episode

if TYPE_CHECKING:
    from lessonbank.services.scope import Scoped

LOOP_ID = re.compile(r"^ralph-[a-z0-9-]+$")
SCAN_LIMIT = 1_000_000
ACTION_TYPES = (
    "code_modification",
    "file_creation",
    "file_deletion",
    "test_execution",
    "command_execution",
    "api_call",
    "other",
)


def check_loop_id(loop_id: str) -> str:
    if not isinstance(loop_id, str) or not LOOP_ID.match(loop_id):
        raise InputError(
            f"loop id {loop_id!r} must match ^ralph-[a-z0-9-]+$ (lowercase letters, digits, dashes), "
            "e.g. 'ralph-fix-parser'",
            field="loop_id",
        )
    return loop_id


def new_loop_id(task: str, *, suffix: str) -> str:
    """``ralph-<task slug>-<suffix>``: readable, valid against the schema's pattern."""
    slug = "-".join(re.sub(r"[^a-z0-9]+", " ", task.lower()).split()[:6])[:40].strip("-") or "task"
    return check_loop_id(f"ralph-{slug}-{re.sub(r'[^a-z0-9]+', '', suffix.lower())[:10] or 'x'}")


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def schema_action(action: str | dict[str, Any], index: int) -> dict[str, Any]:
    """An actor's action in the schema's shape: ``type`` from its enum, a ``description``."""
    if isinstance(action, str):
        return {"type": "other", "description": action or f"action {index}"}
    out: dict[str, Any] = {}
    kind = str(action.get("type", "other"))
    out["type"] = kind if kind in ACTION_TYPES else "other"
    out["description"] = str(action.get("description") or action.get("command") or kind or f"action {index}")
    if isinstance(action.get("file_path"), str):
        out["file_path"] = action["file_path"]
    changes = action.get("changes")
    if isinstance(changes, dict):
        out["changes"] = {
            key: changes[key]
            for key in ("additions", "deletions", "diff")
            if isinstance(changes.get(key), int if key != "diff" else str)
            and not isinstance(changes.get(key), bool)
        }
    for key in ("command", "timestamp"):
        if isinstance(action.get(key), str):
            out[key] = action[key]
    return out


def performance_delta(previous: dict[str, Any] | None, current: dict[str, Any]) -> dict[str, Any] | None:
    """Reward and error-count change from the previous iteration's evaluator output."""
    if previous is None:
        return None
    reward_change = round(float(current["reward_signal"]) - float(previous["reward_signal"]), 4)
    error_change = len(current.get("errors", [])) - len(previous.get("errors", []))
    return {
        "reward_change": reward_change,
        "error_count_change": error_change,
        "is_improvement": reward_change > 0 or (reward_change == 0 and error_change < 0),
    }


# --------------------------------------------------------------------------- reading


def _loop_episodes(bank: Scoped, *, recorded_by_hand: bool = False) -> list[Episode]:
    """Iterations a ReflexionLoop recorded (newest first); with ``recorded_by_hand``, also loop
    episodes an agent recorded itself, whose reflexion ran in the background worker."""
    found = bank.store.recent_episodes(bank.namespace, limit=SCAN_LIMIT)
    return [
        episode
        for episode, _ in found
        if episode.loop_id and ("reflexion" in episode.metadata or recorded_by_hand)
    ]


def _record_of(bank: Scoped, episode: Episode) -> dict[str, Any] | None:
    """The AIWG record of an iteration, or for a hand-recorded one a partial record built from its
    background reflexion reflection (None when it has none yet)."""
    if "reflexion" in episode.metadata:
        return dict(episode.metadata["reflexion"])
    for reflection in bank.store.reflections_for_episode(episode.id):
        if reflection.reflector == "reflexion" and reflection.status == "ok":
            return {
                "loop_id": episode.loop_id,
                "iteration": episode.iteration or 0,
                "timestamp": iso(reflection.created_at),
                "task_description": episode.task,
                "self_reflection": reflection.parsed.get("self_reflection", {}),
            }
    return None


def loops(bank: Scoped) -> dict[str, list[Episode]]:
    """Every loop of the namespace: loop id → its iterations in order (oldest loop first)."""
    grouped: dict[str, list[Episode]] = {}
    for episode in _loop_episodes(bank):
        grouped.setdefault(str(episode.loop_id), []).append(episode)
    for iterations in grouped.values():
        iterations.sort(key=lambda episode: int(episode.iteration or 0))
    return dict(sorted(grouped.items(), key=lambda item: item[1][0].created_at))


def loop_records(bank: Scoped, loop_id: str) -> list[dict[str, Any]]:
    """The AIWG records of one loop, in iteration order; NotFoundError when it has none."""
    check_loop_id(loop_id)
    iterations = loops(bank).get(loop_id)
    if not iterations:
        raise NotFoundError("loop", loop_id)
    return [dict(episode.metadata["reflexion"]) for episode in iterations]


def export_aiwg(bank: Scoped, loop_id: str, directory: str | Path) -> list[Path]:
    """Write ``directory/<loop-id>/001.json`` … one record per iteration (iteration 0 → ``001.json``,
    as a running loop writes them); returns the paths."""
    return [write_live_record(directory, record) for record in loop_records(bank, loop_id)]


def record_file_name(iteration: int) -> str:
    """The file an iteration's record is written to: ``001.json`` for iteration 0."""
    return f"{int(iteration) + 1:03d}.json"


def write_live_record(directory: str | os.PathLike[str], record: dict[str, Any]) -> Path:
    """Write one iteration's record as seed 001 lays them out: ``directory/<loop-id>/NNN.json``,
    numbered from 001 (iteration 0 → ``001.json``)."""
    target = Path(directory) / check_loop_id(str(record["loop_id"]))
    target.mkdir(parents=True, exist_ok=True)
    return _write_json(target / record_file_name(int(record["iteration"])), record)


def _write_json(path: Path, record: dict[str, Any]) -> Path:
    """``record`` as indented JSON at ``path``, written whole: a temporary file renamed into place."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", "utf-8")
    temporary.replace(path)
    return path


def search_reflections(
    bank: Scoped,
    *,
    failure_category: str | Sequence[str] | None = None,
    min_confidence: float = 0.0,
    keywords: Sequence[str] = (),
    limit: int = 10,
) -> list[dict[str, Any]]:
    """Seed 001's ``searchReflections``: AIWG records of failed iterations, newest first.

    ``failure_category`` is one category or a list (any matches); ``keywords`` match, case
    insensitive, any of the task, the reflection text, root cause, insights and lessons.
    """
    categories = [failure_category] if isinstance(failure_category, str) else list(failure_category or [])
    if isinstance(keywords, str):
        keywords = [keywords]
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InputError(f"limit must be a whole number ≥ 0, got {limit!r}", field="limit")
    if isinstance(min_confidence, bool) or not isinstance(min_confidence, int | float):
        raise InputError(f"min_confidence must be a number, got {min_confidence!r}", field="min_confidence")
    wanted = [word.lower() for word in keywords if isinstance(word, str) and word.strip()]
    out: list[dict[str, Any]] = []
    for episode in _loop_episodes(bank, recorded_by_hand=True):  # newest first
        record = _record_of(bank, episode)
        if record is None:
            continue
        reflection = record.get("self_reflection") or {}
        if not reflection.get("reflection_text"):
            continue  # a passed iteration: nothing was reflected
        category = (reflection.get("credit_assignment") or {}).get("failure_category", "other")
        if categories and category not in categories:
            continue
        if float(reflection.get("confidence", 0.0)) < min_confidence:
            continue
        if wanted:
            haystack = " ".join(
                [
                    str(record.get("task_description", "")),
                    str(reflection.get("reflection_text", "")),
                    str((reflection.get("credit_assignment") or {}).get("root_cause", "")),
                    *map(str, reflection.get("actionable_insights", [])),
                    *map(str, reflection.get("lessons_learned", [])),
                ]
            ).lower()
            if not any(word in haystack for word in wanted):
                continue
        out.append(dict(record))
        if len(out) >= limit:
            break
    return out
