"""Redis plumbing: URL options, the key layout, optimistic transactions, retries.

Key layout (``P`` is the URL's ``?prefix=``, empty by default; ``B`` = ``P + "lb:"``; ``ns`` a
namespace). Every part a user chose (the namespace, ids, tokens, tags, content hashes, goal ids,
dedupe keys, model names) goes into a key through :func:`key_part`: letters, digits, ``-``, ``_``
and ``.`` stay as they are, every other character (``:``, ``%``, spaces, ``*``, braces, ...) is
percent-encoded as its UTF-8 bytes (``team:a`` → ``team%3Aa``, ``50%`` → ``50%25``). So a part
never holds a ``:`` and no two names share a key, while ordinary names keep the keys they had.
:meth:`RedisDatabase.k` builds every key below (``k(ns, "tok", token)``):

- ``B{ns}:lesson:{id}`` hash: ``data`` (the full Lesson JSON) and flat copies of the fields
  recall filters and ranks on; ``B{ns}:lessons`` zset of ids by creation time;
  ``B{ns}:hash:{content_hash}`` → id; ``B{ns}:tag:{tag}`` set of ids; ``B{ns}:corpus`` hash
  (lesson count, total length); ``B{ns}:expiring`` zset of ids by ``expires_at``.
- Token postings (``postings.py``): ``B{ns}:post:{token}`` string of packed records,
  ``B{ns}:docctr``, ``B{ns}:docs``, ``B{ns}:dead``, ``B{ns}:df``; ``B:postings`` the layout's version
  (a bank written with a sorted set per token, ``B{ns}:tok:{token}``, is rebuilt on open: ``upgrade.py``).
- Vectors of embedder ``m``: ``B{ns}:vec:{m}`` hash id → vector bytes, ``B{ns}:vechash:{m}``
  hash id → text hash (none kept when empty), ``B{ns}:vecseq:{m}`` zset id → sequence number of its last write,
  ``B{ns}:vecctr:{m}`` the sequence counter; ``B{ns}:vecmodels`` set of the models present.
- ``B{ns}:episode:{id}`` hash, ``B{ns}:episodes`` zset; ``B{ns}:reflection:{id}`` string,
  ``B{ns}:reflections`` zset, ``B{ns}:episode_reflections:{episode_id}`` zset.
- Jobs: ``B{ns}:job:{id}`` hash (``data`` = Job JSON), ``B{ns}:stream`` (stream, consumer
  group ``workers``), ``B{ns}:delayed`` zset (retries by due time), ``B{ns}:leases`` zset
  (by lease expiry), ``B{ns}:jobs`` zset (by creation), ``B{ns}:jobs:{status}`` sets,
  ``B{ns}:dedupe:{key}`` → job id.
- ``B:where`` hash: record id → namespace (written once: an id stays in its namespace);
  ``B:namespaces`` set. Members, hash fields and values hold ids and names as they are.
- Seed 000 keys, readable with redis-cli: ``P reflection:{goal_id}`` (string: JSON list of the
  goal's newest 3 insights, 7-day TTL) and ``P reflection:recent_goals`` (list, newest first,
  at most 10: ``LRANGE reflection:recent_goals 0 -1``) for the namespace ``default``;
  ``P reflection:{ns}:{goal_id}`` and ``P reflection:{ns}:recent_goals`` for any other. The goal
  id and ``ns`` are encoded as above, so the two forms never meet (one ``:`` against two).

Invariants: writes that go together run in one MULTI/EXEC after WATCHing every key they
read (retried on conflict), so a reader never sees half a write and two writers never both
win; connection errors are retried for the retry budget (``?retry_s=``, default 15 s), then
the caller gets a :class:`StoreError`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

from lessonbank.errors import ConfigError, StoreError
from lessonbank.stores.connection import RetryBudget, redacted, split_options

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import ResponseError, WatchError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError("the Redis backend needs redis-py: pip install 'lessonbank[redis]'") from exc

Clock = Callable[[], float]
# redis-py's annotations are partial (bytes | str unions, untyped pipeline methods): the client
# and its pipelines are handled as Any here, values are decoded strings (decode_responses).
Pipe = Any
T = TypeVar("T")
GROUP = "workers"
MAX_CONFLICTS = 200
_OPTIONS = ("prefix", "retry_s")


DEFAULT_NAMESPACE = "default"
_PLAIN = frozenset("-_.")


_SAFE = re.compile(r"[\w.\-]*", re.ASCII)  # ASCII letters, digits, "_", "." and "-": kept as they are


def key_part(value: str) -> str:
    """``value`` as one part of a key: letters, digits, ``-``, ``_`` and ``.`` kept, any other
    character percent-encoded (its UTF-8 bytes), so the part holds no ``:`` and decodes back."""
    if _SAFE.fullmatch(value):  # ids, hashes and ASCII words: one C call, and no cache to fill
        return value
    return _encoded(value)


@lru_cache(maxsize=1 << 16)  # words and names repeat: encoding them was a tenth of an import
def _encoded(value: str) -> str:
    if value.isalnum() or all(c.isalnum() or c in _PLAIN for c in value):
        return value
    return "".join(
        c if c.isalnum() or c in _PLAIN else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
        for c in value
    )


class RedisDatabase:
    """One Redis database, with the key layout of the module docstring."""

    def __init__(self, url: str, *, clock: Clock = time.time) -> None:
        self.url = url
        self.clock = clock
        client_url, options = split_options(url, _OPTIONS)
        self.prefix = options.get("prefix", "")
        self.base = f"{self.prefix}lb:"
        self._heads: dict[str, str] = {}  # namespace → its keys' start (``k``): a few namespaces
        try:
            retry_s = float(options.get("retry_s", "15"))
        except ValueError as exc:
            raise ConfigError(f"bad retry_s in {redacted(url)}: {exc}") from exc
        self._retry = RetryBudget(
            f"Redis at {redacted(url)}", (RedisConnectionError, RedisTimeoutError), budget_s=retry_s
        )
        try:
            self.r: Any = self._client(client_url, decode=True)
            # Vector bytes are not text: they are read through a client that leaves replies raw
            # (it connects on first use only).
            self.raw: Any = self._client(client_url, decode=False)
        except ValueError as exc:
            raise ConfigError(f"bad Redis URL {redacted(url)}: {exc}") from exc
        self._groups: set[str] = set()
        try:  # the database index is checked by the server on connect
            self.run(self.r.ping)
        except redis.ResponseError as exc:
            if "DB index" not in str(exc):
                raise
            raise ConfigError(
                f"bad database index in {redacted(url)}: the server says {exc}; use one from 0 to the server's "
                "'databases' setting minus 1"
            ) from None
        self.query_engine = self.run(self._has_query_engine)

    @staticmethod
    def _client(client_url: str, *, decode: bool) -> Any:
        return redis.Redis.from_url(
            client_url,
            decode_responses=decode,
            socket_timeout=10,
            socket_connect_timeout=5,
            health_check_interval=30,
            retry=Retry(NoBackoff(), 1),  # one quick reconnect; the budget above does the rest
        )

    def _has_query_engine(self) -> bool:
        """Whether the server offers FT.* (the Redis Query Engine of Redis 8 / Redis Stack)."""
        try:
            self.r.execute_command("FT._LIST")
        except ResponseError:  # "unknown command": a server without the query engine
            return False
        return True

    # ----------------------------------------------------------------- keys

    def k(self, namespace: str, kind: str, *values: str) -> str:
        """The key of ``kind`` (a fixed word) in ``namespace``, for ``values`` (user-chosen parts)."""
        head = self._heads.get(namespace)
        if head is None:
            head = self.base + key_part(namespace) + ":"
            if len(self._heads) < 1024:
                self._heads[namespace] = head
        key = head + kind
        for value in values:
            key += ":" + key_part(value)
        return key

    @property
    def where_key(self) -> str:
        return self.base + ":where"

    @property
    def namespaces_key(self) -> str:
        return self.base + ":namespaces"

    def _seed_base(self, namespace: str) -> str:
        if namespace == DEFAULT_NAMESPACE:
            return f"{self.prefix}reflection:"
        return f"{self.prefix}reflection:{key_part(namespace)}:"

    def seed_key(self, namespace: str, goal_id: str) -> str:
        """Seed 000's ``reflection:{goal_id}`` of ``namespace`` (``reflection:{ns}:{goal_id}`` outside
        the default namespace)."""
        return self._seed_base(namespace) + key_part(goal_id)

    def recent_goals_key(self, namespace: str) -> str:
        """Seed 000's ``reflection:recent_goals`` of ``namespace``."""
        return self._seed_base(namespace) + "recent_goals"

    def namespace_of(self, record_id: str) -> str | None:
        value: str | None = self.r.hget(self.where_key, record_id)
        return value

    def all_namespaces(self) -> list[str]:
        return sorted(self.r.smembers(self.namespaces_key))

    # ----------------------------------------------------------------- running

    def run(self, fn: Callable[[], T]) -> T:
        return self._retry.call(fn)

    def transact(self, plan: Callable[[Pipe], Callable[[Pipe], T]]) -> T:
        """Optimistic transaction: ``plan`` WATCHes and reads, returns what queues the writes.

        The writes run in MULTI/EXEC; when a watched key changed meanwhile, all of it runs again.
        """

        def attempt() -> T:
            for _ in range(MAX_CONFLICTS):
                with self.r.pipeline(transaction=True) as pipe:
                    try:
                        queue = plan(pipe)
                        pipe.multi()
                        result = queue(pipe)
                        pipe.execute()
                        return result
                    except WatchError:
                        continue
            raise StoreError(
                f"Redis at {redacted(self.url)}: a write lost {MAX_CONFLICTS} races in a row; retry later"
            )

        return self.run(attempt)

    def ensure_group(self, namespace: str) -> str:
        stream = self.k(namespace, "stream")
        if stream not in self._groups:
            try:
                self.r.xgroup_create(stream, GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
            self._groups.add(stream)
        return stream

    def close(self) -> None:
        self.r.close()
        self.raw.close()


# Runs a list of single-key commands in one call. ARGV[1] is a JSON array of commands, each an
# array of strings: name, key, arguments. The batch travels as one argument (the client's cost of
# encoding a command is per argument, and a lesson's writes are ~100 of them); ``Batch`` has already
# folded a command into the one before it on the same key where that changes nothing (one ZADD of a
# chunk's lessons, one SADD per tag). Two commands of its own keep a lesson's token postings (see
# postings.py), both keyed by the lesson hash, then the namespace's key prefix ``B{ns}:``: INDEX
# (then the lesson id, the factors as ``factors_field`` writes them and "1" when the lesson's old
# document number is to be left alone, as a rebuild does) retires the lesson's document number and
# gives it a new one holding these tokens; UNINDEX retires it. Their records, counts and document
# numbers are gathered over the batch and written once per key at the end (a chunk of 500 lessons
# repeats most words: per lesson, that was most of the script's time). Keys are named inside the
# script, as one Redis server allows (a cluster would need every key declared).
BATCH_SCRIPT = """
-- post: per postings prefix, per token, the records to append (a token's key is made once a batch,
-- not once a posting); counts, docs: per key, df changes and new document ids.
local post, counts, docs = {}, {}, {}
local function of(map, key)
  local t = map[key]
  if not t then t = {}; map[key] = t end
  return t
end
local function unindex(lesson, base)
  local doc = redis.call('HGET', lesson, 'docno')
  if not doc then return end
  redis.call('SETBIT', base .. 'dead', doc, 1)
  of(docs, base .. 'docs')[tonumber(doc)] = nil
  redis.call('HDEL', base .. 'docs', doc)
  local terms = redis.call('HGET', lesson, 'terms')
  if terms then
    local changes = of(counts, base .. 'df')
    for suffix in string.gmatch(terms, '[^\\031]+') do changes[suffix] = (changes[suffix] or 0) - 1 end
  end
end
local written = 0
for _, op in ipairs(cjson.decode(ARGV[1])) do
  local command = op[1]
  if command == 'INDEX' then
    local lesson, base = op[2], op[3]
    if op[6] ~= '1' then unindex(lesson, base) end
    local doc = redis.call('INCR', base .. 'docctr')
    local number, postings, changes = struct.pack('<I', doc), of(post, base .. 'post:'), of(counts, base .. 'df')
    local names = {}
    for factor, words in string.gmatch(op[5], '([^=;]+)=([^;]*);') do
      local record = number .. struct.pack('<d', tonumber(factor))
      for suffix in string.gmatch(words, '[^ ]+') do
        local records = postings[suffix]
        if not records then records = {}; postings[suffix] = records end
        records[#records + 1] = record
        changes[suffix] = (changes[suffix] or 0) + 1
        names[#names + 1] = suffix
      end
    end
    redis.call('HSET', lesson, 'docno', doc, 'terms', table.concat(names, '\\031'))
    of(docs, base .. 'docs')[doc] = op[4]
  elseif command == 'UNINDEX' then
    unindex(op[2], op[3])
  else
    redis.call(unpack(op))
  end
  written = written + 1
end
for key, ids in pairs(docs) do
  local flat = {}
  for doc, id in pairs(ids) do flat[#flat + 1] = doc; flat[#flat + 1] = id end
  for i = 1, #flat, 1000 do redis.call('HSET', key, unpack(flat, i, math.min(i + 999, #flat))) end
end
-- Counts first: a posting whose last live lesson went is deleted before this batch's records land.
for key, changes in pairs(counts) do
  local names, gone, kept = {}, {}, {}
  for suffix in pairs(changes) do names[#names + 1] = suffix end
  for i = 1, #names, 1000 do
    local slice = {unpack(names, i, math.min(i + 999, #names))}
    local now = redis.call('HMGET', key, unpack(slice))
    for j, suffix in ipairs(slice) do
      local n = (tonumber(now[j]) or 0) + changes[suffix]
      if n > 0 then
        kept[#kept + 1] = suffix; kept[#kept + 1] = n
      else
        gone[#gone + 1] = suffix
      end
    end
  end
  for i = 1, #kept, 1000 do redis.call('HSET', key, unpack(kept, i, math.min(i + 999, #kept))) end
  local prefix = string.sub(key, 1, -3) .. 'post:'
  local postings = post[prefix] or {}
  for _, suffix in ipairs(gone) do
    redis.call('HDEL', key, suffix)
    if not postings[suffix] then redis.call('DEL', prefix .. suffix) end
  end
end
for prefix, postings in pairs(post) do
  for suffix, records in pairs(postings) do redis.call('APPEND', prefix .. suffix, table.concat(records)) end
end
return written
"""


# Adds to the helpful/harmful counters of the lessons whose hashes are KEYS (absent ones are left
# alone: HINCRBY would create them); ARGV = helpful, harmful. A hash written before the counters
# were kept in place gets them from its JSON first. Returns how many lessons were credited.
CREDIT_SCRIPT = """
local credited = 0
local names = {'helpful', 'harmful'}
for _, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then
    for j, name in ipairs(names) do
      local add = tonumber(ARGV[j])
      if add ~= 0 then
        if redis.call('HEXISTS', key, name) == 0 then
          local data = cjson.decode(redis.call('HGET', key, 'data'))
          redis.call('HSET', key, name, tonumber(data[name]) or 0)
        end
        redis.call('HINCRBY', key, name, add)
      end
    end
    credited = credited + 1
  end
end
return credited
"""

# Stores vectors of one model. KEYS: the model's counter, seq zset, vector hash, text-hash hash,
# the namespace's model set, then one lesson hash per row; ARGV: the model, then per row its
# lesson id, text hash and vector. A row whose lesson hash is gone is skipped; every other gets
# the next sequence number, in row order (the counter moves once, the three others are written
# once per 500 rows). An empty text hash (the lexical term vectors have none) is not stored: the
# row's entry is removed, as reading it finds no hash either way. Returns how many were written.
PUT_VECTORS_SCRIPT = """
local rows = {}
for i = 6, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then rows[#rows + 1] = (i - 6) * 3 + 2 end
end
local n = #rows
if n == 0 then return 0 end
local first = redis.call('INCRBY', KEYS[1], n) - n
for i = 1, n, 500 do
  local seqs, vectors, hashes, unhashed = {}, {}, {}, {}
  for j = i, math.min(i + 499, n) do
    local a = rows[j]
    seqs[#seqs + 1] = first + j; seqs[#seqs + 1] = ARGV[a]
    vectors[#vectors + 1] = ARGV[a]; vectors[#vectors + 1] = ARGV[a + 2]
    if ARGV[a + 1] == '' then
      unhashed[#unhashed + 1] = ARGV[a]
    else
      hashes[#hashes + 1] = ARGV[a]; hashes[#hashes + 1] = ARGV[a + 1]
    end
  end
  redis.call('ZADD', KEYS[2], unpack(seqs))
  redis.call('HSET', KEYS[3], unpack(vectors))
  if #hashes > 0 then redis.call('HSET', KEYS[4], unpack(hashes)) end
  if #unhashed > 0 then redis.call('HDEL', KEYS[4], unpack(unhashed)) end
end
redis.call('SADD', KEYS[5], ARGV[1])
return n
"""

# Reads the vectors of one model written after a sequence number, one page at a time. KEYS: the
# counter, seq zset, vector hash; ARGV: after, page size. Returns the counter, the number of
# vectors, then id, sequence, vector per row, by sequence.
VECTOR_CHANGES_SCRIPT = """
local out = {redis.call('GET', KEYS[1]) or '0', redis.call('ZCARD', KEYS[2])}
local found = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, ARGV[2])
for i = 1, #found, 2 do
  local vector = redis.call('HGET', KEYS[3], found[i])
  if vector then
    out[#out + 1] = found[i]
    out[#out + 1] = found[i + 1]
    out[#out + 1] = vector
  end
end
return out
"""


# Commands ``Batch`` folds into the one before it on the same key: each takes any number of members
# (or fields) and does to each what it would do alone, in order.
_VARIADIC = frozenset({"SADD", "SREM", "ZADD", "ZREM", "HSET", "HDEL"})
_FOLD_MAX = 1000  # arguments of one folded command (a Lua call takes a few thousand at most)


class Batch:
    """Single-key commands gathered to run together in one ``BATCH_SCRIPT`` call.

    A command of ``_VARIADIC`` whose key's last command in the batch is the same command joins it
    (``SADD k a`` then ``SADD k b`` runs as ``SADD k a b``): nothing in between touched the key,
    so the key ends as it would have; an ``INDEX``/``UNINDEX`` counts as a command on its lesson hash.
    """

    def __init__(self) -> None:
        self.commands: list[list[str]] = []
        self._last: dict[str, list[str]] = {}  # key → the last command on it

    def add(self, command: str, key: str, *args: str) -> None:
        last = self._last.get(key)
        if last is not None and last[0] == command and command in _VARIADIC and len(last) < _FOLD_MAX:
            last.extend(args)
            return
        self._last[key] = op = [command, key, *args]
        self.commands.append(op)

    def queue(self, pipe: Pipe, script: Any) -> None:
        if self.commands:
            script(args=[json.dumps(self.commands)], client=pipe)
