"""Export and import stream: a backup holds superseded lessons (marked) and restores them as they were;
the streamed export is byte for byte ``export()``; import reads its input a piece at a time."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import lessonbank.services.transfer as transfer
from lessonbank import AsyncLessonBank, LessonBank
from lessonbank.errors import InputError
from lessonbank.models import Lesson, utcnow
from lessonbank.services.transfer import IMPORT_BATCH, RecordReader

BACKENDS = ["sqlite", "memory"]


def _url(backend: str, tmp_path: Path, name: str) -> str:
    return f"sqlite:///{tmp_path / name}" if backend == "sqlite" else "memory://"


def _superseding(bank: LessonBank, old: Lesson, content: str, **fields: Any) -> Lesson:
    """A lesson that supersedes ``old`` (the path the writer takes when the environment changed)."""
    lesson = Lesson(namespace=bank.namespace, content=content, supersedes=old.id, **fields)
    return bank.store.write_lesson(lesson).lesson


def _fill(bank: LessonBank) -> dict[str, Lesson]:
    """A live lesson, a chain of three (oldest two superseded), and an expired lesson that was superseded."""
    plain = bank.add_lesson("pin the base image digest in the Dockerfile", tags=["docker"])
    first = bank.add_lesson("deploy with make deploy from the repository root")
    second = _superseding(bank, first, "deploy with the release pipeline, never from a laptop")
    third = _superseding(bank, second, "deploy by tagging a release; the pipeline does the rest")
    stale = bank.add_lesson("the staging token lasts a week")
    renewed = _superseding(bank, stale, "the staging token lasts a day: renew it in CI")
    # Expired after it was superseded (only a live lesson can be superseded).
    past = utcnow() - timedelta(days=3)
    stale = bank.store.update_lesson(bank.get_lesson(stale.id).model_copy(update={"expires_at": past}))
    return {
        "plain": plain,
        "first": first,
        "second": second,
        "third": third,
        "stale": stale,
        "renewed": renewed,
    }


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_backup_round_trip_keeps_superseded_lessons_superseded(
    backend: str, fmt: str, tmp_path: Path
) -> None:
    backup = tmp_path / f"backup.{fmt}"
    with LessonBank(_url(backend, tmp_path, "a.db")) as bank:
        made = _fill(bank)
        assert bank.export_to(backup, fmt) == 6
        live_only = bank.export(fmt, live_only=True)
    text = backup.read_text("utf-8")
    records = json.loads(text) if fmt == "json" else [json.loads(line) for line in text.splitlines()]
    by_id = {record["id"]: record for record in records}
    assert set(by_id) == {lesson.id for lesson in made.values()}
    assert by_id[made["first"].id]["state"] == "superseded"
    assert by_id[made["first"].id]["superseded_by"] == made["second"].id
    assert by_id[made["second"].id]["superseded_by"] == made["third"].id
    # Superseded and expired: superseded is what put it out of use, and the mark says so.
    assert by_id[made["stale"].id]["state"] == "superseded" and by_id[made["stale"].id]["expires_at"]
    assert all("state" not in by_id[made[key].id] for key in ("plain", "third", "renewed"))
    assert made["first"].id not in live_only and made["third"].id in live_only

    with LessonBank(_url(backend, tmp_path, "b.db")) as copy:
        assert copy.import_lessons(records) == {"added": 6, "reinforced": 0, "skipped": 0}
        restored = copy.get_lesson(made["first"].id)
        assert restored.superseded_by == made["second"].id and restored.status == "active"
        assert copy.get_lesson(made["stale"].id).expires_at == made["stale"].expires_at
        live = {lesson.id for lesson in copy.lessons(limit=100)}
        assert live == {made["plain"].id, made["third"].id, made["renewed"].id}
        assert {hit.lesson.id for hit in copy.recall("deploy release pipeline laptop", k=10)} <= live
        again = {lesson.id: lesson for lesson in _lessons_of(copy.export("jsonl"))}
    # Restored as they were: every field but the time of the write.
    for record in records:
        original = Lesson.model_validate({k: v for k, v in record.items() if k != "state"})
        assert again[original.id].model_dump(exclude={"updated_at"}) == original.model_dump(
            exclude={"updated_at"}
        )


def _lessons_of(jsonl: str) -> list[Lesson]:
    return [
        Lesson.model_validate({k: v for k, v in json.loads(line).items() if k != "state"})
        for line in jsonl.splitlines()
    ]


@pytest.mark.parametrize("db", ["sqlite", "memory"])
def test_backup_holds_an_expired_lesson_no_one_superseded(tmp_path: Path, db: str) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}" if db == "sqlite" else "memory://"
    with LessonBank(url) as bank:
        past = utcnow() - timedelta(days=1)
        expired = bank.store.write_lesson(
            Lesson(namespace=bank.namespace, content="the old VPN needs the split tunnel", expires_at=past)
        ).lesson
        records = json.loads(bank.export("json"))
        assert bank.export("json", live_only=True) == "[]"
    assert [(r["id"], r.get("state")) for r in records] == [(expired.id, "expired")]


@pytest.mark.parametrize("fmt", ["json", "jsonl", "markdown"])
def test_export_to_writes_the_bytes_of_export_across_pages(fmt: str, tmp_path: Path) -> None:
    count = 2_345  # over two store pages
    rows = [
        {"content": f"lesson {n}: rotate the {n}th key — ünïcode kept", "tags": ["keys"]}
        for n in range(count)
    ]
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}") as bank:
        bank.import_lessons(rows)
        first = bank.add_lesson("check the lock file before upgrading")
        _superseding(bank, first, "check the lock file and the changelog before upgrading")
        whole = bank.export(fmt)
        stream = io.StringIO()
        assert bank.export_to(stream, fmt) == count + 2
        assert bank.export_to(tmp_path / f"out.{fmt}", fmt) == count + 2
    expected = whole if whole.endswith("\n") else whole + "\n"
    assert stream.getvalue() == expected
    assert (tmp_path / f"out.{fmt}").read_bytes() == expected.encode("utf-8")
    if fmt == "json":
        records = json.loads(whole)
        assert len(records) == len({r["id"] for r in records}) == count + 2
        # The same text json.dumps makes of the whole list: the format did not change.
        assert whole == json.dumps(records, indent=2, ensure_ascii=False)
    if fmt == "markdown":
        assert "· superseded by " in whole and whole.count("\n## ") == count + 2


def test_json_export_of_an_empty_bank_is_an_empty_array(tmp_path: Path) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}") as bank:
        assert bank.export("json") == "[]"
        assert bank.export("jsonl") == ""
        with pytest.raises(InputError, match="unknown export format"):
            bank.export_to(tmp_path / "x.csv", "csv")  # type: ignore[arg-type]
    assert not (tmp_path / "x.csv").exists()


def test_a_failed_export_leaves_the_last_backup_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backup = tmp_path / "backup.json"
    backup.write_text("the last good backup\n")
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}") as bank:
        bank.import_lessons([{"content": f"lesson number {n}"} for n in range(1_500)])
        real = bank.store.list_lessons

        def failing(query: Any, *, limit: int = 100, offset: int = 0, sort: Any = "created") -> list[Lesson]:
            if offset:
                raise OSError("disk went away")
            return real(query, limit=limit, offset=offset, sort=sort)

        monkeypatch.setattr(bank.store, "list_lessons", failing)
        with pytest.raises(OSError, match="disk went away"):
            bank.export_to(backup)
    assert backup.read_text() == "the last good backup\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".backup")] == []


def test_import_reads_its_records_a_few_batches_ahead_of_its_writes(tmp_path: Path) -> None:
    from lessonbank.services.import_pipeline import AHEAD

    pulled = 0

    def records() -> Iterator[dict[str, Any]]:
        nonlocal pulled
        for n in range(6 * IMPORT_BATCH + 7):
            pulled += 1
            yield {"content": f"streamed lesson {n}"}

    seen: list[tuple[int, int]] = []  # (lessons written so far, records pulled by then)
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}") as bank:
        written = bank.services.intake.import_lessons
        counts = written(records(), on_written=lambda c: seen.append((c["added"], pulled)))
        assert counts == {"added": 6 * IMPORT_BATCH + 7, "reinforced": 0, "skipped": 0}
        assert sum(bank.stats()["lessons"].values()) == 6 * IMPORT_BATCH + 7
    # One report per batch written, in order; the reading never ran more than a few batches ahead.
    assert [written for written, _ in seen] == [IMPORT_BATCH * n for n in range(1, 7)] + [
        6 * IMPORT_BATCH + 7
    ]
    assert all(read <= written + AHEAD * IMPORT_BATCH for written, read in seen)
    assert seen[0][1] < 6 * IMPORT_BATCH  # the first batch was written before the last was read


def test_async_export_to_and_lazy_import(tmp_path: Path) -> None:
    async def run() -> tuple[int, str, dict[str, int]]:
        async with AsyncLessonBank(f"sqlite:///{tmp_path / 'bank.db'}") as bank:
            counts = await bank.import_lessons({"content": f"async lesson {n}"} for n in range(1_200))
            stream = io.StringIO()
            written = await bank.export_to(stream, "jsonl")
            assert stream.getvalue() == await bank.export("jsonl")
            return written, stream.getvalue(), counts

    written, text, counts = asyncio.run(run())
    assert written == 1_200 == len(text.splitlines()) and counts["added"] == 1_200


# ------------------------------------------------------------------ reading records


class Counting(io.BytesIO):
    """A byte stream that remembers how far it was read."""

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.high = self.tell()
        return data


def _read(data: bytes, chunk: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], RecordReader]:
    monkeypatch.setattr(transfer, "READ_CHUNK", chunk)
    skips: list[str] = []
    reader = RecordReader(io.BytesIO(data), "input", on_skip=skips.append)
    return list(reader), reader


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 16])
def test_a_json_array_is_read_element_by_element_whatever_the_pieces(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = [
        {"content": "a", "n": 12345678901234567890},
        123456,
        'ünï\n"x"',
        [],
        {"deep": [[[{}]]]},
        None,
        1.5e-7,
    ]
    data = b"\xef\xbb\xbf \n" + json.dumps(values, indent=1, ensure_ascii=False).encode() + b"\n\n"
    records, reader = _read(data, chunk, monkeypatch)
    assert records == values and reader.is_array and reader.skipped == 0
    assert _read(b"[]", chunk, monkeypatch)[0] == [] and _read(b" [ 1 , 2 ] ", chunk, monkeypatch)[0] == [
        1,
        2,
    ]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'[{"content": "a"}, {"content": ', "after record 1: Expecting value"),
        (b'[{"content": "a"} {"content": "b"}]', "expected ',' or ']'"),
        (b'[{"content": "a"},]', "record 1: Expecting value"),
        (b"[1, 2] 3", "more text after the array"),
        (b'[{"content": "a"}, {"bad": tru}]', "record 1"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'[{"content": "caf\xe9"}]', "not valid UTF-8 (byte 17)"),
    ],
)
def test_a_broken_json_array_stops_the_read(data: bytes, why: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match=why.replace("(", r"\(").replace(")", r"\)")):
        _read(data, 4, monkeypatch)


def test_json_lines_skip_what_is_not_json_and_count_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transfer, "MAX_RECORD_CHARS", 5_000)
    lines = [
        b'{"content": "one"}',
        b"not json",
        b"",
        b'{"content": "caf\xe9"}',
        b'{"content": "' + b"x" * 6_000 + b'"}',
        b"[" * 2_000 + b"]" * 2_000,
        b'{"content": "two"}',
    ]
    skips: list[str] = []
    monkeypatch.setattr(transfer, "READ_CHUNK", 16)
    reader = RecordReader(io.BytesIO(b"\n".join(lines)), "input", on_skip=skips.append)
    assert list(reader) == [{"content": "one"}, {"content": "two"}]
    assert reader.skipped == 4 and not reader.is_array
    assert skips[0] == "line 2 skipped: not JSON (Expecting value)"
    assert skips[1].startswith("line 4 skipped: not valid UTF-8")
    assert skips[2].startswith("line 5 skipped: longer than")
    assert skips[3] == "line 6 skipped: nested too deeply to read as JSON"


def test_an_empty_input_reads_as_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    records, reader = _read(b" \n\t\n", 2, monkeypatch)
    assert records == [] and reader.empty


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_the_reader_holds_one_piece_not_the_whole_input(fmt: str) -> None:
    rows = [{"content": f"lesson {n} " + "x" * 200} for n in range(5_000)]
    data = json.dumps(rows).encode() if fmt == "json" else b"\n".join(json.dumps(r).encode() for r in rows)
    stream = Counting(data)
    reader = iter(RecordReader(stream, "input"))
    assert next(reader) == rows[0]
    assert stream.high <= 2 * transfer.READ_CHUNK < len(data) // 8
    assert sum(1 for _ in reader) == len(rows) - 1


# ------------------------------------------------------------------ the commands


def test_cli_export_import_round_trip_with_superseded_and_live_only(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    with LessonBank(db) as bank:
        made = _fill(bank)
    for fmt in ("json", "jsonl"):
        backup = tmp_path / f"backup.{fmt}"
        cli("--db", db, "export", "--format", fmt, "-o", str(backup))
        copy = f"sqlite:///{tmp_path / f'copy-{fmt}.db'}"
        assert "added 6, reinforced 0, skipped 0" in cli("--db", copy, "import", str(backup)).stdout.decode()
        with LessonBank(copy) as restored:
            assert restored.get_lesson(made["second"].id).superseded_by == made["third"].id
    live = json.loads(cli("--db", db, "export", "--live-only").stdout)
    assert {r["id"] for r in live} == {made["plain"].id, made["third"].id, made["renewed"].id}
    piped = cli(
        "--db",
        f"sqlite:///{tmp_path / 'piped.db'}",
        "import",
        "-",
        stdin=(tmp_path / "backup.jsonl").read_bytes(),
    )
    assert "added 6" in piped.stdout.decode()


def test_cli_import_of_a_broken_array_file_imports_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "broken.json"
    good = ",".join(json.dumps({"content": f"lesson {n}"}) for n in range(2_500))
    broken.write_text(f'[{good}, {{"content": ')
    proc = cli("import", str(broken), ok=False)
    assert proc.returncode == 2 and b"is not JSON after record 2,500" in proc.stderr, proc.stderr
    assert json.loads(cli("stats", "--json").stdout)["lessons"] == {}
    # From stdin there is no second read: what came before the fault is kept, and said.
    piped = cli("import", "-", stdin=broken.read_bytes(), ok=False)
    assert (
        piped.returncode == 2 and b"imported before it: added 2000, reinforced 0, skipped 0" in piped.stderr
    )
    assert b"Traceback" not in piped.stderr


def test_cli_import_of_an_empty_file_says_so(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    proc = cli("import", str(empty))
    assert b"is empty: nothing to import" in proc.stderr
    assert "added 0, reinforced 0, skipped 0" in proc.stdout.decode()
