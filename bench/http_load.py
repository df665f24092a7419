"""`lessonbank serve` under load.

1. **Records** (the write path, group commit): a real ``lessonbank serve`` over a fresh SQLite file
   and a fresh PostgreSQL schema; ``--clients`` clients (50) each record episodes back to back for
   ``--seconds``, over one keep-alive connection each with a light HTTP/1.1 client (``_serve.RawClient``,
   tens of microseconds a request, so the two cores go to the server). Reported: records per second,
   record p50/p99, errors, and episodes lost (acknowledged with 201 but not in the store afterwards;
   must be 0). Target: ≥ 1,000 records/s, p99 ≤ 100 ms.
2. **Concurrent clients**, through the Python client (``lessonbank.AsyncRemoteBank``): a real ``lessonbank serve`` process (no in-process reflection worker: the
   episodes' reflection jobs wait in the queue, as with a separate ``lessonbank worker``) over a fresh
   SQLite file and a fresh PostgreSQL schema, seeded with 1,000 lessons. ``--clients`` clients (50) each
   loop for ``--seconds`` (60): record an episode, then recall a query. Reported: requests per second,
   p50/p99 latency of each operation, errors, and episodes lost (recorded and acknowledged by the server
   but not in the store afterwards; must be 0).
3. **Recall at 100k** (SQLite, lexical): the bank imported before the server starts; ``--queries``
   sequential recalls over HTTP, p50/p99 (target p99 ≤ 20 ms).

The machine has 2 cores shared by the server and the clients: figures are of both together. (Named
``http_load`` because a ``bench/http.py`` would hide the standard library's ``http`` from every script
run in this folder.)

    .venv/bin/python bench/http_load.py                  # every part, SQLite and PostgreSQL
    .venv/bin/python bench/http_load.py --seconds 10 --size 10000 --backends sqlite
    .venv/bin/python bench/http_load.py --parts records --seconds 20   # the write path only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _backends
import _corpus
from _serve import RawClient, serving
from lessonbank import AsyncRemoteBank, Episode, LessonBank, RemoteBank
from lessonbank.models import new_id
from lessonbank.remote.calls import call_of
from lessonbank.requests import RecordRequest

RESULTS = Path(__file__).resolve().parent / "results"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def client(
    url: str,
    episodes: list[dict[str, Any]],
    queries: list[str],
    until: float,
    index: int,
    found: dict[str, Any],
) -> None:
    async with AsyncRemoteBank(url) as bank:
        step = index
        while time.monotonic() < until:
            episode = dict(episodes[step % len(episodes)])
            episode["task"] = f"{episode['task']} (client {index}, step {step})"  # distinct episodes
            started = time.perf_counter()
            try:
                stored = await bank.record(episode)
                found["record"].append(time.perf_counter() - started)
                found["recorded"].append(stored.id)
            except Exception as exc:
                found["errors"].append(f"record: {type(exc).__name__}: {exc}"[:200])
            started = time.perf_counter()
            try:
                await bank.recall(queries[step % len(queries)], k=5)
                found["recall"].append(time.perf_counter() - started)
            except Exception as exc:
                found["errors"].append(f"recall: {type(exc).__name__}: {exc}"[:200])
            step += 1


async def recorder(
    url: str, bodies: list[dict[str, Any]], until: float, index: int, found: dict[str, Any]
) -> None:
    """Record episodes back to back until ``until`` (each a new episode: a fresh id)."""
    async with RawClient(url) as client:
        step = index
        while time.monotonic() < until:
            body = bodies[step % len(bodies)]
            body = {**body, "episode": {**body["episode"], "id": new_id("ep")}}  # a new episode each time
            started = time.perf_counter()
            try:
                status, answer = await client.request("POST", "/api/v1/ns/default/episodes", body)
            except (OSError, ValueError) as exc:
                found["errors"].append(f"record: {type(exc).__name__}: {exc}"[:200])
                return
            if status == 201:
                found["record"].append(time.perf_counter() - started)
                found["recorded"].append(answer["id"])
            else:
                found["errors"].append(f"record: HTTP {status}: {answer}"[:200])
            step += 1


def records(backend: str, clients: int, seconds: float, processes: int = 1) -> dict[str, Any]:
    source = _corpus.load_source(11)
    episodes = _corpus.make_episodes(source, 500, 11)
    bodies = [call_of(RecordRequest(episode=Episode.model_validate(e))).json for e in episodes]
    for n, body in enumerate(bodies):
        body["episode"]["task"] = f"{body['episode']['task']} (variant {n})"
    with tempfile.TemporaryDirectory(prefix="lb-http-") as tmp, _backends.fresh_url(backend, Path(tmp)) as db:
        with LessonBank(db, worker=False):
            pass  # the schema, before the clock starts
        with serving(db, Path(tmp) / "home", processes=processes) as url:
            found: dict[str, Any] = {"record": [], "recorded": [], "errors": []}

            async def run() -> None:
                until = time.monotonic() + seconds
                await asyncio.gather(*(recorder(url, bodies, until, i, found) for i in range(clients)))

            started = time.monotonic()
            asyncio.run(run())
            elapsed = time.monotonic() - started
        with LessonBank(db, worker=False) as bank:
            stored = {episode.id for episode in _all_episodes(bank)}
    lost = [episode_id for episode_id in found["recorded"] if episode_id not in stored]
    return {
        "backend": backend,
        "clients": clients,
        "seconds": round(elapsed, 1),
        "records": len(found["recorded"]),
        "records_per_s": round(len(found["recorded"]) / elapsed, 1),
        "record_p50_ms": round(percentile(found["record"], 0.5) * 1000, 2),
        "record_p99_ms": round(percentile(found["record"], 0.99) * 1000, 2),
        "errors": len(found["errors"]),
        "first_errors": found["errors"][:5],
        "episodes_lost": len(lost),
    }


def concurrent(backend: str, clients: int, seconds: float) -> dict[str, Any]:
    source = _corpus.load_source(11)
    lessons = _corpus.make_lessons(source, 1_000, 11)
    episodes = _corpus.make_episodes(source, 500, 11)
    queries = _corpus.make_queries(source, 500, 11)
    with tempfile.TemporaryDirectory(prefix="lb-http-") as tmp, _backends.fresh_url(backend, Path(tmp)) as db:
        with LessonBank(db, worker=False) as bank:
            bank.import_lessons(lessons)
        with serving(db, Path(tmp) / "home") as url:
            found: dict[str, Any] = {"record": [], "recall": [], "recorded": [], "errors": []}
            started = time.monotonic()

            async def run() -> None:
                until = time.monotonic() + seconds
                await asyncio.gather(
                    *(client(url, episodes, queries, until, i, found) for i in range(clients))
                )

            asyncio.run(run())
            elapsed = time.monotonic() - started
        with LessonBank(db, worker=False) as bank:
            stored = {episode.id for episode in _all_episodes(bank)}
    lost = [episode_id for episode_id in found["recorded"] if episode_id not in stored]
    requests = len(found["record"]) + len(found["recall"])
    return {
        "backend": backend,
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": requests,
        "requests_per_s": round(requests / elapsed, 1),
        "record_p50_ms": round(percentile(found["record"], 0.5) * 1000, 2),
        "record_p99_ms": round(percentile(found["record"], 0.99) * 1000, 2),
        "recall_p50_ms": round(percentile(found["recall"], 0.5) * 1000, 2),
        "recall_p99_ms": round(percentile(found["recall"], 0.99) * 1000, 2),
        "errors": len(found["errors"]),
        "first_errors": found["errors"][:5],
        "episodes_recorded": len(found["recorded"]),
        "episodes_lost": len(lost),
    }


def _all_episodes(bank: LessonBank) -> list[Any]:
    store, namespace = bank.services.scope.store, bank.services.scope.namespace
    return [episode for episode, _ in store.recent_episodes(namespace, since=0.0, limit=10_000_000)]


def recall_at_scale(size: int, queries: int) -> dict[str, Any]:
    source = _corpus.load_source(7)
    rows = _corpus.make_lessons(source, size, 7)
    asked = _corpus.make_queries(source, queries, 7)
    with tempfile.TemporaryDirectory(prefix="lb-http-") as tmp:
        db = f"sqlite:///{tmp}/bank.db"
        with LessonBank(db, worker=False) as bank:
            for start in range(0, len(rows), 10_000):
                bank.import_lessons(rows[start : start + 10_000])
        with serving(db, Path(tmp) / "home") as url, RemoteBank(url) as bank:
            for query in asked[:20]:  # warm the server's caches and connection
                bank.recall(query, k=5)
            timings = []
            for query in asked:
                started = time.perf_counter()
                bank.recall(query, k=5)
                timings.append(time.perf_counter() - started)
    return {
        "lessons": size,
        "queries": len(asked),
        "p50_ms": round(statistics.median(timings) * 1000, 2),
        "p99_ms": round(percentile(timings, 0.99) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--parts", default="records,mixed,scale", help="records (write path), mixed (record + recall), scale"
    )
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--size", type=int, default=100_000, help="lessons for the recall-at-scale part (0: skip)"
    )
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--processes", type=int, default=1, help="`serve --processes` for the records part")
    parser.add_argument("--out", type=Path, default=RESULTS / "http_load.json")
    args = parser.parse_args()
    parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    report: dict[str, Any] = {
        "load_average": os.getloadavg(),
        "python": sys.version.split()[0],
        "records": [],
        "concurrent": [],
    }
    backends = []
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        why = _backends.available(backend)
        if why is not None:
            print(f"skipping {backend}: {why}")
            continue
        backends.append(backend)
    if "records" in parts:
        report["records"] = []
        for backend in backends:
            before = os.getloadavg()[0]  # the machine is shared: each row says how busy it was
            row = records(backend, args.clients, args.seconds, args.processes)
            report["records"].append(
                {**row, "processes": args.processes, "load": [before, os.getloadavg()[0]]}
            )
        print(
            "| backend | processes | clients | s | records/s | record p50/p99 ms | errors | records / lost "
            "| load avg before / after |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for row in report["records"]:
            print(
                f"| {row['backend']} | {row['processes']} | {row['clients']} | {row['seconds']} | {row['records_per_s']} | "
                f"{row['record_p50_ms']}/{row['record_p99_ms']} | {row['errors']} | "
                f"{row['records']} / {row['episodes_lost']} | {row['load'][0]:.2f} / {row['load'][1]:.2f} |"
            )
            for error in row["first_errors"]:
                print("  error:", error)
        print()
    if "mixed" in parts:
        report["concurrent"] = [concurrent(backend, args.clients, args.seconds) for backend in backends]
        print(
            "| backend | clients | s | req/s | record p50/p99 ms | recall p50/p99 ms | errors | episodes recorded / lost |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for row in report["concurrent"]:
            print(
                f"| {row['backend']} | {row['clients']} | {row['seconds']} | {row['requests_per_s']} | "
                f"{row['record_p50_ms']}/{row['record_p99_ms']} | {row['recall_p50_ms']}/{row['recall_p99_ms']} | "
                f"{row['errors']} | {row['episodes_recorded']} / {row['episodes_lost']} |"
            )
            for error in row["first_errors"]:
                print("  error:", error)
    if args.size and "scale" in parts:
        report["recall_at_scale"] = recall_at_scale(args.size, args.queries)
        row = report["recall_at_scale"]
        print("\n| lessons | queries | recall p50 ms | p99 ms |\n|---|---|---|---|")
        print(f"| {row['lessons']:,} | {row['queries']} | {row['p50_ms']} | {row['p99_ms']} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
