"""Crash safety with real processes: SIGKILL mid-reflection loses nothing and repeats nothing;
several processes writing one SQLite file at once stay consistent."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PRELUDE = """
import hashlib, json, re, sys, time
from lessonbank import Episode, LessonBank
from lessonbank.llm import FakeLLM

def reply(messages):
    n = re.search(r"task number (\\d+)", messages[-1]["content"]).group(1)
    w = hashlib.sha256(n.encode()).hexdigest()
    return (f"<situation>When deploying {w[:8]} {w[8:16]}</situation><mistake>pushed {w[16:24]}</mistake>"
            f"<correction>roll out {w[24:32]} {w[32:40]} behind a canary</correction><tags>deploy, canary</tags>")
"""


def start_script(body: str, *args: str) -> subprocess.Popen[str]:
    script = PRELUDE + textwrap.dedent(body)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return out


def job_states(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall())


def test_sigkill_before_reflection_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    url = f"sqlite:///{db}"
    slow = start_script(
        """
        bank = LessonBank(sys.argv[1], llm=FakeLLM(default=reply, delay_s=60))
        for n in range(20):
            bank.record(Episode(task=f"deploy task number {n}", error=f"rollout {n} failed"))
        print("recorded", flush=True)
        time.sleep(600)
    """,
        url,
    )
    assert slow.stdout is not None
    assert slow.stdout.readline().strip() == "recorded"
    deadline = time.monotonic() + 10
    while job_states(db).get("leased", 0) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    before = job_states(db)
    assert before.get("leased", 0) >= 1 and sum(before.values()) == 20 and "done" not in before
    slow.send_signal(signal.SIGKILL)
    slow.communicate()

    fast = finish(
        start_script(
            """
        llm = FakeLLM(default=reply)
        bank = LessonBank(sys.argv[1], llm=llm)
        assert bank.flush(timeout=60), bank.jobs()
        print(json.dumps({"calls": len(llm.calls)}))
        bank.close()
    """,
            url,
        )
    )
    assert json.loads(fast)["calls"] == 20

    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM episodes").fetchone()[0] == 20
        assert dict(conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall()) == {
            "done": 20
        }
        per_episode = conn.execute(
            "SELECT episode_id, count(*) FROM reflections GROUP BY episode_id"
        ).fetchall()
        assert len(per_episode) == 20 and all(count == 1 for _, count in per_episode)
        lessons = conn.execute("SELECT content, access_count FROM lessons").fetchall()
        assert len(lessons) == 20 == len({content for content, _ in lessons})
        assert all(uses == 0 for _, uses in lessons)  # no lesson was written (and reinforced) twice


def test_several_processes_write_one_file_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    writer = """
        me = int(sys.argv[2])
        bank = LessonBank(sys.argv[1])
        for n in range(40):
            bank.record(Episode(task=f"writer {me} task number {n}", error=f"error {me}-{n}"))
            words = hashlib.sha256(f"{me}-{n}".encode()).hexdigest()
            bank.add_lesson(f"writer {me}: " + " ".join(words[i:i + 6] for i in range(0, 36, 6)))
        bank.add_lesson("always run the migrations before the tests")
        bank.close()
    """
    procs = [start_script(writer, url, str(me)) for me in range(4)]
    for proc in procs:
        finish(proc)

    from lessonbank import LessonBank

    with LessonBank(url) as bank:
        assert bank.stats()["episodes"] == 160
        assert len(bank.jobs(limit=1000)) == 160
        lessons = bank.lessons(limit=1000)
        assert len(lessons) == 161
        (shared,) = [lesson for lesson in lessons if lesson.content.startswith("always run")]
        assert shared.access_count == 3
