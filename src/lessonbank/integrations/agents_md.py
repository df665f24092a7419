"""The live rules as one marked section of ``AGENTS.md`` / ``CLAUDE.md``, and back.

Export (``lessonbank export --format agents-md FILE``, ``bank.export_to(FILE, "agents-md")``)
writes the namespace's live rules (kind ``principle``, active, neither superseded nor expired),
strategic first, then tactical, as one section between :data:`BEGIN` and :data:`END`: one bullet per
rule, its id and a hash of the bullet's text in a comment at its end. A new file is created; in a
file that has the section only the section is replaced; a file without it gets it appended.
Nothing outside the markers changes, and exporting twice gives the same bytes (a file already
right is not written at all). A file with a broken section (a marker missing or repeated) is
refused, unchanged.

Import (``lessonbank import FILE.md``) reads only the section and stages one pending proposal
(:mod:`.staging`): a bullet whose text no longer matches its hash is an edit, a bullet without an
id a candidate rule, and a rule the section listed (its ``exported`` line) whose bullet is gone an
archive.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lessonbank.errors import InputError
from lessonbank.integrations.rules_section import BEGIN, END, bullet_hash, live_rules, section
from lessonbank.models import Lesson

if TYPE_CHECKING:
    from lessonbank.bank.sync import LessonBank
    from lessonbank.integrations.staging import Staged
    from lessonbank.proposals import Operation

log = logging.getLogger("lessonbank.agents_md")

MAX_FILE_BYTES = 1 << 20  # an AGENTS.md past this is refused unread
MAX_RULE_CHARS = 2_000
_EXPORTED = re.compile(r"^<!-- exported:((?:\s+\S+)*)\s*-->$")
_BULLET = re.compile(r"^[-*]\s+(?P<text>.*?)\s*(?:<!--\s*(?P<id>\S+)\s+(?P<hash>[0-9a-f]{8,64})\s*-->)?\s*$")


def _bounds(text: str, where: str) -> tuple[int, int] | None:
    """Where the section starts and ends in ``text`` (the end after :data:`END`); None without one."""
    begins, ends = text.count(BEGIN), text.count(END)
    if begins == ends == 0:
        return None
    start, stop = text.find(BEGIN), text.find(END)
    if begins != 1 or ends != 1 or stop < start:
        raise InputError(
            f"{where} has a broken lessonbank section: it needs one {BEGIN!r} line and, after it, one "
            f"{END!r} line; fix or remove the markers",
            field="path",
        )
    return start, stop + len(END)


def merged(existing: str | None, new_section: str, where: str = "the file") -> str:
    """``existing`` with its section replaced by ``new_section`` (appended when it has none)."""
    if existing is None or not existing.strip():
        return new_section + "\n"
    bounds = _bounds(existing, where)
    if bounds is None:
        return existing + ("" if existing.endswith("\n") else "\n") + "\n" + new_section + "\n"
    return existing[: bounds[0]] + new_section + existing[bounds[1] :]


def _read(path: Path) -> str | None:
    try:
        with open(path, "rb") as file:
            raw = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(raw) > MAX_FILE_BYTES:
        raise InputError(f"{path} is over {MAX_FILE_BYTES:,} bytes; it is not an AGENTS.md", field="path")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 (byte {exc.start})", field="path") from None


def write_agents_md(lessons: Iterable[Lesson], target: str | os.PathLike[str]) -> int:
    """Write the live rules among ``lessons`` into the file ``target`` (see the module docstring);
    returns how many."""
    from lessonbank.services.transfer import write_chunks

    path = Path(target)
    if path.is_dir():
        raise InputError(
            f"cannot write {path}: it is a folder; give the AGENTS.md or CLAUDE.md file", field="target"
        )
    rules = live_rules(lessons)
    existing = _read(path)
    text = merged(existing, section(rules), str(path))
    if text != existing:
        write_chunks([text], path, end_with_newline=False)
    return len(rules)


# --------------------------------------------------------------------------- import


@dataclass
class Bullet:
    text: str
    lesson_id: str | None
    hash: str | None


def read_section(text: str, where: str) -> tuple[list[Bullet], list[str]]:
    """The bullets of the section in ``text`` and the ids it was exported with; InputError without one."""
    bounds = _bounds(text.replace("\r\n", "\n"), where)
    if bounds is None:
        raise InputError(
            f"{where} has no lessonbank section ({BEGIN} … {END}); export into it first", field="path"
        )
    inside = text.replace("\r\n", "\n")[bounds[0] + len(BEGIN) : bounds[1] - len(END)]
    bullets: list[Bullet] = []
    exported: list[str] = []
    for line in inside.splitlines():
        line = line.strip()
        if found := _EXPORTED.match(line):
            exported = found.group(1).split()
        elif (found := _BULLET.match(line)) and found.group("text"):
            bullets.append(Bullet(found.group("text"), found.group("id"), found.group("hash")))
    return bullets, exported


def import_agents_md(bank: LessonBank, file: str | os.PathLike[str]) -> Staged:
    """Stage the changes a person made to the rules section of ``file`` as one pending proposal."""
    from lessonbank.integrations.staging import Staged, archive_removed, candidate, edit, live_lesson, stage

    path = Path(file)
    text = _read(path)
    if text is None:
        raise InputError(f"no such file: {path}", field="path")
    bullets, exported = read_section(text, str(path))
    staged = Staged()
    operations: list[Operation] = []
    touched: list[Lesson] = []
    seen: set[str] = set()
    for number, bullet in enumerate(bullets, 1):
        if len(bullet.text) > MAX_RULE_CHARS:
            why = f"bullet {number} is over {MAX_RULE_CHARS:,} chars; a rule is one short line"
            log.warning("%s: %s", path, why)
            staged.skipped.append((f"{path}: bullet {number}", why))
            continue
        rule = live_lesson(bank, bullet.lesson_id, "principle")
        if bullet.lesson_id:
            seen.add(bullet.lesson_id)
        if rule is not None and bullet.hash == bullet_hash(bullet.text):
            staged.unchanged += 1
        elif rule is not None:
            metadata = {k: v for k, v in rule.metadata.items() if k not in ("condition", "action", "reason")}
            operations.append(edit(rule, f"edited in {path.name}", content=bullet.text, metadata=metadata))
            touched.append(rule)
        else:
            new = Lesson(
                namespace=bank.namespace,
                kind="principle",
                content=bullet.text,
                tags=["rule", "tactical"],
                metadata={"stream": "tactical"},
                source="manual",
            )
            operations.append(candidate(new, f"new rule in {path.name}"))
    gone = [(i, f"its bullet was removed from {path.name}") for i in exported if i not in seen]
    archives, archived = archive_removed(bank, gone, "principle")
    staged.proposal = stage(
        bank, [*operations, *archives], [*touched, *archived], source="agents-md", path=path
    )
    return staged
