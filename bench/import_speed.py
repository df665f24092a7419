"""Import speed alone: ``import_lessons()`` of short and of 1 KB lessons into a fresh bank, per store.

    .venv/bin/python bench/import_speed.py                                  # sqlite,postgres; 100k each
    .venv/bin/python bench/import_speed.py --backends sqlite --kinds short --size 20000 --profile
    PYTHONPATH=/tmp/base/src .venv/bin/python bench/import_speed.py --label before --out FILE

- short lessons: ``_corpus.make_lessons`` (two reflection sentences, 2–4 tags, a task type: ~200 chars);
- 1 KB lessons: reflection sentences of one task joined up to ~1,000 characters, with the task's first
  line as ``learned_from`` (the shape of ``bench/scale.py``'s docstring lessons, from the same data
  file as the short ones, so no tool or download is needed).

Each (store, kind) imports into a fresh bank in one ``import_lessons()`` call, no embedder; the rate is
lessons added per second of that call. Beside it, the importing process's CPU and its preparing workers'
(``worker CPU s``: child processes, counted once they have ended); ``--no-worker`` prepares every batch
in the importing process. ``--profile`` prints the top functions of a cProfile run instead
of timing (profiling slows Python down; its figures are shares, not rates). Prints a table and writes
JSON (default ``bench/results/import_speed.json``) with the load average beside each row.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _backends
import _corpus
from core import bench_settings, format_table, load_average, machine_info
from lessonbank import LessonBank

SEED = 20260511
LONG_CHARS = 1_000
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "import_speed.json"


def long_lessons(source: _corpus.Source, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` distinct lessons of about ``LONG_CHARS`` characters each (see the module docstring)."""
    rng = random.Random(seed)
    pool = source.lesson_sentences
    by_task: dict[int, list[_corpus.Sentence]] = {}
    for sentence in pool:
        by_task.setdefault(sentence.task, []).append(sentence)
    seen: set[str] = set()
    lessons: list[dict[str, Any]] = []
    while len(lessons) < count:
        first = rng.choice(pool)
        task = source.tasks[first.task]
        own = by_task[first.task]
        parts, size = [first.text], len(first.text)
        while size < LONG_CHARS:
            # Mostly the task's own sentences, some from anywhere (a lesson wanders a little).
            text = rng.choice(own if rng.random() < 0.7 else pool).text
            parts.append(text)
            size += len(text) + 1
        content = " ".join(parts)
        if content in seen:
            continue
        seen.add(content)
        keywords = list(task.keywords)
        tags = rng.sample(keywords, min(len(keywords), rng.randint(_corpus.MIN_TAGS, _corpus.MAX_TAGS)))
        lessons.append(
            {"content": content, "tags": tags, "task_type": task.task_type, "learned_from": task.first_line}
        )
    return lessons


def lessons_of(kind: str, size: int) -> list[dict[str, Any]]:
    source = _corpus.load_source(SEED)
    if kind == "short":
        return _corpus.make_lessons(source, size, SEED)
    return long_lessons(source, size, SEED)


def import_once(
    backend: str, lessons: list[dict[str, Any]], workdir: Path, profile: bool, worker: bool = True
) -> dict[str, Any]:
    with (
        _backends.fresh_url(backend, workdir) as url,
        LessonBank(url, settings=bench_settings(workdir / "home"), worker=False) as bank,
    ):
        profiler = cProfile.Profile() if profile else None
        load = load_average()
        start, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
        if profiler is not None:
            profiler.enable()
        # worker=False: prepared in this process alone (the code before had no worker to turn off)
        counts = (
            bank.import_lessons(lessons)
            if worker
            else bank.services.intake.import_lessons(lessons, worker=False)
        )
        if profiler is not None:
            profiler.disable()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        children = _children_cpu() - children
        row: dict[str, Any] = {
            "backend": backend,
            **counts,
            "seconds": round(seconds, 2),
            "lessons_per_s": round(counts["added"] / seconds),
            # This process's CPU alone (a database server's is not in it): steadier than the wall
            # clock on a shared machine.
            "cpu_s": round(cpu, 2),
            "lessons_per_cpu_s": round(counts["added"] / cpu),
            # The preparing worker's CPU (a child process, counted once it has ended).
            "worker_cpu_s": round(children, 2),
            "load_before": load,
            "load_after": load_average(),
        }
        if profiler is not None:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(30)
            row["profile"] = out.getvalue()
        return row


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--kinds", default="short,1kb", help="short, 1kb or both")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--label", default="", help="a name for this run (e.g. before / after)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each import")
    parser.add_argument("--no-worker", action="store_true", help="prepare in the importing process only")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    rows = []
    for kind in args.kinds.split(","):
        lessons = lessons_of(kind, args.size)
        chars = sum(len(lesson["content"]) for lesson in lessons) / max(len(lessons), 1)
        for backend in args.backends.split(","):
            missing = _backends.available(backend)
            if missing:
                print(f"{backend}: skipped ({missing})", file=sys.stderr)
                continue
            print(f"{backend}: {kind}: importing {len(lessons):,} ...", file=sys.stderr)
            with tempfile.TemporaryDirectory(prefix="lessonbank-import-") as tmp:
                row = import_once(backend, lessons, Path(tmp), args.profile, not args.no_worker)
            row.update(kind=kind, mean_chars=round(chars))
            if "profile" in row:
                print(row.pop("profile"), file=sys.stderr)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    table = format_table(
        [
            "store",
            "lessons",
            "size",
            "added",
            "seconds",
            "lessons/s",
            "per client CPU s",
            "worker CPU s",
            "load (1 min)",
        ],
        [
            [
                r["backend"],
                r["kind"],
                f"{r['mean_chars']} chars",
                f"{r['added']:,}",
                f"{r['seconds']:.1f}",
                f"{r['lessons_per_s']:,}",
                f"{r['lessons_per_cpu_s']:,}",
                f"{r.get('worker_cpu_s', 0):.1f}",
                f"{r['load_before'][0]:.2f}" if r["load_before"] else "",
            ]
            for r in rows
        ],
    )
    print(table)
    if not args.profile:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {"label": args.label, "size": args.size, "machine": machine_info(), "rows": rows}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
