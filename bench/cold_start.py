"""Cold start: the first recall of a new process, on SQLite and PostgreSQL (and Redis), with and without
the index snapshots, lexical and hybrid.

For each store and size, one bank is filled with ``import_lessons`` (the corpus's lessons of
``_corpus.py`` up to 100k, then remixed sentences of it), then a fresh process opens it and recalls
once, ``--runs`` times in a row, with its own ``LESSONBANK_HOME``: per mode, ``lexical`` (no
embedder) and ``hybrid`` (the static embedder; the bench first runs ``embed_missing``, timed). The
first process of a mode finds no snapshot: it loads every term vector (and vector) and leaves the
snapshots (beside a SQLite bank, in ``$LESSONBANK_HOME/cache`` for a server store); the next ones
start from them. Each process reports, timed inside it: opening the bank (imports included) and the
first recall, the recall alone, the CPU seconds of the process up to the answer (all its threads,
the interpreter's start included: on a busy machine wall time says more about the machine), and its
peak resident memory (``VmHWM``, its own: ``ru_maxrss`` would count the bench's, which it is forked
from; mapped snapshot pages it touched count too). The bench's process holds no bank while they run.
The processes import lessonbank from compiled bytecode, as an installed package does
(``compileall`` into a pycache folder of the bench's own first: a checkout run with
``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module in every process, ~0.3 s).
``--keep DIR`` keeps the banks in ``DIR`` (a SQLite file, a PostgreSQL schema, a Redis prefix) and
reuses them on the next run: a million lessons take ~40 min to import and embed.

A PostgreSQL bank is vacuumed and analysed before its first recalls, and again after
``embed_missing`` (``--no-vacuum`` skips it), as a server's autovacuum does after an import: this machine's server runs with autovacuum off, and an
unvacuumed table is read row by row where a vacuumed one answers from its index (the check that no
lesson lacks a term vector counts the namespace's lessons: ~110 ms at 100k unvacuumed, ~20 ms
vacuumed).

Targets (issue 33): first recall in a new process ≤ 0.5 s at 100k lessons and ≤ 3 s at 1M on SQLite
and PostgreSQL, peak RSS ≤ 1.5 GB at 1M.

    .venv/bin/python bench/cold_start.py --sizes 100000 --backends sqlite,postgres
    .venv/bin/python bench/cold_start.py --sizes 1000000 --runs 3 --keep /tmp/lb-cold-banks
    .venv/bin/python bench/cold_start.py --sizes 10000 --runs 3 --modes lexical --out /tmp/cold.json

Prints a table and writes JSON (default ``bench/results/cold_start.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _backends
import _corpus
import _serve
import lessonbank
from core import format_table, load_average, machine_info
from embed_missing import SEED, imported_bank, timed_run
from lessonbank.retrieval.embedders import make_embedder
from lessonbank.retrieval.embedders.static import default_cache_dir

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "cold_start.json"
# The peak is the process's own (VmHWM): ru_maxrss keeps the high-water mark of the process it was
# forked from across exec, so it reported the bench's own size (~380 MB once it holds an embedder).
FIRST_RECALL = (
    "import resource, sys, time; t = time.perf_counter(); from lessonbank import LessonBank; "
    "bank = LessonBank(sys.argv[1], worker=False, embedder=sys.argv[3] or None); "
    "opened = time.perf_counter() - t; bank.recall(sys.argv[2], mode=sys.argv[4]); "
    "took = time.perf_counter() - t; usage = resource.getrusage(resource.RUSAGE_SELF); bank.close(); "
    "peak = [int(line.split()[1]) * 1024 for line in open('/proc/self/status') if line.startswith('VmHWM:')]; "
    "print(opened, took, usage.ru_utime + usage.ru_stime, peak[0] if peak else usage.ru_maxrss * 1024)"
)
EMBEDDER = "static"  # hybrid mode's: the fast one, its model distilled once and shared by every process


def first_recalls(
    url: str, home: Path, prompts: list[str], runs: int, mode: str, pycache: Path
) -> list[dict[str, Any]]:
    embedder = EMBEDDER if mode == "hybrid" else ""
    out = []
    for prompt in prompts[:runs]:
        done = subprocess.run(
            [sys.executable, "-c", FIRST_RECALL, url, prompt, embedder, mode],
            env=compiled(_serve.environment(home), pycache),
            capture_output=True,
            timeout=1800,
            check=True,
        )
        opened, took, cpu, peak = (float(part) for part in done.stdout.split()[-4:])
        out.append({"open_s": round(opened, 3), "recall_s": round(took - opened, 3), "first_recall_s": round(took, 3),
                    "cpu_s": round(cpu, 3), "peak_rss_mb": round(peak / 2**20), "snapshots": snapshots(url, home)})  # fmt: skip
    return out


def compiled(env: dict[str, str], pycache: Path) -> dict[str, str]:
    """``env`` with Python reading and writing bytecode in ``pycache``."""
    env = {key: value for key, value in env.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def compile_package(pycache: Path) -> None:
    """lessonbank compiled into ``pycache`` once, before any process is timed."""
    package = Path(lessonbank.__file__).resolve().parent
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(package)],
        env=compiled(dict(os.environ), pycache),
        check=True,
        capture_output=True,
    )


def vacuum(url: str) -> None:
    """VACUUM ANALYZE every table of the PostgreSQL bank at ``url`` (its ``?schema=``)."""
    import psycopg

    schema = url.partition("?schema=")[2]
    with psycopg.connect(_backends.POSTGRES_URL, autocommit=True) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()
        for (table,) in tables:
            conn.execute(f'VACUUM ANALYZE "{schema}"."{table}"')


def snapshots(url: str, home: Path) -> int:
    """Snapshot files the bank has now (lexical and vector): beside a SQLite bank, else in the
    home's cache folder."""
    if url.startswith("sqlite:///"):
        return len(list(Path(f"{url.removeprefix('sqlite:///')}.lexicon").glob("*.*snap")))
    return len(list((home / "cache" / "index-snapshots").glob("*/*.*snap")))


def fresh_home(url: str, folder: Path) -> Path:
    """A home without snapshots (a SQLite bank's, beside it, removed too) sharing the bench's
    distilled static model, so no process distils it again."""
    if url.startswith("sqlite:///"):
        shutil.rmtree(f"{url.removeprefix('sqlite:///')}.lexicon", ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "models").symlink_to(default_cache_dir().resolve(), target_is_directory=True)
    return folder


def run(args: argparse.Namespace) -> dict[str, Any]:
    source = _corpus.load_source(SEED)
    prompts = _corpus.make_queries(source, max(args.runs, 1), SEED)
    results: dict[str, Any] = {
        "benchmark": "cold_start",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {
            "sizes": args.sizes,
            "backends": args.backends,
            "runs": args.runs,
            "modes": args.modes,
            "embedder": EMBEDDER,
            "kept_banks": str(args.keep) if args.keep else None,
            "postgres_vacuumed": args.vacuum,
        },
        "rows": [],
        "skipped": {},
    }
    embedder = make_embedder(EMBEDDER) if "hybrid" in args.modes else None
    if embedder is not None:
        embedder.embed_query("distil or load the model before any clock starts")
    for backend in args.backends:
        reason = _backends.available(backend)
        if reason is not None:
            results["skipped"][backend] = reason
            continue
        for size in args.sizes:
            with imported_bank(backend, size, source, "lb-cold-", args.keep) as (url, tmp, import_s):
                if backend == "postgres" and args.vacuum:
                    vacuum(url)
                pycache = tmp / "pycache"
                compile_package(pycache)
                for mode in args.modes:
                    embed_s, embedded = None, None
                    if mode == "hybrid":
                        print(f"{backend}: {size:,} lessons: embed_missing ...", file=sys.stderr)
                        embedded = timed_run(url, embedder)
                        embed_s = embedded["seconds"]
                        if backend == "postgres" and args.vacuum:  # as autovacuum would after it
                            vacuum(url)
                        print(
                            json.dumps({k: v for k, v in embedded.items() if k != "page_s"}), file=sys.stderr
                        )
                    print(f"{backend}: {size:,} lessons: {mode} first recalls ...", file=sys.stderr)
                    home = fresh_home(url, tmp / f"home-{mode}")
                    processes = first_recalls(url, home, prompts, args.runs, mode, pycache)
                    row = {"backend": backend, "lessons": size, "mode": mode,
                           "import_s": None if import_s is None else round(import_s, 1),
                           "embed_s": embed_s, "embed_missing": embedded, "without_snapshot": processes[0], "from_snapshot": processes[1:],
                           "load_average_after": load_average()}  # fmt: skip
                    print(json.dumps(row), file=sys.stderr)
                    results["rows"].append(row)
    return results


def report(results: dict[str, Any]) -> str:
    rows = []
    for row in results["rows"]:
        cold, warm = row["without_snapshot"], row["from_snapshot"]
        best = sorted(p["first_recall_s"] for p in warm)
        cpu = sorted(p.get("cpu_s", 0.0) for p in warm)
        rows.append(
            [
                row["backend"],
                f"{row['lessons']:,}",
                row.get("mode", "lexical"),
                f"{cold['first_recall_s']:.2f} ({cold['recall_s']:.2f}) / {cold['peak_rss_mb']:,}",
                f"{best[len(best) // 2]:.2f} / {max(best):.2f} ({min(p['recall_s'] for p in warm):.2f})",
                f"{cpu[len(cpu) // 2]:.2f}",
                f"{max(p['peak_rss_mb'] for p in warm):,}",
                " ".join(f"{x:.2f}" for x in row["load_average_after"]),
            ]
        )
    header = ["store", "lessons", "recall", "no snapshot: first recall s (recall alone) / peak MB",
              "from snapshot: p50 / max s (best recall alone)", "from snapshot: CPU s p50", "from snapshot: peak MB",
              "load after"]  # fmt: skip
    lines = [format_table(header, rows)]
    for row in results["rows"]:
        done = row.get("embed_missing")
        if done:
            lines.append(
                f"embed_missing before the hybrid runs, {row['backend']} {row['lessons']:,}: "
                f"{done['embedded']:,} vectors in {done['seconds']} s, {done['per_s']:,}/s; first → last "
                f"tenth of pages {done['first_tenth_per_s']:,} → {done['last_tenth_per_s']:,}/s"
            )
    if any(row["backend"] == "postgres" for row in results["rows"]):
        vacuumed = results["config"].get("postgres_vacuumed", False)
        lines.append(
            f"PostgreSQL bank {'vacuumed and analysed' if vacuumed else 'as imported (not vacuumed)'} before its first recalls"
        )
    if results["skipped"]:
        lines.append("Skipped: " + "; ".join(f"{k}: {v}" for k, v in results["skipped"].items()))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--runs", type=int, default=4, help="fresh processes per bank (the first makes the snapshot)"
    )
    parser.add_argument("--modes", default="lexical,hybrid", help="lexical, hybrid (the static embedder)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--keep", type=Path, help="keep the banks in this folder and reuse them")
    parser.add_argument(
        "--no-vacuum",
        dest="vacuum",
        action="store_false",
        help="time a PostgreSQL bank as imported, unvacuumed",
    )
    args = parser.parse_args(argv)
    args.modes = [part for part in args.modes.split(",") if part]
    if set(args.modes) - {"lexical", "hybrid"}:
        parser.error("modes are lexical, hybrid")
    args.sizes = [int(part.replace("_", "")) for part in args.sizes.split(",") if part.strip()]
    args.backends = [part for part in args.backends.split(",") if part]
    unknown = set(args.backends) - {"sqlite", "postgres", "redis"}
    if unknown or args.runs < 2:
        parser.error("backends are sqlite, postgres, redis; --runs is at least 2")
    results = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(report(results))
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
