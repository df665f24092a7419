"""Start-up: how long a fresh process takes to import lessonbank, list its commands or run a small one.

Each command runs ``--runs`` times in a fresh process, the commands taking turns (round robin) so a
burst of load on the machine falls on all of them alike. Reported per command: median and min wall
time, the ratio of the median to ``python -c "import typer, rich"`` (what any Typer + rich CLI pays),
how many modules it imported and which heavy packages among them (provider SDKs, NumPy, onnxruntime,
servers, database drivers; from one extra run with ``PYTHONPROFILEIMPORTTIME``).

Targets (issue 28): ``lessonbank --help`` median ≤ 4 × ``import typer, rich`` measured in the same
run; ``import lessonbank`` median ≤ 0.3 s. The exit code is 1 when one is missed.

    .venv/bin/python bench/startup.py
    .venv/bin/python bench/startup.py --runs 30 --out bench/results/startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "startup.json"
HEAVY = ("openai", "anthropic", "numpy", "onnxruntime", "fastapi", "mcp", "uvicorn", "redis", "psycopg")
HELP_RATIO_TARGET = 4.0
IMPORT_TARGET_S = 0.3
LESSONS = 50


def script() -> list[str]:
    """The installed ``lessonbank`` console script, else ``python -m lessonbank.cli``."""
    installed = Path(sys.executable).parent / "lessonbank"
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "lessonbank.cli"]


def commands(db: str) -> dict[str, list[str]]:
    python, cli = [sys.executable], script()
    return {
        "python -c pass": [*python, "-c", "pass"],
        "python -c 'import typer, rich'": [*python, "-c", "import typer, rich"],
        "python -c 'import lessonbank'": [*python, "-c", "import lessonbank"],
        "lessonbank --help": [*cli, "--help"],
        "lessonbank recall --help": [*cli, "recall", "--help"],
        "lessonbank stats": [*cli, "--db", db, "stats"],
        "lessonbank recall QUERY": [*cli, "--db", db, "recall", "rotate the logs", "--json"],
    }


def small_bank(folder: Path) -> str:
    from lessonbank import LessonBank

    url = f"sqlite:///{folder / 'bank.db'}"
    with LessonBank(url, worker=False) as bank:
        bank.import_lessons(
            [
                {"content": f"lesson {n}: rotate the logs of service {n} before the disk fills"}
                for n in range(LESSONS)
            ]
        )
    return url


def run_once(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return elapsed


def imported(argv: list[str], env: dict[str, str]) -> set[str]:
    """Module names the command imports, from Python's import-time log."""
    done = subprocess.run(
        argv, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, capture_output=True, text=True, timeout=120
    )
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2 and "cumulative" not in line
    }


def machine_info() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "load_average_at_start": [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else [],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh processes per command (default 15)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON results (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)

    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="lb-startup-") as tmp:
        folder = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LESSONBANK_", "PYTHONPROFILE"))}
        env["LESSONBANK_HOME"] = str(folder / "home")
        table = commands(small_bank(folder))
        for command in table.values():  # warm the file cache and the bytecode
            run_once(command, env)
        times: dict[str, list[float]] = {name: [] for name in table}
        for _ in range(args.runs):
            for name, command in table.items():
                times[name].append(run_once(command, env))
        modules = {name: imported(command, env) for name, command in table.items()}

    base = statistics.median(times["python -c 'import typer, rich'"])
    rows: list[dict[str, Any]] = []
    for name, series in times.items():
        roots = {module.split(".")[0] for module in modules[name]}
        rows.append(
            {
                "command": name,
                "median_s": round(statistics.median(series), 4),
                "min_s": round(min(series), 4),
                "max_s": round(max(series), 4),
                "ratio_to_typer_rich": round(statistics.median(series) / base, 2),
                "modules": len(modules[name]),
                "heavy": sorted(roots & set(HEAVY)),
                "runs_s": [round(value, 4) for value in series],
            }
        )
    by_name = {row["command"]: row for row in rows}
    targets = {
        "help_ratio": {
            "value": by_name["lessonbank --help"]["ratio_to_typer_rich"],
            "target": f"≤ {HELP_RATIO_TARGET}× import typer, rich",
            "met": by_name["lessonbank --help"]["ratio_to_typer_rich"] <= HELP_RATIO_TARGET,
        },
        "import_lessonbank_s": {
            "value": by_name["python -c 'import lessonbank'"]["median_s"],
            "target": f"≤ {IMPORT_TARGET_S} s",
            "met": by_name["python -c 'import lessonbank'"]["median_s"] <= IMPORT_TARGET_S,
        },
    }

    width = max(len(name) for name in table)
    print(f"{'command':<{width}}  {'median':>8}  {'min':>8}  {'× typer':>7}  {'modules':>7}  heavy")
    for row in rows:
        print(
            f"{row['command']:<{width}}  {row['median_s'] * 1000:>6.0f}ms  {row['min_s'] * 1000:>6.0f}ms  "
            f"{row['ratio_to_typer_rich']:>7.2f}  {row['modules']:>7}  {', '.join(row['heavy']) or '-'}"
        )
    for name, target in targets.items():
        print(
            f"{name}: {target['value']} (target {target['target']}): {'met' if target['met'] else 'MISSED'}"
        )

    machine["load_average_at_end"] = (
        [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else []
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"machine": machine, "runs": args.runs, "results": rows, "targets": targets}, indent=2)
        + "\n"
    )
    print(f"wrote {args.out}")
    return 0 if all(target["met"] for target in targets.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
