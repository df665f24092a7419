"""A reproducible benchmark corpus built from real model-written text.

Source: ``../shared/data/reflexion-gpt4-runs.jsonl`` beside the checkout (204 Reflexion runs with GPT-4: 164 HumanEval and
40 LeetCode-hard tasks, 340 self-reflections). The reflections are split into sentences; about a fifth of
the distinct sentences are held out for queries and never appear verbatim in a lesson.

- A lesson is a situation sentence + a correction sentence taken from two different reflections (the
  second preferably one that says what to do: "should", "instead", "to fix", ...), tagged with 2–4
  keywords of the situation's task (entry point, words of its prompt). Every (situation, correction) pair
  is used at most once, so lessons are distinct by construction.
- A query is a task's prompt first line, a held-out reflection sentence, or a prompt first line followed by
  a held-out sentence (what an agent knows before it retries: the task and what went wrong).
- An episode (for ``record()``) is a failed attempt: a task, its attempt (the model's solution) and an error
  made from a reflection sentence; each (task, error) pair is used once so job dedupe never skips one.
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lessonbank.text import STOPWORDS, normalize

# The shared data folder sits beside the checkout (``../shared/data``); LESSONBANK_BENCH_DATA overrides.
DATA_FILE = Path(
    os.environ.get(
        "LESSONBANK_BENCH_DATA",
        Path(__file__).resolve().parents[2] / "shared" / "data" / "reflexion-gpt4-runs.jsonl",
    )
)
HOLDOUT_FRACTION = 0.2
MIN_TAGS, MAX_TAGS = 2, 4

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(])")
_CORRECTION_HINT = re.compile(
    r"\b(should|instead|to fix|to correct|needs? to|must|ensure|we can|rather than|correct(?:ly)?)\b", re.I
)
_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])")
_TAG_MIN_CHARS = 4
# Words every prompt uses: poor tags, since they would match nearly every task.
_PROMPT_FILLER = frozenset(
    """given return returns function write input output each other than will also only want currently
    consist consists consisting such some implement should following example examples note after
    before like must then""".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class Task:
    """One run of the data file, reduced to what the corpus needs."""

    task_id: str
    task_type: str
    entry_point: str
    first_line: str
    keywords: tuple[str, ...]
    solution: str


@dataclass(frozen=True)
class Sentence:
    text: str
    task: int  # index into Source.tasks
    reflection: int  # global index of the reflection it came from


@dataclass(frozen=True)
class Source:
    tasks: list[Task]
    lesson_sentences: list[Sentence]
    held_out: list[Sentence]


def load_source(seed: int, path: Path = DATA_FILE) -> Source:
    """Tasks and sentences from the data file; the hold-out split depends only on ``seed``."""
    if not path.is_file():
        raise SystemExit(
            f"benchmark data not found at {path}: set LESSONBANK_BENCH_DATA to reflexion-gpt4-runs.jsonl"
        )
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    tasks = [_task(row) for row in rows]
    sentences: dict[str, Sentence] = {}
    reflection = 0
    for index, row in enumerate(rows):
        for text in row["reflections"]:
            for sentence in split_sentences(text):
                sentences.setdefault(normalize(sentence), Sentence(sentence, index, reflection))
            reflection += 1
    pool = sorted(sentences.values(), key=lambda s: s.text)
    random.Random(seed).shuffle(pool)
    cut = int(len(pool) * HOLDOUT_FRACTION)
    return Source(tasks=tasks, lesson_sentences=pool[cut:], held_out=pool[:cut])


def split_sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(" ".join(text.split())) if len(part.strip()) >= 20]


def _task(row: dict[str, Any]) -> Task:
    prompt, entry = row["prompt"], row["entry_point"]
    first_line = prompt_first_line(prompt, entry)
    return Task(
        task_id=row["task_id"],
        task_type="humaneval" if row["task_id"].startswith("HumanEval/") else "leetcode-hard",
        entry_point=entry,
        first_line=first_line,
        keywords=task_keywords(entry, first_line),
        solution=row.get("solution") or "",
    )


def prompt_first_line(prompt: str, entry_point: str) -> str:
    """The first line of the entry point's docstring (the task in one sentence)."""
    start = prompt.find(f"def {entry_point}")
    docstring = re.search(r'"""(.*?)(?:"""|\Z)|\'\'\'(.*?)(?:\'\'\'|\Z)', prompt[max(start, 0) :], re.DOTALL)
    body = (docstring.group(1) or docstring.group(2) or "") if docstring else ""
    for line in body.splitlines():
        line = line.strip()
        if line and not line.startswith(">>>"):
            return line
    return entry_point.replace("_", " ")


def task_keywords(entry_point: str, first_line: str) -> tuple[str, ...]:
    """Tag candidates: the entry point itself, its words, then content words of the prompt's first line."""
    found: dict[str, None] = {entry_point.lower(): None}
    for word in _WORD.findall(entry_point) + _WORD.findall(first_line):
        word = word.lower()
        if len(word) >= _TAG_MIN_CHARS and word not in STOPWORDS and word not in _PROMPT_FILLER:
            found.setdefault(word, None)
    return tuple(found)


# --------------------------------------------------------------------- lessons


def make_lessons(source: Source, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` lesson dicts for ``import_lessons``; no two share a (situation, correction) pair."""
    rng = random.Random(seed)
    pool = source.lesson_sentences
    corrections = [s for s in pool if _CORRECTION_HINT.search(s.text)]
    capacity = len(pool) * (len(pool) - 1)
    if count > capacity // 2:
        raise ValueError(f"{count} lessons asked; the corpus has only {capacity} sentence pairs")
    used: set[tuple[str, str]] = set()
    lessons: list[dict[str, Any]] = []
    while len(lessons) < count:
        situation = rng.choice(pool)
        correction = rng.choice(corrections if rng.random() < 0.5 else pool)
        key = (situation.text, correction.text)
        if situation.reflection == correction.reflection or key in used:
            continue
        used.add(key)
        lessons.append(_lesson(source.tasks[situation.task], situation, correction, rng))
    return lessons


def _lesson(task: Task, situation: Sentence, correction: Sentence, rng: random.Random) -> dict[str, Any]:
    candidates = list(task.keywords)
    tags = rng.sample(candidates, min(len(candidates), rng.randint(MIN_TAGS, MAX_TAGS)))
    return {"content": f"{situation.text} {correction.text}", "tags": tags, "task_type": task.task_type}


def distinct_fraction(lessons: list[dict[str, Any]]) -> float:
    """Share of lessons whose content is distinct after the bank's normalisation (case, whitespace)."""
    if not lessons:
        return 1.0
    return len({normalize(lesson["content"]) for lesson in lessons}) / len(lessons)


# --------------------------------------------------------------------- queries and episodes


def make_queries(source: Source, count: int, seed: int) -> list[str]:
    """``count`` distinct queries: prompt first lines, held-out sentences, then task + held-out error."""
    rng = random.Random(seed)
    lines = sorted({task.first_line for task in source.tasks})
    held = [s.text for s in source.held_out]
    queries = dict.fromkeys([*lines, *held])
    while len(queries) < count:
        queries.setdefault(f"{rng.choice(lines)} {rng.choice(held)}", None)
    chosen = list(queries)
    rng.shuffle(chosen)
    return chosen[:count]


def make_episodes(source: Source, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` failed episodes, each with a distinct (task, error) pair."""
    rng = random.Random(seed)
    errors = source.lesson_sentences + source.held_out
    used: set[tuple[int, int]] = set()
    episodes: list[dict[str, Any]] = []
    while len(episodes) < count:
        task_index, error_index = rng.randrange(len(source.tasks)), rng.randrange(len(errors))
        if (task_index, error_index) in used:
            continue
        used.add((task_index, error_index))
        task = source.tasks[task_index]
        episodes.append(
            {
                "task": f"Implement {task.entry_point}: {task.first_line}",
                "task_type": task.task_type,
                "status": "failure",
                "attempt": task.solution[:1500] or f"def {task.entry_point}(...): ...",
                "error": f"AssertionError: {errors[error_index].text}",
                "tags": list(task.keywords[:3]),
            }
        )
    return episodes
