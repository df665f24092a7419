"""The git mirror (seed 002): a namespace as Markdown files in a real git repository, one commit per
change, so a person can read, diff and blame what the bank knows with ordinary git tools.

Optional: on when ``Settings.mirror_dir`` (``LESSONBANK_MIRROR_DIR``) names a directory. The bank
is the source of truth; the mirror is written from it and never read back. A file edited by hand
is overwritten by the next commit (edit the bank instead; the old text stays in git's history).

Use, after the bank's change is written (the cycle's approve and revert, a person's archive)::

    # one call that never raises: a failure is a warning in the ``lessonbank.mirror`` log
    mirror_change(settings, store, namespace, author=f"reflection:{proposal.cycle_id}",
                  message=f"Apply proposal {proposal.id}")
    # an approval with edits: the proposal as the cycle made it, then the bank as the person left it
    mirror_change(settings, store, namespace, author=f"reflection:{proposal.cycle_id}", message=...,
                  snapshot=Snapshot(namespace, lessons=as_proposed, documents=proposed_documents))
    mirror_change(settings, store, namespace, author=actor, message=...)

    # or by hand, handling the errors yourself
    mirror = mirror_for(settings)                       # None when no mirror is configured
    if mirror is not None:
        sha = mirror.commit(mirror.snapshot(store, namespace), author=..., message=...)

- ``Mirror(directory)`` makes the directory and ``git init``\\ s it when it is missing or empty; a
  git repository (a ``.git`` inside it) is used as it is. It refuses (:class:`ConfigError`) a path
  that is a file, a non-empty directory that is not a repository (it would not turn a home directory
  into one), and a missing ``git`` binary.
- ``Mirror.snapshot(store, namespace)`` reads the namespace's documents now and its lessons while
  committing, a page at a time (:class:`StoreLessons`), so a 100k-lesson namespace is never held in
  memory. ``Snapshot(namespace, lessons=[...], documents=...)`` is the same from an explicit list:
  an approval with edits commits the proposal as the cycle made it, then as the person changed it.
- ``Mirror.commit(snapshot, *, author, message)`` writes the files and commits them; it returns the
  commit's sha, or None when nothing changed (no empty commits). Author name = ``author``, e-mail
  ``<author, sanitized>@lessonbank.local``; the committer is ``lessonbank``. Author and message are
  redacted first (a token in a commit stays in ``.git`` for good). Nothing is read from or
  written to the user's git configuration beyond what git reads itself: identity, signing and hooks
  are set per command, so it works without a global identity. Errors: :class:`StoreError` (git
  failed, disk full, read-only directory). Callers that change the bank first log it and go on: the
  next commit catches up.

Layout, one directory per namespace (its name sanitized)::

    <namespace>/core-memory.md          the core memory document
    <namespace>/evolution.md            the evolution log   (evolution-archive.md once it has one)
    <namespace>/reflection-log.md       the reflection log  (reflection-archive.md once it has one)
    <namespace>/lessons/insights.md     goal insights (seed 000)
    <namespace>/lessons/lessons.md      lessons (seed 004)
    <namespace>/rules/<agent>.md        an agent's rules (seed 003 principles); _shared.md: no agent
    <namespace>/procedures/<task type>.md  replay examples; _untyped.md: no task type

Only active, live lessons are shown (archived, pending, quarantined, superseded and expired ones
are not); a file whose last lesson went away is removed. Output is deterministic (newest first, id
on ties; fixed formatting; no counters that move with every recall), so an unchanged bank commits
nothing. Lesson text is untrusted: it sits in a fenced block longer than any backtick run in it,
and every one-line field is folded onto its line with the characters that open a code span,
emphasis, a link or HTML escaped, so no lesson can open a heading, a fence, HTML or a link
outside its entry. File names from agents, task types and namespaces keep ``[a-z0-9._-]`` only
(plus a hash of the name when that changed it), and every path is checked to resolve inside the
namespace's directory.

Cost: every commit rewrites the namespace's files from the bank. At 100k lessons on SQLite that is
about 8 s and some 20 MB (the pages read), whatever changed; git then hashes only the files that did.

Commits into one directory are serialised (a lock per directory in the process, ``flock`` on the
repository across processes).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from lessonbank.errors import ConfigError, LessonbankError, StoreError
from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery, Store
from lessonbank.proposals import Proposal
from lessonbank.redact import redact
from lessonbank.services.consolidation.documents import Documents
from lessonbank.services.sections import inline
from lessonbank.settings import Settings

try:  # POSIX: commits from several processes into one mirror take turns
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock; the in-process lock still holds
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("lessonbank.mirror")

EMAIL_DOMAIN = "lessonbank.local"
COMMITTER = "lessonbank"
GIT_TIMEOUT_S = 300.0
PAGE = 2_000  # lessons read per store call (SQL OFFSET paging: fewer, larger pages cost less)
OPEN_FILES = 32  # file handles kept open at once while writing (an LRU; more files are reopened)
NAME_MAX = 60  # characters of a name kept in a file name
NO_AGENT = "_shared"  # sanitized names never start with "_", so these cannot collide with one
NO_TASK_TYPE = "_untyped"

_UNSAFE = re.compile(r"[^a-z0-9._-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# What could reach past a one-line field: code spans, emphasis, links and images, HTML and entities.
# Block markers need a line start, and a field never has one. "_" stays: ids and names are full of it.
_MD_INLINE = re.compile(r"([\\`*\[\]<>&])")
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


# --------------------------------------------------------------------------- what is mirrored


class StoreLessons:
    """The active, live lessons of a namespace, read from the store a page at a time, newest first."""

    def __init__(self, store: Store, namespace: str) -> None:
        self.store = store
        self.namespace = namespace

    def __iter__(self) -> Iterator[Lesson]:
        query = LessonQuery(self.namespace, statuses=["active"], live_only=True)
        offset, previous = 0, set[str]()
        while page := self.store.list_lessons(query, limit=PAGE, offset=offset, sort="created"):
            offset += len(page)
            # A lesson written meanwhile shifts the pages by one: skip the previous page's repeat.
            yield from (lesson for lesson in page if lesson.id not in previous)
            previous = {lesson.id for lesson in page}
            if len(page) < PAGE:
                break


@dataclass(frozen=True)
class Snapshot:
    """What the mirror shows of one namespace: its lessons and its documents.

    ``lessons`` is any iterable of lessons (those of other namespaces and those not active and live
    at ``at``, default now, are left out) or a :class:`StoreLessons`, read while committing."""

    namespace: str
    lessons: Iterable[Lesson] = ()
    documents: Documents = field(default_factory=Documents)
    at: datetime | None = None

    def shown(self) -> Iterator[Lesson]:
        """The lessons the mirror shows, newest first, by id among lessons created at the same time."""
        if isinstance(self.lessons, StoreLessons):
            return _ties_by_id(self.lessons)
        now = self.at or datetime.now(UTC)
        kept = [
            lesson for lesson in self.lessons if lesson.namespace == self.namespace and _live(lesson, now)
        ]
        kept.sort(key=lambda lesson: lesson.id)
        kept.sort(key=lambda lesson: lesson.created_at, reverse=True)
        return iter(kept)


def _live(lesson: Lesson, now: datetime) -> bool:
    expired = lesson.expires_at is not None and lesson.expires_at <= now
    return lesson.status == "active" and lesson.superseded_by is None and not expired


def _ties_by_id(newest_first: Iterable[Lesson]) -> Iterator[Lesson]:
    """The store orders by creation time only: lessons created at the same instant come out by id,
    so the same bank always renders the same bytes."""
    run: list[Lesson] = []
    for lesson in newest_first:
        if run and lesson.created_at != run[0].created_at:
            yield from sorted(run, key=lambda item: item.id)
            run = []
        run.append(lesson)
    yield from sorted(run, key=lambda item: item.id)


# --------------------------------------------------------------------------- names and text


def safe_name(name: str) -> str:
    """A file or directory name for ``name``: ``[a-z0-9._-]`` only, never starting with ``.``, ``_``
    or ``-``, at most :data:`NAME_MAX` characters; when that changed the name, a hash of the name is
    appended, so two names never share a file (``Bob`` and ``bob``, ``a/b`` and ``a-b``)."""
    slug = _UNSAFE.sub("-", name.lower()).strip("._-")[:NAME_MAX].rstrip("._-")
    if slug == name and slug:
        return slug
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{slug}-{digest}" if slug else f"n-{digest}"


def field_text(text: object) -> str:
    """One-line Markdown for a field of a lesson: folded onto one line, control characters dropped,
    the characters that open a code span, emphasis, a link or HTML escaped with a backslash."""
    return _MD_INLINE.sub(r"\\\1", inline(_CONTROL.sub(" ", str(text))))


def fenced(text: str) -> str:
    """``text`` as a fenced block whose fence is longer than any backtick run in it, so no line of it
    can close the block; line breaks normalized, control characters dropped."""
    lines = [_CONTROL.sub("", line).rstrip() for line in text.splitlines()]
    longest = max((len(run) for run in re.findall(r"`+", "\n".join(lines))), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + "text", *lines, fence])


def document_text(text: str) -> str:
    """A document (already Markdown) as a file: line breaks normalized, control characters dropped."""
    lines = [_CONTROL.sub("", line).rstrip() for line in text.splitlines()]
    return "\n".join(lines).strip() + "\n"


def author_email(author: str) -> str:
    local = _UNSAFE.sub("-", author.lower()).strip(".-")[:64].rstrip(".-") or "unknown"
    return f"{local}@{EMAIL_DOMAIN}"


def commit_message(message: str, namespace: str, lessons: int) -> str:
    """The caller's message (its first line the subject; control characters dropped), then the
    namespace and how many lessons the mirror now shows."""
    lines = [" ".join(_CONTROL.sub(" ", line).split()) for line in message.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    subject, rest = (lines[0], lines[1:]) if lines else ("lessonbank change", [])
    body = "\n".join(rest).strip()
    return (
        "\n\n".join(
            part for part in (subject, body, f"Namespace: {namespace}\nLessons shown: {lessons}") if part
        )
        + "\n"
    )


def _author_name(author: str) -> str:
    # git refuses angle brackets and line breaks in a name.
    return " ".join(_CONTROL.sub(" ", author).replace("<", " ").replace(">", " ").split())[:200] or "unknown"


# --------------------------------------------------------------------------- rendering


def lesson_file(lesson: Lesson) -> tuple[str, str]:
    """The file (relative to the namespace's directory) a lesson is shown in, and that file's title."""
    if lesson.kind == "insight":
        return "lessons/insights.md", "# Insights"
    if lesson.kind == "principle":
        if lesson.agent is None:
            return f"rules/{NO_AGENT}.md", "# Rules for every agent"
        return f"rules/{safe_name(lesson.agent)}.md", f"# Rules of {field_text(lesson.agent)}"
    if lesson.kind == "procedure":
        if lesson.task_type is None:
            return f"procedures/{NO_TASK_TYPE}.md", "# Procedures without a task type"
        return f"procedures/{safe_name(lesson.task_type)}.md", f"# Procedures: {field_text(lesson.task_type)}"
    return "lessons/lessons.md", "# Lessons"


def render_lesson(lesson: Lesson) -> str:
    """One lesson's entry: its id as a heading, its text fenced, then its fields as bullets. Only
    what a person changes or a cycle decides is shown, never counters a recall moves."""
    meta = lesson.metadata
    fields: list[tuple[str, object]] = [
        ("Situation", lesson.situation),
        ("Mistake", lesson.mistake),
        ("Correction", lesson.correction),
        ("Trigger", lesson.trigger),
        ("Goal", meta.get("goal_title") if lesson.kind == "insight" else None),
        ("Goal id", lesson.goal_id),
        ("Stream", meta.get("stream") if lesson.kind == "principle" else None),
        ("Result", meta.get("result") if lesson.kind == "procedure" else None),
        ("Task type", lesson.task_type),
        ("Agent", lesson.agent),
        ("Tags", ", ".join(lesson.tags) if lesson.tags else None),
        ("Supersedes", lesson.supersedes),
    ]
    bullets = [f"- {name}: {field_text(value)}" for name, value in fields if value not in (None, "")]
    # Written by lessonbank itself, not by a model or a caller: nothing to escape.
    bullets.append(f"- Importance: {lesson.importance:.2f}")
    bullets += ["- Pinned: yes"] if lesson.pinned else []
    bullets += [
        f"- Source: {lesson.source}",
        f"- Created: {lesson.created_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC",
    ]
    return "\n".join([f"## {field_text(lesson.id)}", "", fenced(lesson.content), "", *bullets]) + "\n"


# --------------------------------------------------------------------------- writing


class _Files:
    """The files of one namespace's directory being rewritten: each is truncated when first written
    this time, kept open while in use (at most :data:`OPEN_FILES`), and checked to stay inside."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)
        self.written: set[str] = set()
        self.open: dict[str, IO[str]] = {}

    def append(self, relative: str, title: str, text: str) -> None:
        handle = self.open.pop(relative, None)
        if handle is None:
            handle = self._opened(relative, title)
        self.open[relative] = handle  # last used goes last
        handle.write("\n" + text)
        if len(self.open) > OPEN_FILES:
            self.open.pop(next(iter(self.open))).close()

    def whole(self, relative: str, text: str) -> None:
        with self._opened(relative, None) as handle:
            handle.write(text)

    def _opened(self, relative: str, title: str | None) -> IO[str]:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        real = os.path.realpath(path)
        if not real.startswith(self.real_root + os.sep):
            raise StoreError(f"mirror file {relative!r} resolves outside {self.root} (a symlink?)")
        if relative in self.written:
            return open(path, "a", encoding="utf-8", newline="\n")
        self.written.add(relative)
        handle = open(path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115 (closed by close())
        if title is not None:
            handle.write(title + "\n")
        return handle

    def close(self) -> None:
        for handle in self.open.values():
            handle.close()
        self.open.clear()

    def remove_the_rest(self) -> None:
        """Remove the files not written this time (what went away), and directories left empty."""
        for directory, subdirs, files in os.walk(self.root, topdown=False):
            for name in files:
                path = Path(directory, name)
                if path.relative_to(self.root).as_posix() not in self.written:
                    path.unlink()
            for name in subdirs:
                with contextlib.suppress(OSError):  # not empty: it still holds a file
                    Path(directory, name).rmdir()


def write_namespace(root: Path, snapshot: Snapshot) -> int:
    """Write the snapshot's files under ``root`` (removing the others); returns the lessons written."""
    files = _Files(root)
    docs = snapshot.documents
    written = 0
    try:
        files.whole("core-memory.md", document_text(docs.core_memory or "# Core Memory"))
        files.whole("evolution.md", document_text(docs.evolution_log()))
        files.whole("reflection-log.md", document_text(docs.reflection_log()))
        evolution_archive, reflection_archive = docs.archives()
        if docs.evolution_archive:
            files.whole("evolution-archive.md", document_text(evolution_archive))
        if docs.reflection_archive:
            files.whole("reflection-archive.md", document_text(reflection_archive))
        for lesson in snapshot.shown():
            relative, title = lesson_file(lesson)
            files.append(relative, title, render_lesson(lesson))
            written += 1
    finally:
        files.close()
    files.remove_the_rest()
    return written


# --------------------------------------------------------------------------- the repository


class Mirror:
    """A git repository holding namespaces as Markdown; see the module's docstring."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.git = shutil.which("git")
        if self.git is None:
            raise ConfigError(
                "the git mirror needs the git binary on PATH: install git or unset LESSONBANK_MIRROR_DIR"
            )
        path = Path(directory).expanduser()
        if path.exists() and not path.is_dir():
            raise ConfigError(
                f"mirror directory {path} is a file: LESSONBANK_MIRROR_DIR must name a directory"
            )
        path.mkdir(parents=True, exist_ok=True)
        self.directory = path.resolve()
        if not (self.directory / ".git").exists():
            if any(self.directory.iterdir()):
                raise ConfigError(
                    f"mirror directory {self.directory} is not empty and not a git repository: "
                    "name an empty directory or an existing repository"
                )
            self._git("-c", "init.defaultBranch=main", "init", "--quiet")
        self.git_dir = Path(self._git("rev-parse", "--absolute-git-dir").stdout.strip())

    def snapshot(self, store: Store, namespace: str) -> Snapshot:
        """The namespace as it is in ``store``: documents read now, lessons read while committing."""
        documents = Documents.from_state(store.cycle_state(namespace))
        return Snapshot(namespace, lessons=StoreLessons(store, namespace), documents=documents)

    def path_of(self, namespace: str) -> Path:
        """The directory of ``namespace`` in the mirror."""
        return self.directory / safe_name(namespace)

    def commit(self, snapshot: Snapshot, *, author: str, message: str) -> str | None:
        """Write the snapshot's files and commit them as ``author``; the commit's sha, or None when
        the files did not change. Raises StoreError when git or the disk fails."""
        # Caller text (an actor, a reason, a proposal's summary) that git would keep in its history
        # for good: redacted here, whoever calls (redact.MIRROR_TEXT_FIELDS).
        author, message = redact(author), redact(message)
        name = safe_name(snapshot.namespace)
        with self._locked():
            try:
                written = write_namespace(self.directory / name, snapshot)
            except OSError as exc:
                raise StoreError(f"could not write the mirror in {self.directory}: {exc}") from exc
            self._git("add", "--all", "--", name)
            if self._git("diff", "--cached", "--quiet", "--", name, check=False).returncode == 0:
                return None
            body = commit_message(message, snapshot.namespace, written)
            self._git(
                "commit",
                "--quiet",
                "--no-verify",
                "--cleanup=whitespace",
                "--file=-",
                "--",
                name,
                stdin=body,
                author=author,
            )
            sha = self._git("rev-parse", "HEAD").stdout.strip()
        log.info("mirror: %s committed %s as %s", snapshot.namespace, sha[:12], author)
        return sha

    def _git(
        self, *args: str, check: bool = True, stdin: str | None = None, author: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
        if author is not None:
            env.update(
                GIT_AUTHOR_NAME=_author_name(author),
                GIT_AUTHOR_EMAIL=author_email(author),
                GIT_COMMITTER_NAME=COMMITTER,
                GIT_COMMITTER_EMAIL=f"{COMMITTER}@{EMAIL_DOMAIN}",
            )
        # Per command, never in any config file: no signing prompt, no hooks, and an identity for
        # git commands that want one even when the user has none configured.
        options = [
            "-c", "commit.gpgSign=false",
            "-c", f"core.hooksPath={os.devnull}",
            "-c", f"user.name={COMMITTER}",
            "-c", f"user.email={COMMITTER}@{EMAIL_DOMAIN}",
        ]  # fmt: skip
        assert self.git is not None
        try:
            done = subprocess.run(
                [self.git, *options, *args],
                cwd=self.directory,
                input=stdin,
                capture_output=True,
                text=True,
                env=env,
                timeout=GIT_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise StoreError(f"git {args[0]} failed in the mirror: {exc}") from exc
        if check and done.returncode != 0:
            raise StoreError(
                f"git {' '.join(args[:2])} failed in the mirror {self.directory} "
                f"(exit {done.returncode}): {done.stderr.strip()[-500:]}"
            )
        return done

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        key = str(self.directory)
        with _LOCKS_GUARD:
            lock = _LOCKS.setdefault(key, threading.Lock())
        with lock:
            if fcntl is None:
                yield
                return
            with open(self.git_dir / "lessonbank.lock", "a") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)


def mirror_for(settings: Settings) -> Mirror | None:
    """The mirror ``settings`` configure (``mirror_dir``), or None when there is none. Raises
    ConfigError when the directory cannot be a mirror or git is missing."""
    if not settings.mirror_dir:
        return None
    return Mirror(settings.mirror_dir)


def mirror_change(
    settings: Settings,
    store: Store,
    namespace: str,
    *,
    author: str,
    message: str,
    snapshot: Snapshot | None = None,
) -> str | None:
    """Commit ``namespace`` as it now is in ``store`` (or ``snapshot`` when given) to the configured
    mirror, as ``author``: the commit's sha, or None when there is no mirror, nothing changed, or the
    mirror failed. A failure (git missing, a read-only or full disk, a bad directory) is logged as a
    warning and never raised: the bank's change stands, and the next commit brings the mirror up to
    date."""
    try:
        mirror = mirror_for(settings)
        if mirror is None:
            return None
        shown = snapshot if snapshot is not None else mirror.snapshot(store, namespace)
        return mirror.commit(shown, author=author, message=message)
    except (LessonbankError, OSError) as exc:
        log.warning(
            "mirror: %s's change to %s not committed to %s: %s", author, namespace, settings.mirror_dir, exc
        )
    except Exception:  # a bug here must not undo the bank's change either; its traceback is logged
        log.warning("mirror: %s's change to %s not committed", author, namespace, exc_info=True)
    return None


def mirror_decision(settings: Settings, store: Store, decided: Proposal, actor: str) -> None:
    """Commit an applied (or reverted) proposal to the configured mirror. An approval is one commit
    authored ``reflection:<cycle id>``; with a person's edits, that commit shows the proposal as the
    cycle made it and a second one, authored by the person, their changes. A revert is the person's
    commit. Never raises (see :func:`mirror_change`)."""
    if settings.mirror_dir is None:
        return
    namespace = decided.namespace
    if decided.status == "reverted":
        mirror_change(settings, store, namespace, author=actor, message=f"Revert proposal {decided.id}")
        return
    author = f"reflection:{decided.cycle_id}"
    message = f"{decided.status.replace('_', ' ').capitalize()} proposal {decided.id}: {decided.summary}"
    edits = decided.metadata.get("edits") or {}
    if edits:
        mirror_change(
            settings,
            store,
            namespace,
            author=author,
            message=message,
            snapshot=_as_proposed(store, decided, edits),
        )
        message = f"{actor}'s changes to proposal {decided.id}"
        author = actor
    mirror_change(settings, store, namespace, author=author, message=message)


def _as_proposed(store: Store, decided: Proposal, originals: Mapping[str, str]) -> Snapshot:
    """The namespace as it would be had the proposal been applied without the person's edits."""
    namespace = decided.namespace
    content_of = {
        op.lesson.id: originals[op.id]
        for op in decided.operations
        if op.id in originals and op.lesson is not None and op.status == "applied"
    }
    evolved = {
        op.text: originals[op.id] for op in decided.operations if op.id in originals and op.kind == "evolve"
    }
    documents = Documents.from_state(store.cycle_state(namespace))
    if "core" in originals:
        documents = replace(documents, core_memory=originals["core"])
    documents = replace(
        documents, evolution=tuple(replace(e, text=evolved.get(e.text, e.text)) for e in documents.evolution)
    )
    lessons = (
        lesson.model_copy(update={"content": content_of[lesson.id]}) if lesson.id in content_of else lesson
        for lesson in StoreLessons(store, namespace)
    )
    return Snapshot(namespace, lessons, documents)
