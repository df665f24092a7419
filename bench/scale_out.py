"""Two ``lessonbank serve`` processes over one store, as behind a load balancer.

For each shared store (a fresh PostgreSQL schema, a fresh Redis key prefix), seeded with 1,000 lessons:

1. **Write to visible**: ``--probes`` times, a lesson with a word of its own is added through one
   server (alternating) and the other is asked to recall it every ``--poll-ms`` until it answers with
   it. Reported: p50/p99/max of the time from the add's answer to the first recall that holds it.
2. **Throughput, one server against two**: ``--clients`` clients (50) record episodes back to back for
   ``--seconds`` (``_serve.RawClient``, as ``http_load.py``), all against one server, then spread
   evenly over both. Reported: records/s, record p50/p99, errors, episodes lost.

The machine has 2 cores shared by both servers, the store and the clients: two servers cannot add
cores here, so the second figure says what a second process costs or gains on the same machine.

    .venv/bin/python bench/scale_out.py
    .venv/bin/python bench/scale_out.py --backends postgres --seconds 10 --probes 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import _backends
import _corpus
from _serve import serving
from http_load import percentile, recorder
from lessonbank import Episode, LessonBank, RemoteBank
from lessonbank.remote.calls import call_of
from lessonbank.requests import RecordRequest

RESULTS = Path(__file__).resolve().parent / "results"


def write_to_visible(urls: list[str], probes: int, poll_s: float) -> dict[str, Any]:
    waits: list[float] = []
    missing = 0
    with ExitStack() as stack:
        banks = [stack.enter_context(RemoteBank(url)) for url in urls]
        for bank in banks:  # each server loads its indexes first: the probes measure keeping in step
            bank.recall("warm up", k=3)
        for probe in range(probes):
            writer, reader = banks[probe % 2], banks[(probe + 1) % 2]
            word = f"zq{uuid.uuid4().hex[:10]}"
            lesson = writer.add_lesson(
                f"When the {word} service restarts, drain its queue first (probe {probe})"
            )
            written = time.perf_counter()
            while True:
                if any(hit.lesson.id == lesson.id for hit in reader.recall(word, k=3)):
                    waits.append(time.perf_counter() - written)
                    break
                if time.perf_counter() - written > 30:
                    missing += 1
                    break
                time.sleep(poll_s)
    return {
        "probes": probes,
        "poll_ms": round(poll_s * 1000, 1),
        "visible_p50_ms": round(percentile(waits, 0.5) * 1000, 1),
        "visible_p99_ms": round(percentile(waits, 0.99) * 1000, 1),
        "visible_max_ms": round(max(waits, default=float("nan")) * 1000, 1),
        "not_visible_in_30_s": missing,
    }


def throughput(db: str, urls: list[str], clients: int, seconds: float) -> dict[str, Any]:
    source = _corpus.load_source(11)
    episodes = _corpus.make_episodes(source, 500, 11)
    bodies = [call_of(RecordRequest(episode=Episode.model_validate(e))).json for e in episodes]
    found: dict[str, Any] = {"record": [], "recorded": [], "errors": []}

    async def run() -> None:
        until = time.monotonic() + seconds
        await asyncio.gather(
            *(recorder(urls[i % len(urls)], bodies, until, i, found) for i in range(clients))
        )

    started = time.monotonic()
    asyncio.run(run())
    elapsed = time.monotonic() - started
    with LessonBank(db, worker=False) as bank:
        store, namespace = bank.services.scope.store, bank.services.scope.namespace
        stored = {e.id for e, _ in store.recent_episodes(namespace, since=0.0, limit=10_000_000)}
    return {
        "servers": len(urls),
        "clients": clients,
        "seconds": round(elapsed, 1),
        "records": len(found["recorded"]),
        "records_per_s": round(len(found["recorded"]) / elapsed, 1),
        "record_p50_ms": round(percentile(found["record"], 0.5) * 1000, 2),
        "record_p99_ms": round(percentile(found["record"], 0.99) * 1000, 2),
        "errors": len(found["errors"]),
        "first_errors": found["errors"][:3],
        "episodes_lost": sum(1 for episode_id in found["recorded"] if episode_id not in stored),
    }


def one_backend(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    source = _corpus.load_source(11)
    with (
        tempfile.TemporaryDirectory(prefix="lb-scale-") as tmp,
        _backends.fresh_url(backend, Path(tmp)) as db,
    ):
        with LessonBank(db, worker=False) as bank:
            bank.import_lessons(_corpus.make_lessons(source, 1_000, 11))
        row: dict[str, Any] = {"backend": backend}
        with ExitStack() as stack:
            urls = [stack.enter_context(serving(db, Path(tmp) / f"home{n}")) for n in range(2)]
            row["visible"] = write_to_visible(urls, args.probes, args.poll_ms / 1000)
            row["one_server"] = throughput(db, urls[:1], args.clients, args.seconds)
            row["two_servers"] = throughput(db, urls, args.clients, args.seconds)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="postgres,redis")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--probes", type=int, default=50)
    parser.add_argument("--poll-ms", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "scale_out.json")
    args = parser.parse_args()
    report: dict[str, Any] = {"load_average": os.getloadavg(), "python": sys.version.split()[0], "rows": []}
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        why = _backends.available(backend)
        if why is not None:
            print(f"skipping {backend}: {why}")
            continue
        report["rows"].append(one_backend(backend, args))
    print(
        "| store | write→visible p50 / p99 / max ms | not visible | records/s one server | two servers | p99 ms one / two | lost |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in report["rows"]:
        seen, one, two = row["visible"], row["one_server"], row["two_servers"]
        print(
            f"| {row['backend']} | {seen['visible_p50_ms']} / {seen['visible_p99_ms']} / {seen['visible_max_ms']} | "
            f"{seen['not_visible_in_30_s']} | {one['records_per_s']} | {two['records_per_s']} | "
            f"{one['record_p99_ms']} / {two['record_p99_ms']} | {one['episodes_lost'] + two['episodes_lost']} |"
        )
        for error in one["first_errors"] + two["first_errors"]:
            print("  error:", error)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
