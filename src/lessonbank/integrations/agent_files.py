"""Exports to the files agents read, beside the text exports: one entry point for every format.

``skills`` (a folder of Agent Skills, :mod:`.skills`) and ``agents-md`` written to a file (the rules
section of an ``AGENTS.md``, :mod:`.agents_md`) take the live lessons only and return how many skills
or rules they wrote; every other format, and ``agents-md`` to a stream, is the text export of
:mod:`lessonbank.services.transfer` (None: every lesson is a record). The bank's ``export_to`` and
the remote client's come here, so the two write the same files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from lessonbank.models import Lesson
from lessonbank.services.transfer import AGENT_FORMATS, ExportTarget, Mark, check_format
from lessonbank.services.transfer import write_export as write_text_export


def write_export(
    marked: Iterable[tuple[Lesson, Mark]], fmt: str, namespace: str, target: ExportTarget
) -> int | None:
    """Write the export of ``marked`` lessons to ``target`` in ``fmt`` (see the module docstring)."""
    check_format(fmt)
    if fmt not in AGENT_FORMATS or not isinstance(target, str | os.PathLike):
        return write_text_export(marked, fmt, namespace, target)
    live = (lesson for lesson, mark in marked if mark is None and lesson.status == "active")
    if fmt == "skills":
        from lessonbank.integrations.skills import write_skills

        return write_skills(live, target)
    from lessonbank.integrations.agents_md import write_agents_md

    return write_agents_md(live, target)
