"""Many recorders and many workers on one shared store, with a worker killed mid-run.

    .venv/bin/python bench/load.py                          # Redis and PostgreSQL, 4 × 2,000 episodes
    .venv/bin/python bench/load.py --backends redis --episodes 500

Per backend, in a fresh database: 3 worker processes (``--workers``) reflect with a FakeLLM
whose answer is unique per episode, while 4 recorder processes (``--recorders``) each
``record()`` 2,000 failed episodes (``--episodes``) from ``_corpus.py``. Once 40 % of the jobs
are done, the first worker is killed with SIGKILL; its leased jobs must be picked up by the
others. Reported: episodes recorded per second (all recorders together), jobs processed per
second (first record to last job done), jobs lost (queued but never done: must be 0) and work
done twice (extra reflections or reinforced lessons: must be 0). Prints a table and writes JSON
(default ``bench/results/load.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _backends
import _corpus
from core import format_table, machine_info
from lessonbank import LessonBank, Settings
from lessonbank.llm import FakeLLM
from lessonbank.llm.base import Message
from lessonbank.ports import LessonQuery

SEED = 20260511
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "load.json"


def unique_reply(messages: Sequence[Message]) -> str:
    """A lesson that only this episode produces, so a job done twice would show."""
    digest = hashlib.sha256(messages[-1]["content"].encode()).hexdigest()
    parts = [digest[i : i + 6] for i in range(0, 42, 6)]
    return (
        f"<situation>Case {parts[0]} {parts[1]} {parts[2]}</situation>"
        f"<mistake>Missed {parts[3]} {parts[4]}</mistake>"
        f"<correction>Check {parts[5]} {parts[6]} first</correction><tags>bench</tags>"
    )


def settings(home: Path, **overrides: Any) -> Settings:
    return Settings(home=home).with_overrides(**overrides)


# --------------------------------------------------------------------- child processes


def run_recorder(url: str, offset: int, count: int, total: int, home: Path) -> None:
    source = _corpus.load_source(SEED)
    episodes = _corpus.make_episodes(source, total, SEED)[offset : offset + count]
    with LessonBank(url, llm=FakeLLM(), settings=settings(home), worker=False) as bank:
        start = time.perf_counter()
        for episode in episodes:
            bank.record(episode)
        elapsed = time.perf_counter() - start
    print(json.dumps({"recorded": len(episodes), "seconds": elapsed}), flush=True)


def run_worker(url: str, concurrency: int, home: Path) -> None:
    tuned = settings(home, worker_concurrency=concurrency, poll_interval_s=0.2)
    with LessonBank(url, llm=FakeLLM(default=unique_reply), settings=tuned, worker=False) as bank:
        worker = bank.new_worker(None)

        async def main() -> None:
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, worker.stop)
            await worker.run()

        asyncio.run(main())
        print(json.dumps({"processed": worker.processed}), flush=True)


# --------------------------------------------------------------------- the run


def bench_backend(backend: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    home = workdir / "home"
    total = args.recorders * args.episodes
    me = [sys.executable, str(Path(__file__).resolve())]
    with _backends.fresh_url(backend, workdir) as url:
        with LessonBank(url, settings=settings(home), worker=False):
            pass  # create the schema once, before the processes race for it
        workers = [
            subprocess.Popen(
                [*me, "--role", "work", "--db", url, "--concurrency", str(args.concurrency)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(args.workers)
        ]
        time.sleep(2.0)  # let the workers start (imports, connections) before the clock starts
        started = time.perf_counter()
        recorders = [
            subprocess.Popen(
                [
                    *me,
                    "--role",
                    "record",
                    "--db",
                    url,
                    "--offset",
                    str(n * args.episodes),
                    "--count",
                    str(args.episodes),
                    "--total",
                    str(total),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in range(args.recorders)
        ]
        probe = LessonBank(url, settings=settings(home), worker=False)
        killed_at = None
        recorded_at = None
        try:
            deadline = started + args.timeout
            while time.perf_counter() < deadline:
                counts = probe.store.count_jobs(None)
                done = counts.get("done", 0) + counts.get("dead", 0)
                if killed_at is None and done >= args.kill_at * total:
                    workers[0].send_signal(signal.SIGKILL)
                    killed_at = {"seconds": time.perf_counter() - started, "jobs_done": done}
                if recorded_at is None and all(p.poll() is not None for p in recorders):
                    recorded_at = time.perf_counter() - started
                if recorded_at is not None and not counts.get("queued") and not counts.get("leased"):
                    break
                time.sleep(0.1)
            drained = time.perf_counter() - started
            for proc in workers[1:]:
                proc.send_signal(signal.SIGTERM)
            outputs = [proc.communicate(timeout=60)[0] for proc in workers]
            rec = [json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1]) for p in recorders]
            counts = probe.store.count_jobs(None)
            stats = probe.stats()
            lessons = probe.store.list_lessons(LessonQuery(probe.namespace, statuses=()), limit=10 * total)
            # How many reflections wrote each lesson: two episodes whose prompts are identical rightly
            # share one lesson (reinforced once); a job run twice would reinforce it once too many.
            refs: dict[str, int] = {}
            for episode, _ in probe.store.recent_episodes(probe.namespace, limit=10 * total):
                for reflection in probe.store.reflections_for_episode(episode.id):
                    for lesson_id in reflection.lesson_ids:
                        refs[lesson_id] = refs.get(lesson_id, 0) + 1
        finally:
            probe.close()
    recorded = sum(r["recorded"] for r in rec)
    record_seconds = max(r["seconds"] for r in rec)  # recorders ran side by side
    jobs_total = sum(counts.values())
    reflections = sum(stats["reflections"].values())
    processed = [
        json.loads(out.strip().splitlines()[-1])["processed"] if out.strip() else None for out in outputs
    ]
    return {
        "backend": backend,
        "episodes_recorded": recorded,
        "record_seconds": record_seconds,
        "episodes_per_s": recorded / record_seconds,
        "jobs": jobs_total,
        "jobs_by_status": counts,
        "drain_seconds": drained,
        "jobs_per_s": counts.get("done", 0) / drained,
        "jobs_lost": jobs_total - counts.get("done", 0) - counts.get("dead", 0),
        "jobs_dead": counts.get("dead", 0),
        "reflections": reflections,
        "jobs_done_twice": reflections - counts.get("done", 0) - counts.get("dead", 0),
        "lessons": len(lessons),
        "lessons_duplicated": sum(
            max(0, lesson.access_count - (refs.get(lesson.id, 0) - 1)) for lesson in lessons
        )
        + len(lessons)
        - len({lesson.content_hash for lesson in lessons}),
        "lessons_shared_by_identical_prompts": sum(1 for lesson in lessons if refs.get(lesson.id, 0) > 1),
        "killed": killed_at,
        "processed_per_worker": processed,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="redis,postgres")
    parser.add_argument("--recorders", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=2000, help="per recorder")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4, help="jobs at once per worker")
    parser.add_argument("--kill-at", type=float, default=0.4, help="SIGKILL a worker once this share is done")
    parser.add_argument("--timeout", type=float, default=1200.0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--role", choices=["main", "record", "work"], default="main", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--offset", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--total", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    home = Path(os.environ.get("LESSONBANK_HOME", tempfile.gettempdir())) / "lessonbank-load"
    if args.role == "record":
        run_recorder(args.db, args.offset, args.count, args.total, home)
        return 0
    if args.role == "work":
        run_worker(args.db, args.concurrency, home)
        return 0
    results: dict[str, Any] = {
        "benchmark": "load",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {
            k: v
            for k, v in vars(args).items()
            if k in ("recorders", "episodes", "workers", "concurrency", "kill_at")
        },
        "backends": [],
        "skipped": {},
    }
    with tempfile.TemporaryDirectory(prefix="lessonbank-load-") as tmp:
        for backend in args.backends.split(","):
            reason = _backends.available(backend)
            if reason is not None:
                results["skipped"][backend] = reason
                continue
            print(
                f"{backend}: {args.recorders} × {args.episodes} episodes, {args.workers} workers ...",
                file=sys.stderr,
            )
            results["backends"].append(bench_backend(backend, args, Path(tmp)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    rows = [
        [
            r["backend"],
            f"{r['episodes_recorded']:,}",
            f"{r['episodes_per_s']:,.0f}",
            f"{r['jobs']:,}",
            f"{r['jobs_per_s']:,.1f}",
            str(r["jobs_lost"]),
            str(r["jobs_done_twice"]),
            str(r["lessons_duplicated"]),
            f"{r['killed']['seconds']:.1f}s" if r["killed"] else "no",
        ]
        for r in results["backends"]
    ]
    header = [
        "backend",
        "episodes",
        "recorded/s",
        "jobs",
        "jobs/s",
        "lost",
        "done twice",
        "lessons dup",
        "SIGKILL at",
    ]
    print(format_table(header, rows))
    print(f"JSON: {args.out}")
    bad = any(r["jobs_lost"] or r["jobs_done_twice"] or r["lessons_duplicated"] for r in results["backends"])
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
