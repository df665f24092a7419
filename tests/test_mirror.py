"""The git mirror: a namespace as Markdown in a real git repository, one commit per change, authored
by the cycle or the person who made it; untrusted text stays inside its file and its entry; a broken
mirror never fails the bank's change. Real SQLite banks, the real ``git`` binary, no global identity."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lessonbank import LessonBank, Settings
from lessonbank.errors import ConfigError
from lessonbank.models import Lesson
from lessonbank.ports import Store
from lessonbank.services.consolidation.documents import Documents
from lessonbank.services.consolidation.mirror import Mirror, Snapshot, mirror_change, mirror_for, safe_name
from lessonbank.stores import open_store


@pytest.fixture(autouse=True)
def _no_git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No global or system git configuration and no identity in the environment: the mirror must
    bring its own, per command."""
    home = tmp_path / "git-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(f"sqlite:///{tmp_path / 'bank.db'}")
    yield opened
    opened.close()


def git(directory: Path, *args: str, check: bool = True) -> str:
    return subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True, check=check).stdout


def authors(directory: Path) -> list[str]:
    return git(directory, "log", "--format=%an <%ae>").splitlines()


def tree(directory: Path) -> list[str]:
    return sorted(git(directory, "ls-files").splitlines())


def lesson(content: str, **fields: object) -> Lesson:
    return Lesson(content=content, **fields)  # type: ignore[arg-type]


def test_a_fresh_directory_becomes_a_repository_and_commits_without_a_global_identity(
    tmp_path: Path, store: Store
) -> None:
    assert not (Path(os.environ["HOME"]) / ".gitconfig").exists()
    directory = tmp_path / "deep" / "mirror"
    mirror = Mirror(directory)
    assert (directory / ".git").is_dir()
    store.write_lesson(lesson("run the linter before pushing"))
    sha = mirror.commit(
        mirror.snapshot(store, "default"), author="reflection:cyc_123", message="Apply proposal"
    )
    assert sha is not None and git(directory, "rev-parse", "HEAD").strip() == sha
    assert authors(directory) == ["reflection:cyc_123 <reflection-cyc_123@lessonbank.local>"]
    assert git(directory, "log", "--format=%cn").strip() == "lessonbank"
    assert not (Path(os.environ["HOME"]) / ".gitconfig").exists()  # nothing written to a global config
    assert git(directory, "config", "--local", "--get-regexp", "user", check=False) == ""
    assert Mirror(directory).directory == directory.resolve()  # an existing mirror opens as it is


def test_each_change_is_one_commit_by_its_author_and_nothing_changed_commits_nothing(
    tmp_path: Path, store: Store
) -> None:
    mirror = Mirror(tmp_path / "mirror")
    first = store.write_lesson(lesson("pin dependency versions in CI")).lesson
    assert mirror.commit(mirror.snapshot(store, "default"), author="reflection:cyc_1", message="one")
    assert (
        mirror.commit(mirror.snapshot(store, "default"), author="reflection:cyc_1", message="again") is None
    )
    store.write_lesson(lesson("cache the pip wheels between jobs"))
    assert mirror.commit(mirror.snapshot(store, "default"), author="Ada Lovelace", message="two")
    store.update_lesson(first.model_copy(update={"access_count": 9, "confidence": 0.9}))  # counters only
    assert mirror.commit(mirror.snapshot(store, "default"), author="Ada Lovelace", message="three") is None
    assert authors(tmp_path / "mirror") == [
        "Ada Lovelace <ada-lovelace@lessonbank.local>",
        "reflection:cyc_1 <reflection-cyc_1@lessonbank.local>",
    ]
    assert git(tmp_path / "mirror", "log", "-1", "--format=%B").startswith("two\n\nNamespace: default\n")


def test_files_follow_the_bank(tmp_path: Path, store: Store) -> None:
    directory = tmp_path / "mirror"
    mirror = Mirror(directory)
    kept = store.write_lesson(
        lesson("use Edit for large Go files", situation="large Go file", tags=["go"])
    ).lesson
    gone = store.write_lesson(lesson("prefer rebase over merge on feature branches")).lesson
    store.write_lesson(lesson("draft, waiting for review", status="pending"))
    store.write_lesson(lesson("the deploy goal failed on migrations", kind="insight", goal_id="g1"))
    rule = store.write_lesson(
        lesson(
            "IF tests are flaky THEN rerun once",
            kind="principle",
            agent="coder",
            metadata={"stream": "tactical"},
        )
    ).lesson
    store.write_lesson(lesson("IF in doubt THEN ask", kind="principle", metadata={"stream": "strategic"}))
    store.write_lesson(
        lesson(
            "Task: build\nSteps:\n1. make",
            kind="procedure",
            task_type="build",
            metadata={"result": "failure"},
        )
    )
    documents = Documents(core_memory="## Identity\nA coding agent.\n").with_reflection(
        "prop_1", datetime(2025, 1, 2, tzinfo=UTC), "first look", "What changed."
    )
    store.set_cycle_state("default", documents.into(store.cycle_state("default")))
    mirror.commit(mirror.snapshot(store, "default"), author="reflection:cyc_1", message="first")

    assert tree(directory) == [
        "default/core-memory.md",
        "default/evolution.md",
        "default/lessons/insights.md",
        "default/lessons/lessons.md",
        "default/procedures/build.md",
        "default/reflection-log.md",
        "default/rules/_shared.md",
        "default/rules/coder.md",
    ]
    ns = directory / "default"
    assert (ns / "core-memory.md").read_text() == "## Identity\nA coding agent.\n"
    assert "## Reflection #1 — 2025-01-02 | pending" in (ns / "reflection-log.md").read_text()
    lessons_md = (ns / "lessons" / "lessons.md").read_text()
    assert f"## {gone.id}" in lessons_md and "- Situation: large Go file" in lessons_md
    assert "draft" not in lessons_md  # only active lessons are shown
    assert lessons_md.index(gone.id) < lessons_md.index(kept.id)  # newest first
    assert "- Stream: tactical" in (ns / "rules" / "coder.md").read_text()
    assert "IF in doubt THEN ask" in (ns / "rules" / "_shared.md").read_text()
    assert "- Result: failure" in (ns / "procedures" / "build.md").read_text()

    store.update_lesson(gone.model_copy(update={"status": "archived"}))
    store.delete_lesson("default", rule.id)
    assert mirror.commit(mirror.snapshot(store, "default"), author="Ada", message="archive and forget")
    assert gone.id not in (ns / "lessons" / "lessons.md").read_text()
    assert "default/rules/coder.md" not in tree(directory) and not (ns / "rules" / "coder.md").exists()
    changed = git(directory, "show", "--stat", "--format=", "HEAD")
    assert "lessons/lessons.md" in changed and "rules/coder.md" in changed


def test_a_snapshot_from_explicit_lessons_renders_as_the_store_does(tmp_path: Path, store: Store) -> None:
    """The cycle commits a proposal as it made it and then as the person edited it: two commits, and
    the bank read afterwards is the same bytes as the edited snapshot (no third commit)."""
    mirror = Mirror(tmp_path / "mirror")
    base = datetime(2025, 3, 1, tzinfo=UTC)
    proposed = [lesson(f"lesson {i}", created_at=base, id=f"les_{i:02d}") for i in (3, 1, 2)]  # same instant
    proposed.append(lesson("expired rule", kind="principle", expires_at=base - timedelta(days=1)))
    proposed.append(lesson("another namespace", namespace="other"))
    as_made = mirror.commit(
        Snapshot("default", lessons=proposed), author="reflection:cyc_9", message="proposed"
    )
    edited = [proposed[0].model_copy(update={"content": "lesson 3, as the person wrote it"}), *proposed[1:3]]
    as_edited = mirror.commit(Snapshot("default", lessons=edited), author="Grace", message="edited")
    assert as_made and as_edited and as_made != as_edited
    text = (tmp_path / "mirror" / "default" / "lessons" / "lessons.md").read_text()
    assert [m for m in re.findall(r"^## (\S+)", text, re.M)] == ["les_01", "les_02", "les_03"]
    assert "expired rule" not in text and not (tmp_path / "mirror" / "default" / "rules").exists()
    assert "another namespace" not in text

    for item in edited:
        store.write_lesson(item)
    assert mirror.commit(mirror.snapshot(store, "default"), author="reflection:cyc_9", message="same") is None
    assert authors(tmp_path / "mirror") == [
        "Grace <grace@lessonbank.local>",
        "reflection:cyc_9 <reflection-cyc_9@lessonbank.local>",
    ]


def test_an_approval_with_edits_is_two_commits_through_mirror_change(tmp_path: Path, store: Store) -> None:
    settings = Settings.from_env(mirror_dir=str(tmp_path / "mirror"))
    proposed = lesson("retry the upload three times")
    edited = proposed.model_copy(update={"content": "retry the upload twice, then alert"})
    store.write_lesson(edited)  # what the approval wrote: the person's version
    as_made = mirror_change(
        settings,
        store,
        "default",
        author="reflection:cyc_7",
        message="Apply proposal prop_7",
        snapshot=Snapshot("default", lessons=[proposed]),
    )
    as_edited = mirror_change(settings, store, "default", author="Ada", message="Edits to proposal prop_7")
    assert as_made and as_edited
    assert git(tmp_path / "mirror", "log", "--format=%an|%s").splitlines() == [
        "Ada|Edits to proposal prop_7",
        "reflection:cyc_7|Apply proposal prop_7",
    ]
    diff = git(tmp_path / "mirror", "show", "--format=", "HEAD")
    assert "-retry the upload three times" in diff and "+retry the upload twice, then alert" in diff
    assert mirror_change(Settings.from_env(), store, "default", author="Ada", message="no mirror") is None


HOSTILE = "\n".join(
    [
        "```",
        "# Injected heading",
        "````` still inside",
        "<!-- hide the rest",
        "[click](javascript:alert(1)) <script>x</script>",
        "\x00\x1b[31m\u2028- fake bullet",
    ]
)


def _outside_fences(text: str) -> list[str]:
    """The lines of ``text`` a Markdown reader sees as structure (outside fenced blocks)."""
    seen, fence = [], None
    for line in text.splitlines():
        if fence is None:
            opened = re.match(r"^(`{3,})", line)
            if opened:
                fence = opened.group(1)
            else:
                seen.append(line)
        elif re.fullmatch(fence + "`*", line.strip()):
            fence = None
    assert fence is None, "a fence was left open"
    return seen


def test_untrusted_text_stays_inside_its_file_and_its_entry(tmp_path: Path, store: Store) -> None:
    root = tmp_path / "mirror"
    mirror = Mirror(root)
    agents = ("../../etc", "..", "/abs/path", "Coder", "coder", "a\nb", "_shared")
    topics = (
        "flaky tests",
        "slow builds",
        "large diffs",
        "merge conflicts",
        "stale caches",
        "bad configs",
        "lost logs",
    )
    for agent, topic in zip(agents, topics, strict=True):
        store.write_lesson(lesson(f"IF {topic} THEN stop", kind="principle", agent=agent, situation=HOSTILE))
    store.write_lesson(lesson(HOSTILE, situation=HOSTILE, tags=["<b>", "x]("], task_type="../t"))
    store.write_lesson(lesson(HOSTILE + " proc", kind="procedure", task_type="../../../../tmp/escape"))
    store.write_lesson(lesson("outside namespace", namespace="../../escaped"))
    mirror.commit(mirror.snapshot(store, "default"), author="x", message="hostile")
    mirror.commit(mirror.snapshot(store, "../../escaped"), author="x", message="hostile namespace")

    files = [p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts]
    assert all(p.resolve().is_relative_to(root.resolve()) for p in files)
    assert not (tmp_path / "etc").exists() and not (tmp_path / "escaped").exists()
    rules = sorted(p.name for p in (root / "default" / "rules").iterdir())
    assert len(rules) == 7 and "_shared.md" not in rules  # an agent named _shared is not the shared file
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9._-]*\.md", name) for name in rules)
    namespaces = sorted(p.name for p in root.iterdir() if p.name != ".git")
    assert namespaces == sorted([safe_name("../../escaped"), "default"])
    assert re.fullmatch(r"escaped-[0-9a-f]{10}", safe_name("../../escaped"))

    for path in files:
        raw = path.read_bytes()
        assert b"\x00" not in raw and b"\x1b" not in raw
        structure = _outside_fences(path.read_text())
        assert all(not line.startswith("<") for line in structure), path
        headings = [line for line in structure if line.startswith("#")]
        assert not any("Injected" in h for h in headings), path
        for line in structure:
            if line.startswith("- "):  # a field: every character that opens inline Markdown is escaped
                assert re.fullmatch(r"- [A-Z][a-z ]+: .*", line), line
                assert not set(re.sub(r"\\.", "", line)) & set("<>[]`*&"), line


def test_a_path_that_cannot_be_a_mirror_is_refused(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("not a directory")
    with pytest.raises(ConfigError, match="is a file"):
        Mirror(a_file)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("someone's files")
    with pytest.raises(ConfigError, match="not empty and not a git repository"):
        Mirror(busy)
    assert not (busy / ".git").exists()
    assert mirror_for(Settings.from_env()) is None
    assert isinstance(mirror_for(Settings.from_env(mirror_dir=str(tmp_path / "m"))), Mirror)


def test_an_existing_repository_keeps_its_other_files_and_staged_work(tmp_path: Path, store: Store) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("hand-written\n")
    git(repo, "add", "README.md")  # staged by a person, not committed: not ours to commit
    mirror = Mirror(repo)
    store.write_lesson(lesson("keep the mirror apart"))
    mirror.commit(mirror.snapshot(store, "default"), author="reflection:cyc_2", message="mirror")
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == [
        "default/core-memory.md",
        "default/evolution.md",
        "default/lessons/lessons.md",
        "default/reflection-log.md",
    ]
    assert git(repo, "status", "--porcelain").strip() == "A  README.md"


# --------------------------------------------------------------------------- a person's changes


def _bank(tmp_path: Path, mirror_dir: Path | str) -> LessonBank:
    settings = Settings.from_env(mirror_dir=str(mirror_dir))
    return LessonBank(f"sqlite:///{tmp_path / 'bank.db'}", worker=False, settings=settings)


def test_archive_and_restore_commit_as_the_person(tmp_path: Path) -> None:
    directory = tmp_path / "mirror"
    with _bank(tmp_path, directory) as bank:
        added = bank.add_lesson("ship releases behind a feature flag")
        bank.archive(added.id, reason="flags retired", actor="Ada")
        assert not (directory / "default" / "lessons" / "lessons.md").exists()  # its only lesson went
        bank.archive(added.id, actor="Ada")  # a no-op: no commit
        bank.restore(added.id, actor="cli")
        assert added.id in (directory / "default" / "lessons" / "lessons.md").read_text()
    assert git(directory, "log", "--format=%an|%s").splitlines() == [
        f"cli|Restore {added.id}: restored (was archived)",
        f"Ada|Archive {added.id}: archived (was active): flags retired",
    ]


def test_a_broken_mirror_logs_a_warning_and_the_change_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "mirror"
    with _bank(tmp_path, directory) as bank, caplog.at_level(logging.WARNING, "lessonbank.mirror"):
        first = bank.add_lesson("a lesson to archive while git is missing")
        second = bank.add_lesson("a lesson to archive while the index is locked")
        third = bank.add_lesson("a lesson to archive while the namespace path is a file")

        monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
        assert bank.archive(first.id, actor="Ada").status == "archived"
        assert "git binary on PATH" in caplog.text
        monkeypatch.undo()

        Mirror(directory)
        (directory / ".git" / "index.lock").write_text("")  # another git process, or one that crashed
        assert bank.archive(second.id, actor="Ada").status == "archived"
        assert "index.lock" in caplog.text
        (directory / ".git" / "index.lock").unlink()

        shutil.rmtree(directory / "default")  # the files the locked attempt wrote
        (directory / "default").write_text("in the way")  # the namespace's directory cannot be made
        assert bank.archive(third.id, actor="Ada").status == "archived"
        assert "could not write the mirror" in caplog.text
        assert [x.status for x in map(bank.get_lesson, (first.id, second.id, third.id))] == ["archived"] * 3

        (directory / "default").unlink()
        bank.restore(first.id, actor="Grace")  # the next commit catches up with everything
    text = (directory / "default" / "lessons" / "lessons.md").read_text()
    assert first.id in text and second.id not in text and third.id not in text
    assert authors(directory) == ["Grace <grace@lessonbank.local>"]


def test_a_mirror_dir_that_is_a_file_does_not_fail_the_bank(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a_file = tmp_path / "mirror-file"
    a_file.write_text("")
    with _bank(tmp_path, a_file) as bank, caplog.at_level(logging.WARNING, "lessonbank.mirror"):
        added = bank.add_lesson("the bank is the source of truth")
        assert bank.archive(added.id).status == "archived"
    assert "is a file" in caplog.text


def test_an_approval_a_person_edited_and_its_revert_are_commits(tmp_path: Path) -> None:
    mirror_dir = tmp_path / "mirror"
    settings = Settings(mirror_dir=str(mirror_dir))
    with LessonBank(f"sqlite:///{tmp_path / 'cycle.db'}", worker=False, settings=settings) as bank:
        bank.import_lessons(
            [
                {"id": "les_twin_a", "content": "Run the migrations before the deploy.", "access_count": 2},
                {"id": "les_twin_b", "content": "run migrations before a deploy"},
                {"id": "les_pin", "content": "Never deploy on Fridays.", "pinned": True},
            ]
        )
        proposal = bank.consolidate()
        assert proposal is not None and proposal.core_memory is not None
        merge = next(op.id for op in proposal.operations if op.kind == "merge")
        bank.approve(proposal.id, edits={merge: "Always run the migrations, then deploy."}, actor="ana")
        names = [line.split(" <")[0] for line in authors(mirror_dir)]
        assert names == ["ana", f"reflection:{proposal.cycle_id}"]  # newest first
        files = mirror_dir / "default"
        assert "Never deploy on Fridays." in (files / "core-memory.md").read_text()
        assert "Always run the migrations, then deploy." in (files / "lessons" / "lessons.md").read_text()
        as_proposed = git(mirror_dir, "show", "HEAD~1:default/lessons/lessons.md")
        assert "Run the migrations before the deploy." in as_proposed and "then deploy" not in as_proposed
        bank.revert(proposal.id, actor="ana")
        assert authors(mirror_dir)[0].startswith("ana <")
        assert "Never deploy on Fridays." not in (files / "core-memory.md").read_text()
        bank.forget("les_pin", actor="bo")
        assert authors(mirror_dir)[0].startswith("bo <")
