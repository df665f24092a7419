"""Every secret format through every field that keeps caller or model text, then every stored byte
read back: 0 found.

The formats are the redaction table's (tests/redaction_table.py: real-world formats, the labelled
``label: NAME=value`` forms, lessonbank's own ``lbk_`` keys; each again as a dict key wherever a
field holds a dict). The fields are the one list in :data:`lessonbank.redact.TEXT_FIELDS`; the test
fails if a field is added there and not fed here. Each format goes in through the public way a
caller or a model has into that field (import, record, the model's reply, archive, restore, reject,
MCP archive_lesson, the audit log), in batches (one line per format), on real stores.

Read back: the SQLite file (with its WAL), every Redis key and value under the test's prefix, every
PostgreSQL row of the test's schema, the three export formats, the git mirror (its files and every
object of its history, the reflog and COMMIT_EDITMSG included), every log record lessonbank wrote,
every prompt sent to the model and every job's stored error. A secret counts as found if it, or any
8+ character alphanumeric run of it, shows up in any of them, case folded (the full-text index keeps
lowercased tokens).
"""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest

from lessonbank import LessonBank
from lessonbank.errors import LLMError
from lessonbank.llm import FakeLLM
from lessonbank.llm.base import Message
from lessonbank.models import AuditEntry
from lessonbank.redact import TEXT_FIELDS
from lessonbank.settings import Settings
from tests.contract import conftest as contract
from tests.contract.conftest import POSTGRES_URL, REDIS_URL, require
from tests.redaction_table import POSITIVES

store_url = contract.store_url  # a fresh SQLite file, Redis prefix or PostgreSQL schema per test

NAMESPACE = "secrets"
CANARY = "canaryvisible"  # plain text fed with every batch: each sink must show it (the grep reads it)
LINES = [line for _, line, _ in POSITIVES]


def _batches(limit: int) -> list[list[str]]:
    """The table's lines in groups whose joined text ("\\n") stays within ``limit`` characters."""
    out: list[list[str]] = [[]]
    for line in LINES:
        if out[-1] and len("\n".join([*out[-1], line])) > limit:
            out.append([])
        out[-1].append(line)
    return out


def _text(batch: list[str]) -> str:
    return "\n".join(batch)


def _as_dict(batch: list[str]) -> dict[str, Any]:
    """A batch in a dict: every line as a value, as a dict key, and nested one level down."""
    return {
        "note": CANARY,
        "lines": list(batch),
        **dict.fromkeys(batch, "x"),
        "deep": [dict.fromkeys(batch, 1)],
    }


def _needles() -> dict[str, set[str]]:
    """Format name → what must not be found: the secret, and each 8+ alphanumeric run of it."""
    return {
        name: {secret.lower()} | {run.lower() for run in re.findall(r"[A-Za-z0-9]{8,}", secret)}
        for name, _, secret in POSITIVES
    }


# ------------------------------------------------------------------------------------------ feeding


class Fed:
    """Which (record, field) got every format: the test checks this covers TEXT_FIELDS."""

    def __init__(self) -> None:
        self.fields: set[tuple[str, str]] = set()
        self.refused = 0  # inputs a limit refused whole (nothing stored), e.g. a tag over 64 chars

    def mark(self, kind: str, *fields: str) -> None:
        self.fields.update((kind, field) for field in fields)


def _reply_script(batches: list[list[str]]) -> Callable[[list[Message]], str]:
    """The model's reply to the episode of round r (named in its task, so the worker's order does not
    matter): for r < n a lesson whose every field holds batch r, for n <= r < 2n a skip whose reason
    holds batch r - n, then an error that quotes a batch (the job's error and the log get it)."""
    n = len(batches)

    def reply(messages: list[Message]) -> str:
        found = re.search(r"deploy round (\d+)", "\n".join(m["content"] for m in messages))
        round_ = int(found.group(1)) if found else -1
        if 0 <= round_ < n:
            text = _text(batches[round_])
            return (
                f"<situation>{CANARY} {text}</situation>\n<mistake>{text}</mistake>\n"
                f"<correction>{text}</correction>\n<tags>{CANARY}, secrets</tags>"
            )
        if n <= round_ < 2 * n:
            return f"<skip>{_text(batches[round_ - n])}</skip>"
        if round_ == 2 * n:
            raise LLMError(f"provider refused the request: {_text(batches[0])}", provider="fake")
        return "<skip>nothing actionable</skip>"

    return reply


def _feed_lessons(bank: LessonBank, fed: Fed) -> None:
    for i, batch in enumerate(_batches(1_000)):  # learned_from keeps 1,000 characters
        text = _text(batch)
        record = {
            "content": f"{CANARY} lesson {i}\n{text}",
            "situation": text,
            "mistake": text,
            "correction": text,
            "learned_from": text,
            "task_type": text,
            "agent": text,
            "tags": [CANARY],
            "metadata": _as_dict(batch),
        }
        bank.import_lessons([record])
    # A tag holds one line of at most 64 characters, 32 tags a lesson: longer lines are refused whole.
    short = [line for line in LINES if len(line) <= 64]
    for i in range(0, len(short), 32):
        bank.import_lessons([{"content": f"{CANARY} tags {i}", "tags": short[i : i + 32]}])
    for k, line in enumerate(line for line in LINES if len(line) > 64):
        counts = bank.import_lessons([{"content": f"{CANARY} long tag {k}", "tags": [line]}])
        fed.refused += counts["skipped"]
    fed.mark("lesson", *TEXT_FIELDS["lesson"])


def _feed_episodes(bank: LessonBank, fed: Fed, batches: list[list[str]]) -> int:
    """One failed episode per model reply; returns how many were recorded."""
    recorded = 0
    for round_ in range(2 * len(batches) + 1):
        batch = batches[round_ % len(batches)]
        text = _text(batch)
        bank.record(
            {
                "task": f"{CANARY} deploy round {round_}\n{text}",
                "task_type": text,
                "agent": text,
                "goal_title": text,
                "error": f"FATAL: {text}",
                "attempt": text,
                "output": text,
                "actions": [*batch, _as_dict(batch)],
                "tags": [line for line in batch if len(line) <= 64][:32],
                "metadata": _as_dict(batch),
                "verification": [{"tool": text, "stderr": text, "errors": [_as_dict(batch)]}],
            }
        )
        recorded += 1
    assert bank.flush(60)
    fed.mark("episode", *TEXT_FIELDS["episode"])
    fed.mark("episode.verification", *TEXT_FIELDS["episode.verification"])
    fed.mark("reflection", *TEXT_FIELDS["reflection"])
    return recorded


def _feed_lifecycle(bank: LessonBank, fed: Fed) -> None:
    """Archive (with a reason) and restore, each by an actor holding the formats: the audit rows and
    the mirror's commits (author, message) get them."""
    actors, reasons = _batches(200), _batches(1_000)  # the actor's and the reason's limits
    made = bank.import_lessons(
        [{"content": f"{CANARY} lifecycle lesson number {k}"} for k in range(len(actors))]
    )
    assert made["added"] == len(actors)
    targets = [
        lesson.id
        for lesson in bank.lessons(limit=10_000)
        if lesson.content.startswith(f"{CANARY} lifecycle lesson")
    ]
    for k, actor in enumerate(actors):
        bank.archive(targets[k], reason=_text(reasons[k % len(reasons)]), actor=_text(actor))
    for k, actor in enumerate(actors[: len(reasons)]):
        bank.restore(targets[k], actor=_text(actor))
    fed.mark("archive", *TEXT_FIELDS["archive"])
    fed.mark("mirror", *TEXT_FIELDS["mirror"])
    fed.mark("audit", "actor", "summary")


def _feed_audit(bank: LessonBank, fed: Fed) -> None:
    """Rows written straight to the audit log, as any service may: every store redacts them."""
    entries = [
        AuditEntry(
            namespace=bank.namespace,
            actor=_text(batch),
            action="edit",
            summary=_text(batch),
            before={"content": _text(batch), "metadata": _as_dict(batch)},
            after={"content": CANARY, "metadata": _as_dict(batch)},
        )
        for batch in _batches(1_000)
    ]
    bank.store.append_audit(entries)
    fed.mark("audit", *TEXT_FIELDS["audit"])


def _feed_mcp(bank: LessonBank, settings: Settings, llm: FakeLLM, fed: Fed) -> None:
    """MCP archive_lesson's reason and agent (the tool caps the reason at 1,000 characters), then the
    staged proposals rejected with a reason and an actor, and one approved (a mirror commit)."""
    from mcp import Client

    from lessonbank.server.auth import ALL, Principal
    from lessonbank.server.banks import Banks
    from lessonbank.server.mcp_tools import Access, build_server

    batches = _batches(1_000)
    bank.import_lessons([{"content": f"{CANARY} mcp lesson number {k}"} for k in range(len(batches) + 1)])
    targets = [
        lesson.id
        for lesson in bank.lessons(limit=10_000)
        if lesson.content.startswith(f"{CANARY} mcp lesson")
    ]
    banks = Banks(settings, llm=llm, worker=False)
    local = Principal(name="local", role="admin", namespaces=(ALL,))
    server = build_server(Access(banks, NAMESPACE, lambda request: local))

    async def ask() -> None:
        async with Client(server) as client:
            for k, batch in enumerate([*batches, batches[0]]):
                result = await client.call_tool(
                    "archive_lesson",
                    {"lesson_id": targets[k], "reason": _text(batch), "agent": _text(batch)},
                )
                assert not result.is_error, result

    try:
        anyio.run(ask)
    finally:
        banks.close()
    pending = bank.proposals(status="pending", limit=100)
    assert len(pending) == len(batches) + 1
    for k, proposal in enumerate(pending[:-1]):
        bank.reject(proposal.id, reason=_text(batches[k]), actor=_text(_batches(200)[k]))
    bank.approve(pending[-1].id, actor=_text(_batches(200)[-1]))
    fed.mark("mcp.archive_lesson", *TEXT_FIELDS["mcp.archive_lesson"])


# ------------------------------------------------------------------------------------------ reading


def _around(text: str, needles: set[str]) -> str:
    """Where the first needle found sits in ``text``, for the failure message."""
    lowered = text.lower()
    at = min(lowered.find(needle) for needle in needles if needle in lowered)
    return text[max(0, at - 80) : at + 60]


def _sqlite_bytes(url: str) -> str:
    path = Path(urlsplit(url).path)
    return "\n".join(
        file.read_bytes().decode("utf-8", "replace") for file in sorted(path.parent.glob(path.name + "*"))
    )


def _redis_bytes(url: str) -> str:
    import redis

    prefix = parse_qs(urlsplit(url).query)["prefix"][0]
    client = redis.Redis.from_url(REDIS_URL)
    seen: list[bytes] = []
    try:
        for key in client.scan_iter(match=f"{prefix}*", count=1_000):
            seen.append(key)
            kind = client.type(key).decode()
            if kind == "string":
                seen.append(client.get(key) or b"")
            elif kind == "hash":
                for field, value in client.hgetall(key).items():
                    seen += [field, value]
            elif kind == "list":
                seen += client.lrange(key, 0, -1)
            elif kind == "set":
                seen += list(client.smembers(key))
            elif kind == "zset":
                seen += [member for member, _ in client.zrange(key, 0, -1, withscores=True)]
            elif kind == "stream":
                for _id, fields in client.xrange(key):
                    for field, value in fields.items():
                        seen += [field, value]
            else:
                raise AssertionError(f"unread Redis type {kind} of {key!r}")
    finally:
        client.close()
    assert seen, "no Redis key under the test's prefix"
    return "\n".join(part.decode("utf-8", "replace") for part in seen)


def _postgres_bytes(url: str) -> str:
    import psycopg

    schema = parse_qs(urlsplit(url).query)["schema"][0]
    seen: list[str] = []
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
            )
        ]
        assert tables, f"no table in schema {schema}"
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{schema}"."{table}"'):
                for value in row:
                    if isinstance(value, bytes | bytearray | memoryview):
                        seen.append(bytes(value).decode("utf-8", "replace"))
                    elif isinstance(value, dict | list):
                        seen.append(json.dumps(value, ensure_ascii=False))
                    else:
                        seen.append(str(value))
    return "\n".join(seen)


def _mirror_bytes(directory: Path) -> str:
    """The mirror's files and its whole history: every object git holds, and every other file in .git
    (the reflog and COMMIT_EDITMSG keep commit messages outside the objects)."""
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=directory,
        capture_output=True,
        check=True,
    ).stdout
    files = [
        path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and "objects" not in path.relative_to(directory).parts
    ]
    return "\n".join(part.decode("utf-8", "replace") for part in [objects, *files])


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """Everything lessonbank logs during the test, formatted as a handler would write it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    logger = logging.getLogger("lessonbank")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(level)


# ------------------------------------------------------------------------------------------ the test


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """The stores that keep bytes (the memory test double keeps none); the contract suite's
    ``store_url`` gives each test a fresh database on it."""
    name: str = request.param
    require(name)
    return name


def test_no_secret_format_is_stored_anywhere(
    backend: str, store_url: str, tmp_path: Path, logs: io.StringIO
) -> None:
    _run_everything(backend, store_url, tmp_path, logs)


def _run_everything(backend_name: str, db: str, tmp_path: Path, logs: io.StringIO) -> None:
    mirror = tmp_path / "mirror"
    batches = _batches(1_000)
    llm = FakeLLM(default=_reply_script(batches))
    settings = Settings(db=db, namespace=NAMESPACE, mirror_dir=str(mirror), home=str(tmp_path / "home"))
    fed = Fed()
    with LessonBank(settings=settings, llm=llm) as bank:
        _feed_lessons(bank, fed)
        episodes = _feed_episodes(bank, fed, batches)
        _feed_lifecycle(bank, fed)
        _feed_audit(bank, fed)
        _feed_mcp(bank, settings, llm, fed)
        assert bank.flush(60)
        exports = {fmt: bank.export(fmt) for fmt in ("json", "jsonl", "markdown")}  # type: ignore[arg-type]
        jobs = json.dumps([job.model_dump(mode="json") for job in bank.jobs(limit=1_000)])
        reflections = bank.stats()["reflections"]

    # The feed reached every field, and took effect: lessons, reflections, commits, prompts.
    expected = {(kind, field) for kind, fields in TEXT_FIELDS.items() for field in fields}
    assert fed.fields == expected
    assert len(llm.calls) >= episodes, (len(llm.calls), episodes)
    # A lesson, then a skip, per batch; the model's error is the job's, not a reflection.
    assert reflections == {"ok": len(batches), "skipped": len(batches)}, reflections
    stored = {
        "sqlite": _sqlite_bytes,
        "redis": _redis_bytes,
        "postgres": _postgres_bytes,
    }[backend_name](db)
    sinks = {
        f"{backend_name} store": stored,
        **{f"export {fmt}": text for fmt, text in exports.items()},
        "git mirror": _mirror_bytes(mirror),
        "logs": logs.getvalue(),
        "prompts": "\n".join(call.prompt for call in llm.calls),
        "jobs": jobs,
    }
    for name, text in sinks.items():
        if name not in ("logs", "jobs"):
            assert CANARY in text, f"{name} shows nothing that was fed: the grep would prove nothing"
    leaks = [
        (format_name, sink, _around(text, needles))
        for format_name, needles in _needles().items()
        for sink, text in sinks.items()
        if any(needle in text.lower() for needle in needles)
    ]
    tried = len(POSITIVES) * len(expected)
    print(
        f"\n{backend_name}: {len(POSITIVES)} formats x {len(expected)} fields = {tried} tried "
        f"({fed.refused} refused whole by a limit), {len(leaks)} found in {len(sinks)} sinks"
    )
    assert leaks == [], "\n".join(map(repr, leaks))
