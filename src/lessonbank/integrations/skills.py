"""Procedures as Agent Skills (agentskills.io): one ``<name>/SKILL.md`` folder per live procedure.

Export (``lessonbank export --format skills DIR``, ``bank.export_to(DIR, "skills")``) writes each
live procedure (kind ``procedure``, active, neither superseded nor expired) as ``DIR/<name>/SKILL.md``:
YAML frontmatter with ``name`` (1-64 chars of ``a-z0-9`` and single hyphens, the folder's name,
unique in ``DIR``), ``description`` (at most 1,024 chars: what the steps do and when to use them)
and ``metadata`` (``lessonbank-id``, ``lessonbank-hash``), then a body well under 500 lines: when
to use, the numbered steps, pitfalls from the lessons linked to it (``metadata["links"]``).

Identity: a skill is its lesson's id; its name is derived once from the task (or the name a person
gave it) and kept. The hash covers what a person may edit (description, body, any frontmatter key
lessonbank does not own), so a file whose text no longer matches its hash was edited by hand.
``DIR/.lessonbank-skills.json`` lists what the last export wrote (name → id): the next export
removes the folders of procedures no longer live (only a ``SKILL.md`` it wrote, and the folder if
nothing else is in it), and an import proposes to archive a listed skill whose folder was deleted.
Keys a person added to a frontmatter are carried into the next export of that skill.

Import (``lessonbank import DIR``) stages one pending proposal (:mod:`.staging`): a changed skill is
an edit, a skill without an id (or with an id this namespace does not have) a candidate, a deleted
one an archive. A folder whose ``SKILL.md`` is unreadable (no frontmatter, an invalid name, over
:data:`MAX_SKILL_BYTES`) is skipped with its reason and logged; nothing is ever written to the lessons.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lessonbank.errors import InputError
from lessonbank.models import Lesson
from lessonbank.reflectors.dual import procedure_text

if TYPE_CHECKING:
    from lessonbank.bank.sync import LessonBank
    from lessonbank.integrations.staging import Staged
    from lessonbank.proposals import Operation

log = logging.getLogger("lessonbank.skills")

SKILL_FILE = "SKILL.md"
MANIFEST = ".lessonbank-skills.json"
NAME_MAX = 64
DESCRIPTION_MAX = 1_024
MAX_SKILL_BYTES = 256 << 10  # a SKILL.md past this is refused unread (a skill body stays under 500 lines)
MAX_STEPS = 100
MAX_PITFALLS = 20
PITFALL_CHARS = 300
ID_KEY, HASH_KEY = "lessonbank-id", "lessonbank-hash"
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
RESERVED = ("anthropic", "claude")  # words a skill name may not hold where skills are uploaded
_STEP = re.compile(r"^\s*(?:\d+[.)]|[-*])\s+(.*\S)\s*$")


class SkillError(InputError):
    """A ``SKILL.md`` that is not a valid skill; the message says what to fix."""


def check_name(name: object) -> str:
    """``name`` if it is a valid skill name (see the module docstring), else :class:`SkillError`."""
    if not isinstance(name, str) or not name:
        raise SkillError("the frontmatter has no name; add `name: <lowercase-with-hyphens>`", field="name")
    if len(name) > NAME_MAX or not NAME_RE.match(name):
        raise SkillError(
            f"name {name!r} is not a skill name: 1-{NAME_MAX} chars of a-z, 0-9 and single hyphens, "
            "not starting or ending with a hyphen",
            field="name",
        )
    return name


def check_description(description: object) -> str:
    if not isinstance(description, str) or not description.strip():
        raise SkillError(
            "the frontmatter has no description; say what the skill does and when", field="description"
        )
    if len(description) > DESCRIPTION_MAX:
        raise SkillError(
            f"description is {len(description)} chars; the limit is {DESCRIPTION_MAX}", field="description"
        )
    return description


# --------------------------------------------------------------------------- the file


@dataclass
class Skill:
    """One ``SKILL.md``: its frontmatter (``extra``: keys lessonbank does not own, in file order;
    ``metadata``: the ``metadata`` map) and its body."""

    name: str
    description: str
    body: str
    metadata: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def lesson_id(self) -> str | None:
        value = self.metadata.get(ID_KEY)
        return str(value) if value else None

    @property
    def own_metadata(self) -> dict[str, Any]:
        return {k: v for k, v in self.metadata.items() if k not in (ID_KEY, HASH_KEY)}

    def content_hash(self) -> str:
        """The hash of what a person may edit: description, body (trailing blanks aside), other keys."""
        lines = [line.rstrip() for line in self.body.strip("\n").splitlines()]
        key = [" ".join(self.description.split()), "\n".join(lines), self.extra, self.own_metadata]
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def text(self) -> str:
        """The ``SKILL.md``, its hash set from its content."""
        import yaml  # type: ignore[import-untyped]

        metadata = {**self.own_metadata}
        if self.lesson_id:
            metadata[ID_KEY] = self.lesson_id
        metadata[HASH_KEY] = self.content_hash()
        head = {"name": self.name, "description": self.description, **self.extra, "metadata": metadata}
        dumped = yaml.safe_dump(head, sort_keys=False, allow_unicode=True, width=1 << 16)
        return f"---\n{dumped}---\n\n{self.body.strip(chr(10))}\n"


def parse_skill(text: str, folder: str) -> Skill:
    """The skill in ``text`` (the ``SKILL.md`` of folder ``folder``), or :class:`SkillError`."""
    import yaml

    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if not text.startswith("---\n"):
        raise SkillError("no frontmatter: a SKILL.md starts with a '---' line, YAML, then another '---' line")
    end = text.find("\n---", 3)
    if end < 0 or text[end + 4 : end + 5] not in ("", "\n"):
        raise SkillError("the frontmatter is not closed: add a '---' line after the YAML")
    try:
        head = yaml.safe_load(text[4:end]) or {}
    except yaml.YAMLError as exc:
        raise SkillError(f"the frontmatter is not YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(head, dict):
        raise SkillError("the frontmatter is not a mapping of keys to values")
    name = check_name(head.get("name"))
    if name != folder:
        raise SkillError(
            f"name {name!r} differs from its folder {folder!r}; they must be equal", field="name"
        )
    metadata = head.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise SkillError("metadata is not a mapping of keys to values", field="metadata")
    extra = {str(k): v for k, v in head.items() if k not in ("name", "description", "metadata")}
    return Skill(
        name=name,
        description=check_description(head.get("description")),
        body=text[end + 4 :].strip("\n"),
        metadata={str(k): v for k, v in metadata.items()},
        extra=json.loads(json.dumps(extra, default=str)),  # dates and the like as text: JSON in a lesson
    )


def read_skill(folder: Path) -> Skill:
    """The ``SKILL.md`` of ``folder``, read no further than :data:`MAX_SKILL_BYTES`."""
    path = folder / SKILL_FILE
    with open(path, "rb") as file:
        raw = file.read(MAX_SKILL_BYTES + 1)
    if len(raw) > MAX_SKILL_BYTES:
        raise SkillError(f"{path} is over {MAX_SKILL_BYTES:,} bytes; a skill body stays under 500 lines")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillError(f"{path} is not UTF-8 (byte {exc.start})") from None
    return parse_skill(text, folder.name)


# --------------------------------------------------------------------------- lesson → skill


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.replace("<", "‹").replace(">", "›").split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def lesson_steps(lesson: Lesson) -> list[str]:
    steps = lesson.metadata.get("steps")
    if isinstance(steps, list) and steps and all(isinstance(s, str) for s in steps):
        return [s for s in steps if s.strip()][:MAX_STEPS]
    lines = [line for line in lesson.content.splitlines() if line.strip()]
    numbered = [m.group(1) for line in lines if (m := _STEP.match(line))]
    if numbered:
        return numbered[:MAX_STEPS]
    heads = ("task:", "task type:", "result:", "steps:")
    return [line.strip() for line in lines if not line.strip().lower().startswith(heads)][:MAX_STEPS]


def lesson_task(lesson: Lesson) -> str:
    task = lesson.metadata.get("task")
    if isinstance(task, str) and task.strip():
        return " ".join(task.split())
    for line in lesson.content.splitlines():
        if line.lower().startswith("task:"):
            return " ".join(line[5:].split())
    return _one_line(lesson.content.splitlines()[0], 200)


def _when(lesson: Lesson) -> str:
    if lesson.situation:
        return lesson.situation
    kind = f"a `{lesson.task_type}` task" if lesson.task_type else "a task"
    result = lesson.metadata.get("result")
    ended = {"success": " These steps succeeded.", "failure": " These steps failed: mind the pitfalls."}
    return f"When you face {kind} like: {lesson_task(lesson).rstrip('.!?;:')}.{ended.get(str(result), '')}"


def description_of(lesson: Lesson) -> str:
    given = lesson.metadata.get("skill_description")
    if isinstance(given, str) and given.strip():
        return given[:DESCRIPTION_MAX]
    steps = len(lesson_steps(lesson))
    task = _one_line(lesson_task(lesson), 600).rstrip(".!?;:")
    what = f"{steps} step{'s' if steps != 1 else ''} learned on: {task}."
    scope = f" the task type is {lesson.task_type} or" if lesson.task_type else ""
    return _one_line(f"{what} Use when{scope} a task is like this one.", DESCRIPTION_MAX)


def slug(text: str, limit: int = 48) -> str:
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in RESERVED]
    out = ""
    for word in words:
        if len(out) + len(word) + (1 if out else 0) > limit:
            break
        out = f"{out}-{word}" if out else word
    return out or (words[0][:limit] if words else "procedure")


def names_of(procedures: Iterable[Lesson]) -> dict[str, str]:
    """A unique skill name per procedure (id → name): the name a person gave it, else the task's
    slug; a name already taken gets the end of the lesson's id (oldest lessons keep theirs)."""
    names: dict[str, str] = {}
    taken: set[str] = set()

    def given(lesson: Lesson) -> str | None:
        name = lesson.metadata.get("skill_name")
        return name if isinstance(name, str) and NAME_RE.match(name) and len(name) <= NAME_MAX else None

    # A name a skill already has (kept through its edits) first, then the oldest lessons'.
    for lesson in sorted(procedures, key=lambda p: (given(p) is None, p.created_at, p.id)):
        name = given(lesson) or slug(lesson_task(lesson))
        if name in taken:
            tail = "".join(re.findall(r"[a-z0-9]", lesson.id.lower()))[-8:] or "x"
            name = f"{name[: NAME_MAX - len(tail) - 1].rstrip('-')}-{tail}"
            number = 2
            while name in taken:
                name, number = f"{name[: NAME_MAX - 4].rstrip('-')}-{number}", number + 1
        taken.add(name)
        names[lesson.id] = name
    return names


def skill_of(lesson: Lesson, name: str, linked: dict[str, Lesson]) -> Skill:
    steps = lesson_steps(lesson)
    body = [
        f"# {_one_line(lesson_task(lesson), 200)}",
        "",
        "## When to use",
        "",
        _when(lesson),
        "",
        "## Steps",
        "",
    ]
    body += [f"{i}. {' '.join(step.split())}" for i, step in enumerate(steps, 1)]
    pitfalls: list[str] = []
    for link in lesson.metadata.get("links", []) or []:
        target = linked.get(link.get("to", "")) if isinstance(link, dict) else None
        if target is not None and len(pitfalls) < MAX_PITFALLS:
            pitfalls.append(f"- {_one_line(target.content, PITFALL_CHARS)} ({target.id})")
    if pitfalls:
        body += ["", "## Pitfalls", "", *pitfalls]
    held = lesson.metadata.get("skill_frontmatter")
    given = lesson.metadata.get("skill_metadata")
    return Skill(
        name=name,
        description=description_of(lesson),
        body="\n".join(body),
        metadata={**(given if isinstance(given, dict) else {}), ID_KEY: lesson.id},
        extra=dict(held) if isinstance(held, dict) else {},
    )


# --------------------------------------------------------------------------- export


def write_skills(lessons: Iterable[Lesson], target: str | os.PathLike[str]) -> int:
    """Write the live procedures among ``lessons`` (the namespace's live lessons: links are looked up
    among them) as skills under ``target``; returns how many. Files whose text is already right are
    not rewritten, so an export that changes nothing leaves the folder as it was."""
    from lessonbank.services.transfer import write_chunks

    root = Path(target)
    if root.exists() and not root.is_dir():
        raise InputError(f"cannot write skills into {root}: it is not a folder", field="target")
    if not root.parent.is_dir():
        raise InputError(f"cannot write skills into {root}: {root.parent} does not exist", field="target")
    live = {lesson.id: lesson for lesson in lessons}
    procedures = [lesson for lesson in live.values() if lesson.kind == "procedure"]
    names = names_of(procedures)
    root.mkdir(exist_ok=True)
    before = read_manifest(root)
    for lesson in procedures:
        folder = root / names[lesson.id]
        skill = skill_of(lesson, folder.name, live)
        old = _existing(folder)
        if old is not None and old.lesson_id == lesson.id:  # keys a person added to the file stay
            skill.extra = {**old.extra, **skill.extra}
            skill.metadata = {**old.own_metadata, **skill.metadata}
        text = skill.text()
        path = folder / SKILL_FILE
        if _read_text(path) != text:
            folder.mkdir(exist_ok=True)
            write_chunks([text], path)
    now = {names[lesson.id]: lesson.id for lesson in procedures}
    for name, lesson_id in before.items():
        if name not in now:
            _remove(root / name, lesson_id)
    manifest = json.dumps({"skills": dict(sorted(now.items()))}, indent=2) + "\n"
    if _read_text(root / MANIFEST) != manifest:
        write_chunks([manifest], root / MANIFEST)
    return len(procedures)


def read_manifest(root: Path) -> dict[str, str]:
    """What the last export into ``root`` wrote (name → lesson id); empty when none (or unreadable)."""
    try:
        data = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        skills = data["skills"]
        return {str(k): str(v) for k, v in skills.items() if NAME_RE.match(str(k))}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _existing(folder: Path) -> Skill | None:
    try:
        return read_skill(folder)
    except (OSError, InputError):
        return None


def _remove(folder: Path, lesson_id: str) -> None:
    """Remove the ``SKILL.md`` an export wrote for ``lesson_id`` (and the folder, if then empty)."""
    old = _existing(folder)
    if old is None or old.lesson_id != lesson_id:
        return
    (folder / SKILL_FILE).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


# --------------------------------------------------------------------------- import


def _sections(body: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for line in body.splitlines():
        if line.startswith("## "):
            current = line[3:].strip().lower()
            sections[current] = []
        else:
            sections[current].append(line)
    return sections


def lesson_fields(skill: Skill) -> dict[str, Any]:
    """The procedure a skill describes: task (its title), when to use, steps; SkillError without steps."""
    sections = _sections(skill.body)
    title = next((line[2:].strip() for line in sections[""] if line.startswith("# ")), "") or skill.name
    steps_lines = sections.get("steps") or [line for lines in sections.values() for line in lines]
    steps = [m.group(1) for line in steps_lines if (m := _STEP.match(line))][:MAX_STEPS]
    if not steps:
        raise SkillError(f"skill {skill.name} has no steps: give a '## Steps' section with numbered steps")
    when = "\n".join(sections.get("when to use", [])).strip() or None
    return {"task": title, "steps": steps, "when": when}


def _edited(skill: Skill, base: Lesson) -> dict[str, Any]:
    """The fields of ``base`` as ``skill`` has them."""
    found = lesson_fields(skill)
    result = str(base.metadata.get("result") or "imported")
    metadata = {
        **base.metadata,
        "task": found["task"],
        "steps": found["steps"],
        "skill_name": skill.name,
        "skill_frontmatter": skill.extra,
        "skill_metadata": skill.own_metadata,
    }
    metadata.pop("skill_description", None)
    content = procedure_text(found["task"], base.task_type, result, found["steps"])
    draft = base.model_copy(update={"content": content, "metadata": metadata, "situation": None})
    if found["when"] and found["when"] != _when(draft):
        draft = draft.model_copy(update={"situation": found["when"]})
    if " ".join(skill.description.split()) != description_of(draft):
        metadata["skill_description"] = skill.description
    return {"content": content, "metadata": metadata, "situation": draft.situation}


def import_skills(bank: LessonBank, directory: str | os.PathLike[str]) -> Staged:
    """Stage the changes a person made to the skills in ``directory`` as one pending proposal (see
    the module docstring); nothing is written to the lessons."""
    from lessonbank.integrations.staging import Staged, archive_removed, candidate, edit, live_lesson, stage

    root = Path(directory)
    if not root.is_dir():
        raise InputError(f"no such folder: {root}", field="path")
    staged = Staged()
    operations: list[Operation] = []
    touched: list[Lesson] = []
    seen: set[str] = set()
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if not (folder / SKILL_FILE).is_file():
            continue
        try:
            skill = read_skill(folder)
            lesson = live_lesson(bank, skill.lesson_id, "procedure")
            if skill.lesson_id:
                seen.add(skill.lesson_id)
            if lesson is not None and skill.metadata.get(HASH_KEY) == skill.content_hash():
                staged.unchanged += 1
            elif lesson is not None:
                operations.append(
                    edit(lesson, f"edited in {folder.name}/{SKILL_FILE}", **_edited(skill, lesson))
                )
                touched.append(lesson)
            else:
                new = Lesson(namespace=bank.namespace, kind="procedure", content="-", source="manual")
                new = new.model_copy(update={**_edited(skill, new), "tags": ["skill"]})
                operations.append(candidate(new, f"new skill {folder.name}/{SKILL_FILE}"))
        except (OSError, InputError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            log.warning("skill %s skipped: %s", folder, why)
            staged.skipped.append((str(folder), why))
    gone = [
        (lesson_id, f"skill {name} was deleted from {root}")
        for name, lesson_id in read_manifest(root).items()
        if lesson_id not in seen and not (root / name / SKILL_FILE).exists()
    ]
    archives, archived = archive_removed(bank, gone, "procedure")
    staged.proposal = stage(bank, [*operations, *archives], [*touched, *archived], source="skills", path=root)
    return staged
