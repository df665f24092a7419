"""The seed 000 keys, kept readable with redis-cli while goal insights live as lessons.

``GET reflection:{goal_id}`` returns the goal's newest 3 insights as a JSON list (newest
first, 7-day TTL, refreshed by each new insight) and ``LRANGE reflection:recent_goals 0 -1``
the last 10 goals that got one (a list, newest first). Those are the names of the namespace
``default``; every other namespace has its own pair, ``reflection:{ns}:{goal_id}`` and
``reflection:{ns}:recent_goals`` (``ns`` and the goal id encoded as in ``db.py``). Each entry holds ``goal_id``,
``insight``, ``importance``, ``goal_state``, ``goal_title``, ``created_at`` and ``lesson_id``.

Invariant: the keys change in the same MULTI/EXEC as the insight lesson they mirror (the
scripts below are queued inside it), so they never name a lesson that was not written; a
forgotten insight leaves its goal's list, and a goal left with none leaves ``recent_goals``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from lessonbank.models import Lesson

if TYPE_CHECKING:
    from lessonbank.stores.redis.db import Pipe, RedisDatabase

TTL_S = 7 * 24 * 3600
PER_GOAL = 3
RECENT_GOALS = 10

_ADD = f"""
local list = {{}}
local current = redis.call('GET', KEYS[1])
if current then
  local ok, value = pcall(cjson.decode, current)
  if ok and type(value) == 'table' then list = value end
end
local entry = cjson.decode(ARGV[1])
local out = {{entry}}
for _, item in ipairs(list) do
  if type(item) == 'table' and item.lesson_id ~= entry.lesson_id and #out < {PER_GOAL} then
    table.insert(out, item)
  end
end
redis.call('SET', KEYS[1], cjson.encode(out), 'EX', {TTL_S})
redis.call('LREM', KEYS[2], 0, ARGV[2])
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, {RECENT_GOALS - 1})
return #out
"""

_REMOVE = """
local current = redis.call('GET', KEYS[1])
if not current then return 0 end
local ok, list = pcall(cjson.decode, current)
if not ok or type(list) ~= 'table' then return 0 end
local out = {}
for _, item in ipairs(list) do
  if type(item) ~= 'table' or item.lesson_id ~= ARGV[1] then table.insert(out, item) end
end
if #out == 0 then
  redis.call('DEL', KEYS[1])
  redis.call('LREM', KEYS[2], 0, ARGV[2])
elseif #out < #list then
  redis.call('SET', KEYS[1], cjson.encode(out), 'KEEPTTL')
end
return #out
"""


def mirrored(lesson: Lesson) -> bool:
    return lesson.kind == "insight" and bool(lesson.goal_id)


class SeedMirror:
    """Queues the seed key updates for insight lessons into a store's transactions."""

    def __init__(self, db: RedisDatabase) -> None:
        self.db = db
        self._add = db.r.register_script(_ADD)
        self._remove = db.r.register_script(_REMOVE)

    def q_added(self, pipe: Pipe, lesson: Lesson) -> None:
        if not mirrored(lesson):
            return
        goal_id = str(lesson.goal_id)
        entry = {
            "goal_id": goal_id,
            "insight": lesson.content,
            "importance": lesson.importance,
            "goal_state": lesson.metadata.get("goal_state"),
            "goal_title": lesson.metadata.get("goal_title"),
            "created_at": lesson.created_at.isoformat(timespec="seconds"),
            "lesson_id": lesson.id,
        }
        keys = [self.db.seed_key(lesson.namespace, goal_id), self.db.recent_goals_key(lesson.namespace)]
        self._add(keys=keys, args=[json.dumps(entry), goal_id], client=pipe)

    def q_removed(self, pipe: Pipe, lesson: Lesson) -> None:
        if not mirrored(lesson):
            return
        goal_id = str(lesson.goal_id)
        keys = [self.db.seed_key(lesson.namespace, goal_id), self.db.recent_goals_key(lesson.namespace)]
        self._remove(keys=keys, args=[lesson.id, goal_id], client=pipe)
