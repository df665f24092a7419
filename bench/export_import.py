"""Peak memory and time of ``lessonbank export`` and ``lessonbank import`` on a 100k-lesson SQLite bank.

Every step is a ``lessonbank`` command run as a child process (``sys.executable -m lessonbank.cli``),
and its peak memory is that child's own maximum resident set size (``os.wait4``). The child imports
whichever lessonbank the environment gives it, so the same script measures an older revision:

    .venv/bin/python bench/export_import.py                                  # this checkout, 100k lessons
    git worktree add /tmp/base <rev>
    PYTHONPATH=/tmp/base/src .venv/bin/python bench/export_import.py --label before --out bench/results/export_import-before.json
    .venv/bin/python bench/export_import.py --size 2000                      # smoke run, seconds

Steps: the corpus (generated lessons from ``_corpus``, as ``core.py`` uses) imported into a fresh
bank from JSON Lines (this builds the bank); that bank exported as json and as jsonl; each export
imported into a fresh bank. Prints a table and writes JSON (default ``bench/results/export_import.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpus

SEED = 16


def run_cli(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``lessonbank <args>``; its exit code, wall time and peak memory (MiB), and its output's tail."""
    started = time.perf_counter()
    # Output goes to files, not pipes: the child is reaped by wait4, which gives this child's own
    # rusage (RUSAGE_CHILDREN would give the largest of every child so far).
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lessonbank.cli", *args], env=env, stdout=out, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    return {
        "command": "lessonbank " + " ".join(args),
        "exit": proc.returncode,
        "seconds": round(time.perf_counter() - started, 2),
        "max_rss_mib": round(usage.ru_maxrss / 1024, 1),  # KiB on Linux
        "stdout": stdout.decode(errors="replace").strip()[-300:],
        "stderr": stderr.decode(errors="replace").strip()[-300:],
    }


def lessonbank_source(env: dict[str, str]) -> dict[str, str]:
    """Where the child's lessonbank comes from, and that checkout's commit when it is a git one."""
    where = subprocess.run(
        [sys.executable, "-c", "import lessonbank; print(lessonbank.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    commit = subprocess.run(
        ["git", "-C", str(Path(where).parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {"module": where, "commit": commit or "unknown"}


def machine_info() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def write_corpus(path: Path, size: int) -> None:
    lessons = _corpus.make_lessons(_corpus.load_source(SEED), size, SEED)
    with path.open("w", encoding="utf-8") as file:
        for lesson in lessons:
            file.write(json.dumps(lesson, ensure_ascii=False) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=100_000, help="lessons in the bank (default 100,000)")
    parser.add_argument("--label", default="", help="a name for this run in the JSON, e.g. before / after")
    parser.add_argument("--out", type=Path, default=Path("bench/results/export_import.json"))
    parser.add_argument("--workdir", type=Path, help="where the banks and files go (default: a temp dir)")
    parser.add_argument("--write-corpus", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_corpus:
        write_corpus(args.write_corpus, args.size)
        return 0

    machine = machine_info()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lessonbank_export_import_"))
    workdir.mkdir(parents=True, exist_ok=True)
    if any(workdir.iterdir()):
        parser.error(f"--workdir {workdir} is not empty")
    home = workdir / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LESSONBANK_")}
    env |= {"LESSONBANK_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    source = lessonbank_source(env)

    corpus = workdir / "corpus.jsonl"
    # Made in a child: a child starts with its parent's memory (fork, then exec), and Linux counts that
    # in the child's peak RSS; this process must stay smaller than anything it measures.
    subprocess.run(
        [sys.executable, __file__, "--write-corpus", str(corpus), "--size", str(args.size)], check=True
    )

    def db(name: str) -> list[str]:
        return ["--db", f"sqlite:///{workdir / name}"]

    steps: list[tuple[str, list[str]]] = [
        ("build: import corpus jsonl", [*db("bank.db"), "import", str(corpus)])
    ]
    for fmt in ("json", "jsonl"):
        exported = workdir / f"export.{fmt}"
        steps += [
            (f"export --format {fmt}", [*db("bank.db"), "export", "--format", fmt, "-o", str(exported)]),
            (f"import {fmt} (fresh bank)", [*db(f"copy-{fmt}.db"), "import", str(exported)]),
        ]
    rows = []
    for name, cli_args in steps:
        row = {"step": name, **run_cli(cli_args, env)}
        file_arg = Path(cli_args[-1])
        row["file_mib"] = round(file_arg.stat().st_size / 2**20, 1) if file_arg.is_file() else None
        rows.append(row)
        print(f"  {name}: {row['max_rss_mib']} MiB, {row['seconds']} s, exit {row['exit']}", file=sys.stderr)

    print(f"\nlessonbank {source['commit']} ({source['module']}), {args.size:,} lessons {args.label}")
    print(f"{'step':<30} {'peak RSS MiB':>13} {'seconds':>9} {'file MiB':>9}  exit  output")
    for row in rows:
        file_mib = "" if row["file_mib"] is None else f"{row['file_mib']:.1f}"
        output = (row["stdout"] or row["stderr"]).splitlines()[-1:] or [""]
        print(
            f"{row['step']:<30} {row['max_rss_mib']:>13.1f} {row['seconds']:>9.2f} {file_mib:>9}  "
            f"{row['exit']:>4}  {output[0][:60]}"
        )
    result = {
        "label": args.label,
        "size": args.size,
        "lessonbank": source,
        "machine": {**machine, "load_average_after": [round(x, 2) for x in os.getloadavg()]},
        "bench_process_max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "steps": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if any(row["exit"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
