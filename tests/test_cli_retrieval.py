"""The shell's retrieval options: --embedder, recall --mode/--hyde, embed, credit and utility."""

from __future__ import annotations

import json
from pathlib import Path

from lessonbank import LessonBank

SHIP = "ship releases behind a feature flag"


def test_recall_modes_and_embed(cli_in_process) -> None:  # type: ignore[no-untyped-def]
    cli_in_process("add", SHIP, "--learned-from", "deploy the billing service on friday")
    plain = json.loads(cli_in_process("recall", "billing service deploy", "--json").stdout)
    assert plain[0]["lesson"]["learned_from"] == "deploy the billing service on friday"
    assert plain[0]["vector"] == 0.0
    refused = cli_in_process("recall", "billing", "--mode", "vector", ok=False)
    assert refused.returncode != 0 and b"needs an embedder" in refused.stderr

    embedded = json.loads(cli_in_process("--embedder", "hash", "embed", "--json").stdout)
    assert embedded == {"embedded": 1, "embedder": "hash-256"}
    assert json.loads(cli_in_process("--embedder", "hash", "embed", "--json").stdout)["embedded"] == 0
    hits = json.loads(
        cli_in_process(
            "--embedder", "hash", "recall", "feature flags for releases", "--mode", "vector", "--json"
        ).stdout
    )
    assert hits[0]["lesson"]["content"] == SHIP and hits[0]["vector"] > 0
    hybrid = json.loads(
        cli_in_process(
            "recall",
            "feature flag release",
            "--mode",
            "hybrid",
            "--json",
            extra_env={"LESSONBANK_EMBEDDER": "hash"},
        ).stdout
    )
    assert hybrid[0]["lexical"] > 0 and hybrid[0]["vector"] > 0

    missing = cli_in_process("embed", ok=False)
    assert missing.returncode != 0 and b"no embedder configured" in missing.stderr
    unknown = cli_in_process("--embedder", "word2vec", "recall", "x", ok=False)
    assert unknown.returncode != 0 and b"word2vec" in unknown.stderr


def test_context_ids_are_credited_and_lessons_sort_by_utility(cli_in_process) -> None:  # type: ignore[no-untyped-def]
    good = json.loads(cli_in_process("add", SHIP, "--json").stdout)["id"]
    bad = json.loads(cli_in_process("add", "ship releases on friday evenings", "--json").stdout)["id"]
    cli_in_process(
        "record", "--task", "ship v2", "--status", "failure", "--error", "outage", "--context-id", bad
    )
    cli_in_process("record", "--task", "ship v2", "--status", "success", "--context-id", good)
    ranked = json.loads(cli_in_process("lessons", "--sort", "utility", "--json").stdout)
    assert [(row["id"], row["helpful"], row["harmful"]) for row in ranked] == [(good, 1, 0), (bad, 0, 1)]
    assert [row["utility"] for row in ranked] == [0.6667, 0.3333]
    table = cli_in_process("lessons", "--sort", "utility").stdout.decode()
    assert "+/−" in table and "1/0" in table and "0/1" in table and "0.67" in table


def test_recall_filters_by_agent_task_type_and_goal(cli_in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    general_id = json.loads(cli_in_process("add", "ship releases behind a feature flag", "--json").stdout)[
        "id"
    ]
    # The shell's default bank: $LESSONBANK_HOME/lessons.db, with LESSONBANK_HOME set by the fixture.
    with LessonBank(f"sqlite:///{tmp_path / 'home' / 'lessons.db'}", worker=False) as bank:
        mine = bank.add_lesson(
            "ship releases with a canary", agent="coder", task_type="release", goal_id="g-1"
        )
    # A lesson without an agent, task type or goal serves every one (as context() injects it); a
    # lesson scoped to one serves that one only.
    for option, value in (("--agent", "coder"), ("--task-type", "release"), ("--goal", "g-1")):
        hits = json.loads(cli_in_process("recall", "ship releases", option, value, "--json").stdout)
        assert sorted(hit["lesson"]["id"] for hit in hits) == sorted([mine.id, general_id]), option
    for option, value in (("--agent", "other"), ("--task-type", "docs"), ("--goal", "g-2")):
        hits = json.loads(cli_in_process("recall", "ship releases", option, value, "--json").stdout)
        assert [hit["lesson"]["id"] for hit in hits] == [general_id], option
