"""What a one-hour Claude Code session leaves behind in the bank, through the hooks.

One scripted session on a small web project replays through :class:`ClaudeHooks` (the code
``lessonbank hooks claude`` runs for each payload) with payloads shaped as the Claude Code CLI sends
them (``SessionStart``, ``UserPromptSubmit``, ``PostToolUse``, ``PostToolUseFailure``, ``Stop``,
``PreCompact``, ``SessionEnd``) and a transcript written as it goes, on a scripted clock: 40 prompts
over 60 minutes in five tasks (fix a test, add a migration, build the front end, a second endpoint and
migration, push). Some Bash commands fail (the package not installed for pytest, the database not up
for alembic, ``npm run build`` before ``npm ci``, a lint error, a rejected push); the fourth task runs
into two of those commands again. A ``Stop`` ends each task; one auto compaction falls in the
middle; ``SessionEnd`` closes the hour.

The bank (SQLite, six seeded project lessons) has no worker in the hook's process, as with the
command hook; after each ``Stop`` a worker drains the queue (reflections, attribution) as a
``lessonbank worker`` would. A ``FakeLLM`` answers each reflection prompt with the correction for the
failure it names, so a failure becomes a lesson that later prompts get injected.

    .venv/bin/python bench/claude_session.py
    .venv/bin/python bench/claude_session.py --out bench/results/claude_session.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lessonbank import LessonBank
from lessonbank.integrations.claude.hooks import ClaudeHooks
from lessonbank.integrations.claude.session import Sessions
from lessonbank.llm import FakeLLM
from lessonbank.models import Episode

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "claude_session.json"
SESSION = "5b1f0c2e-7d3a-4e8b-9c61-2f4a8d0e6b17"
CWD = "/home/dev/shop"
START = 1_767_600_000.0  # 2026-01-05 08:00 UTC
HOUR_S = 3600.0

SEEDED = [
    "The shop's API lives in src/shop/api; each route has a test module under tests/api.",
    "Money amounts are integer cents everywhere in the shop; never store floats for prices.",
    "Alembic migrations in the shop are generated with `alembic revision --autogenerate` and reviewed by hand.",
    "The front end is a Vite app in web/; its components are tested with vitest.",
    "Feature branches are named feat/<ticket> and merged with squash commits.",
    "Log with structlog's bound logger in the shop; never print() in request handlers.",
]

# What in a reflection prompt (the command, the error) names a failure → the lesson it teaches:
# situation, mistake, the correction (its rule), the steps, tags.
CORRECTIONS: list[tuple[tuple[str, ...], tuple[str, str, str, str, str]]] = [
    (
        ("alembic", "could not connect"),
        (
            "running alembic migrations for the shop",
            "ran alembic with the database container down",
            "Start the database first (docker compose up -d db) before alembic revision or alembic upgrade "
            "head; alembic cannot connect to server otherwise.",
            "docker compose up -d db\nalembic upgrade head",
            "alembic, migration, database, docker",
        ),
    ),
    (
        ("npm run build", "vite"),
        (
            "building the shop's front end",
            "ran npm run build before installing dependencies",
            "Run npm ci in web/ before npm run build; without node_modules the Vite build fails with Cannot "
            "find module 'vite'.",
            "cd web && npm ci\ncd web && npm run build",
            "npm, vite, build, frontend",
        ),
    ),
    (
        ("ruff", "F401"),
        (
            "linting the shop",
            "left an unused import behind after a refactor",
            "Run ruff check --fix src before committing: ruff flags unused imports (F401) left by refactors.",
            "ruff check --fix src\nruff check src",
            "ruff, lint, imports",
        ),
    ),
    (
        ("git push", "non-fast-forward"),
        (
            "pushing a feature branch of the shop",
            "pushed without pulling the teammates' commits",
            "Pull with git pull --rebase before git push on a shared feature branch; a push behind the remote "
            "is rejected as non-fast-forward.",
            "git pull --rebase origin <branch>\ngit push origin <branch>",
            "git, push, rebase",
        ),
    ),
    (
        ("pytest", "No module named", "ModuleNotFou", "pip list"),
        (
            "running pytest in the shop before the package is installed",
            "ran pytest in a fresh virtualenv",
            "Install the shop in editable mode (pip install -e .) before running pytest, or the tests fail "
            "with ModuleNotFoundError: No module named 'shop'.",
            "pip install -e .\npytest tests",
            "pytest, tests, install",
        ),
    ),
]
FAILED = ("status: failure", "status: partial", "Result: FAILURE", "Result: PARTIAL")


def reflect(messages: Sequence[Any]) -> str:
    """The scripted reflection model: the lesson of the failure the prompt names, in the shape the
    prompt asks for (the reflexion reflector's blocks, or the dual reflector's principle and
    procedure); a success teaches its steps, a failure it does not know is skipped."""
    prompt = "\n".join(str(message["content"]) for message in messages)
    failed = any(marker in prompt for marker in FAILED)
    found = next((lesson for keys, lesson in CORRECTIONS if failed and any(k in prompt for k in keys)), None)
    if "PRINCIPLE:" not in prompt:
        if found is None:
            return "<skip>nothing actionable</skip>"
        situation, mistake, correction, _, tags = found
        return (
            f"<situation>{situation}</situation><mistake>{mistake}</mistake>"
            f"<correction>{correction}</correction><tags>{tags}</tags>"
        )
    if found is None:  # a routine success: its task and steps, as a cheap model sums them up
        task = prompt.split("Task: ", 1)[-1].split("\n", 1)[0].strip()
        steps = prompt.split("Steps taken:", 1)[-1].strip().splitlines()[:4] or [task]
        numbered = "\n".join(f"{n}. {step}" for n, step in enumerate(steps, 1))
        return f"PRINCIPLE: IF asked to {task} THEN follow the steps that worked BECAUSE they passed\nPROCEDURE:\n{numbered}"
    situation, _, correction, steps, _ = found
    numbered = "\n".join(f"{n}. {step}" for n, step in enumerate(steps.splitlines(), 1))
    return f"PRINCIPLE: IF {situation} THEN {correction} BECAUSE it failed otherwise\nPROCEDURE:\n{numbered}"


def teaches(text: str) -> bool:
    """Whether a lesson's text is one a failure taught (one of :data:`CORRECTIONS`)."""
    return any(lesson[2][:40] in text for _, lesson in CORRECTIONS)


@dataclass
class Call:
    """One tool call of a turn: a Bash command (its output, exit code) or another tool."""

    tool: str
    input: dict[str, Any]
    output: str = ""
    exit_code: int = 0


def bash(command: str, output: str = "", exit_code: int = 0) -> Call:
    return Call("Bash", {"command": command, "description": command.split()[0]}, output, exit_code)


def edit(path: str) -> Call:
    return Call("Edit", {"file_path": f"{CWD}/{path}", "old_string": "…", "new_string": "…"}, "ok")


def read(path: str) -> Call:
    return Call("Read", {"file_path": f"{CWD}/{path}"}, "…")


PYTEST_NO_MODULE = "ImportError while loading conftest\nE   ModuleNotFoundError: No module named 'shop'"
ALEMBIC_DOWN = (
    "sqlalchemy.exc.OperationalError: (psycopg.OperationalError) could not connect to server: "
    'Connection refused\n\tIs the server running on host "localhost" and accepting TCP/IP connections on port 5432?'
)
VITE_MISSING = "Error: Cannot find module 'vite'\nRequire stack:\n- /home/dev/shop/web/node_modules/.bin/vite"
RUFF_F401 = "src/shop/api/orders.py:3:8: F401 [*] `json` imported but unused\nFound 1 error."
PUSH_REJECTED = (
    " ! [rejected]        feat/SHOP-142 -> feat/SHOP-142 (non-fast-forward)\n"
    "error: failed to push some refs to 'github.com:acme/shop.git'"
)


@dataclass
class Task:
    """A stretch of work ended by ``Stop``: its prompts, each with the tool calls of its turn."""

    name: str
    turns: list[tuple[str, list[Call]]] = field(default_factory=list)


def tasks() -> list[Task]:
    """The hour: five tasks, 40 prompts."""
    fix = Task(
        "fix the failing orders test",
        [
            (
                "The test for GET /orders/{id} fails with a 500 — run pytest on tests/api/test_orders.py and fix it",
                [bash("pytest tests/api/test_orders.py", PYTEST_NO_MODULE, 4)],
            ),
            (
                "why can't pytest import the shop package?",
                [read("pyproject.toml"), bash("pip list | grep shop", "", 1)],
            ),
            (
                "ok, make pytest find the package and run the orders tests again",
                [
                    bash("pytest tests/api/test_orders.py", PYTEST_NO_MODULE, 4),
                    bash("pip install -e .", "Successfully installed shop-0.4.0"),
                    bash("pytest tests/api/test_orders.py", "Exit code 1\n1 failed, 6 passed in 0.41s", 1),
                ],
            ),
            (
                "the failing one is the missing order case — look at the handler",
                [read("src/shop/api/orders.py")],
            ),
            ("return 404 for an unknown order id instead of raising", [edit("src/shop/api/orders.py")]),
            ("run the orders tests", [bash("pytest tests/api/test_orders.py", "7 passed in 0.38s")]),
            ("also add a test for a malformed id", [edit("tests/api/test_orders.py")]),
            ("run the whole API suite", [bash("pytest tests/api", "42 passed in 2.10s")]),
        ],
    )
    migrate = Task(
        "add a discount column with a migration",
        [
            (
                "Add a discount_cents column to orders with an alembic migration",
                [read("src/shop/models.py"), edit("src/shop/models.py")],
            ),
            (
                "generate the alembic migration for it",
                [bash("alembic revision --autogenerate -m 'order discount'", ALEMBIC_DOWN, 1)],
            ),
            (
                "start what alembic needs and generate it again",
                [
                    bash("docker compose up -d db", "Container shop-db-1  Started"),
                    bash(
                        "alembic revision --autogenerate -m 'order discount'",
                        "Generating versions/7c1e_order_discount.py ... done",
                    ),
                ],
            ),
            (
                "check the generated migration and apply it",
                [
                    read("migrations/versions/7c1e_order_discount.py"),
                    bash("alembic upgrade head", "Running upgrade 5a2d -> 7c1e"),
                ],
            ),
            ("use the discount in the order total", [edit("src/shop/pricing.py")]),
            ("add pricing tests for discounts", [edit("tests/test_pricing.py")]),
            ("run the pricing tests", [bash("pytest tests/test_pricing.py", "9 passed in 0.22s")]),
            (
                "lint the change",
                [
                    bash("ruff check src", RUFF_F401, 1),
                    edit("src/shop/api/orders.py"),
                    bash("ruff check src", "All checks passed!"),
                ],
            ),
        ],
    )
    front = Task(
        "show the discount in the basket",
        [
            (
                "Show the order discount in the basket component of the web app",
                [read("web/src/Basket.tsx"), edit("web/src/Basket.tsx")],
            ),
            ("build the front end to check it compiles", [bash("cd web && npm run build", VITE_MISSING, 1)]),
            (
                "fix the build",
                [
                    bash("cd web && npm ci", "added 412 packages in 9s"),
                    bash("cd web && npm run build", "✓ built in 3.41s"),
                ],
            ),
            ("add a vitest for the discount line", [edit("web/src/Basket.test.tsx")]),
            (
                "run the web tests",
                [bash("cd web && npx vitest run", "Test Files  4 passed (4)\n     Tests  19 passed (19)")],
            ),
            ("format the discount as money", [edit("web/src/money.ts")]),
            (
                "run them again",
                [bash("cd web && npx vitest run", "Test Files  4 passed (4)\n     Tests  20 passed (20)")],
            ),
            (
                "looks good, commit the front-end part",
                [
                    bash(
                        "git add web && git commit -m 'Basket shows the discount'",
                        "[feat/SHOP-142 3f1a2b4] Basket shows the discount",
                    )
                ],
            ),
        ],
    )
    refunds = Task(
        "a refunds endpoint with its own migration",
        [
            (
                "Add POST /orders/{id}/refunds with a refunds table; start with the migration",
                [edit("src/shop/models.py")],
            ),
            (
                "generate and apply the alembic migration for refunds",
                [
                    bash("docker compose up -d db", "Container shop-db-1  Running"),
                    bash(
                        "alembic revision --autogenerate -m refunds",
                        "Generating versions/9d4f_refunds.py ... done",
                    ),
                    bash("alembic upgrade head", "Running upgrade 7c1e -> 9d4f"),
                ],
            ),
            ("now the route and its handler", [edit("src/shop/api/refunds.py")]),
            ("write tests for the refunds route", [edit("tests/api/test_refunds.py")]),
            (
                "run pytest on the refunds tests",
                [bash("pytest tests/api/test_refunds.py", "Exit code 1\n1 failed, 3 passed in 0.35s", 1)],
            ),
            ("a refund above the order total should be refused with 422", [edit("src/shop/api/refunds.py")]),
            (
                "run pytest on the refunds tests again",
                [bash("pytest tests/api/test_refunds.py", "4 passed in 0.31s")],
            ),
            ("run the full test suite", [bash("pytest", "118 passed in 6.02s")]),
        ],
    )
    push = Task(
        "push the branch",
        [
            ("lint everything before pushing", [bash("ruff check src tests", "All checks passed!")]),
            (
                "commit the refunds work",
                [
                    bash(
                        "git add -A && git commit -m 'Refunds endpoint'",
                        "[feat/SHOP-142 8be0c11] Refunds endpoint",
                    )
                ],
            ),
            ("push the branch", [bash("git push origin feat/SHOP-142", PUSH_REJECTED, 1)]),
            (
                "someone pushed to the branch; get their commits and push again",
                [
                    bash(
                        "git pull --rebase origin feat/SHOP-142",
                        "Successfully rebased and updated refs/heads/feat/SHOP-142.",
                    ),
                    bash(
                        "git push origin feat/SHOP-142",
                        "To github.com:acme/shop.git\n   5c0d9e1..8be0c11  feat/SHOP-142 -> feat/SHOP-142",
                    ),
                ],
            ),
            ("run the tests once more after the rebase", [bash("pytest", "121 passed in 6.20s")]),
            ("open the pull request", [bash("gh pr create --fill", "https://github.com/acme/shop/pull/142")]),
            (
                "summarise what changed in this branch for the PR description",
                [
                    bash(
                        "git log --oneline main..",
                        "8be0c11 Refunds endpoint\n3f1a2b4 Basket shows the discount",
                    )
                ],
            ),
            ("thanks, that's all for today", []),
        ],
    )
    return [fix, migrate, front, refunds, push]


class Clock:
    """The scripted clock the bank, the session file and the transcript share."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now

    def stamp(self) -> str:
        return datetime.fromtimestamp(self.now, UTC).isoformat().replace("+00:00", "Z")


class Replay:
    """Sends the session's payloads through :class:`ClaudeHooks` and writes its transcript."""

    def __init__(self, bank: LessonBank, home: Path, clock: Clock) -> None:
        self.bank, self.clock = bank, clock
        self.hooks = ClaudeHooks(bank, Sessions(home / "claude" / "sessions.db", bank.namespace, clock=clock))
        self.transcript = home / ".claude" / "projects" / "-home-dev-shop" / f"{SESSION}.jsonl"
        self.transcript.parent.mkdir(parents=True)
        self.transcript.write_text("")
        self.calls: Counter[str] = Counter()
        self.injections: list[list[str]] = []  # the lesson ids of each context answered
        self.tool_use = 0
        self.context_ids: list[str] = []
        original = bank.context

        def context(*args: Any, **kwargs: Any) -> Any:  # sees which lessons each context block holds
            block = original(*args, **kwargs)
            self.context_ids = list(block.lesson_ids)
            return block

        bank.context = context  # type: ignore[method-assign]

    def send(self, event: str, **fields: Any) -> str:
        payload = {
            "session_id": SESSION,
            "transcript_path": str(self.transcript),
            "cwd": CWD,
            "permission_mode": "default",
            "hook_event_name": event,
            **fields,
        }
        self.calls[event] += 1
        self.context_ids = []
        body = self.hooks.answer(json.loads(json.dumps(payload))).body
        if body and event in ("SessionStart", "UserPromptSubmit"):
            self.injections.append(self.context_ids)
        return body

    def write(self, kind: str, content: Any) -> None:
        entry = {
            "type": kind,
            "timestamp": self.clock.stamp(),
            "sessionId": SESSION,
            "cwd": CWD,
            "message": {"role": kind, "content": content},
        }
        with self.transcript.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps(entry) + "\n")

    def turn(self, prompt: str, calls: list[Call], seconds: float) -> None:
        """One prompt and its turn: the tool calls spread over ``seconds``, then the reply."""
        self.send("UserPromptSubmit", prompt=prompt)
        self.write("user", prompt)
        step = seconds / (len(calls) + 1)
        for call in calls:
            self.clock.now += step
            self.tool_use += 1
            use_id = f"toolu_{self.tool_use:03d}"
            self.write(
                "assistant", [{"type": "tool_use", "id": use_id, "name": call.tool, "input": call.input}]
            )
            failed = call.exit_code != 0
            text = (
                f"Exit code {call.exit_code}\n{call.output}"
                if failed and call.tool == "Bash"
                else call.output
            )
            self.write(
                "user", [{"type": "tool_result", "tool_use_id": use_id, "content": text, "is_error": failed}]
            )
            common = {"tool_name": call.tool, "tool_input": call.input, "tool_use_id": use_id}
            if failed:
                self.send("PostToolUseFailure", **common, error=text, is_interrupt=False, duration_ms=900)
            else:
                response = {"stdout": call.output, "stderr": "", "interrupted": False, "isImage": False}
                self.send(
                    "PostToolUse",
                    **common,
                    tool_response=response if call.tool == "Bash" else {"success": True},
                )
        self.clock.now += step
        self.write("assistant", [{"type": "text", "text": f"Done: {prompt}"}])


def drain(bank: LessonBank) -> None:
    """What a ``lessonbank worker`` does between hooks: run every queued job (reflections, credits)."""
    asyncio.run(bank.new_worker([bank.namespace]).run(until_idle=True))


def figures(bank: LessonBank, replay: Replay, llm: FakeLLM, seeded: set[str]) -> dict[str, Any]:
    episodes = [
        Episode.model_validate(bank.show(d["episode_id"])["episode"]) for d in bank.decisions(limit=500)
    ]
    decisions = Counter(
        f"reflect ({d.get('reflector')}, {d.get('trigger')})" if d.get("reflect") else "skip"
        for d in bank.decisions(limit=500)
    )
    lessons = bank.lessons(limit=1000)
    learned = [lesson for lesson in lessons if lesson.id not in seeded]
    taught = {lesson.id for lesson in learned if teaches(lesson.content)}
    injected = [i for ids in replay.injections for i in ids]
    reflect_jobs = [job for job in bank.jobs(limit=1000) if job.kind == "reflect"]
    return {
        "hook_calls": dict(replay.calls),
        "episodes": len(episodes),
        "episodes_by_hook_and_outcome": dict(
            Counter(f"{e.metadata.get('hook')}:{e.status}" for e in episodes)
        ),
        "policy_decisions": dict(decisions),
        "reflect_jobs_by_status": dict(Counter(job.status for job in reflect_jobs)),
        "llm_calls": len(llm.calls),
        "reflection_replies_naming_a_failure": sum(1 for c in llm.calls if teaches(reflect(c.messages))),
        "lessons_seeded": len(seeded),
        "lessons_learned": len(learned),
        "lessons_learned_from_failures": sum(1 for lesson in learned if teaches(lesson.content)),
        "lessons_learned_text": [f"{lesson.kind}: {lesson.content}" for lesson in learned],
        "contexts_answered": len(replay.injections),
        "injections_total": len(injected),
        "lessons_injected_distinct": len(set(injected)),
        "learned_lessons_injected_distinct": len(set(injected) & {lesson.id for lesson in learned}),
        "learned_lesson_injections": sum(1 for i in injected if i not in seeded),
        "failure_lessons_injected_distinct": len(set(injected) & taught),
        "failure_lesson_injections": sum(1 for i in injected if i in taught),
        "lessons_attributed": {
            lesson.id: {
                "helpful": lesson.helpful,
                "harmful": lesson.harmful,
                "learned": lesson.id not in seeded,
            }
            for lesson in lessons
            if lesson.helpful or lesson.harmful
        },
    }


def run() -> dict[str, Any]:
    clock = Clock()
    llm = FakeLLM(default=reflect)
    with tempfile.TemporaryDirectory(prefix="lb-claude-session-") as tmp:
        home = Path(tmp)
        os.environ["LESSONBANK_HOME"] = str(home)
        with LessonBank(f"sqlite:///{home / 'bank.db'}", llm=llm, worker=False, clock=clock) as bank:
            seeded = {bank.add_lesson(text, tags=["shop"]).id for text in SEEDED}
            replay = Replay(bank, home, clock)
            script = tasks()
            prompts = sum(len(task.turns) for task in script)
            turn_s = HOUR_S / prompts
            replay.send("SessionStart", source="startup")
            for number, task in enumerate(script):
                for prompt, calls in task.turns:
                    replay.turn(prompt, calls, turn_s)
                replay.send(
                    "Stop",
                    stop_hook_active=False,
                    last_assistant_message=f"Done: {task.name}",
                    background_tasks=[],
                    session_crons=[],
                )
                drain(bank)
                if number == 2:  # the context window fills up half-way through the hour
                    replay.send("PreCompact", trigger="auto", custom_instructions="")
                    replay.send("SessionStart", source="compact")
            replay.send("SessionEnd", reason="prompt_input_exit")
            drain(bank)
            result = figures(bank, replay, llm, seeded)
            result["scripted_minutes"] = round((clock.now - START) / 60, 1)
            result["prompts"] = prompts
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON results (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    result = run()
    rows = [
        ("hook calls", ", ".join(f"{k} {v}" for k, v in result["hook_calls"].items())),
        (
            "episodes recorded",
            f"{result['episodes']}: "
            + ", ".join(f"{k} {v}" for k, v in sorted(result["episodes_by_hook_and_outcome"].items())),
        ),
        ("policy decisions", ", ".join(f"{k} {v}" for k, v in result["policy_decisions"].items())),
        (
            "reflections run",
            f"{sum(result['reflect_jobs_by_status'].values())} jobs "
            f"({', '.join(f'{k} {v}' for k, v in result['reflect_jobs_by_status'].items())}), "
            f"{result['llm_calls']} LLM calls, {result['reflection_replies_naming_a_failure']} naming a failure",
        ),
        (
            "lessons learned",
            f"{result['lessons_learned']} ({result['lessons_learned_from_failures']} from failures; "
            f"{result['lessons_seeded']} seeded before)",
        ),
        ("contexts answered", str(result["contexts_answered"])),
        (
            "lessons injected",
            f"{result['lessons_injected_distinct']} distinct, {result['injections_total']} injections",
        ),
        (
            "learned lessons injected",
            f"{result['learned_lessons_injected_distinct']} distinct, "
            f"{result['learned_lesson_injections']} injections ({result['failure_lessons_injected_distinct']} "
            f"distinct from failures, {result['failure_lesson_injections']} injections)",
        ),
        (
            "lessons attributed",
            f"{len(result['lessons_attributed'])}: helpful "
            f"{sum(v['helpful'] for v in result['lessons_attributed'].values())}, harmful "
            f"{sum(v['harmful'] for v in result['lessons_attributed'].values())}",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"when": datetime.now(UTC).isoformat(), **result}, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
