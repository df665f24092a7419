"""Approve with changes (seed 002's "approve with changes"): a person rewrites what a proposal would
write before it is applied.

What can be edited is what an operation writes: the text of the lesson an EXTRACT, MERGE or PATTERN
adds, the entry an EVOLVE adds, and the core memory rewrite (id :data:`CORE_ID`). The CLI offers
them as one text file (:func:`edit_file`), opened in ``$EDITOR`` or read from a file; each block
starts with a ``=== <id> <kind>`` line, and :func:`read_edit_file` reads it back: a changed block is
an edit, a deleted block leaves that operation out (as with ``--only``). A FLAG's block holds the
person's decision (:mod:`.flags`: ``decision: keep-a | keep-b | both | dismiss``). The edited proposal keeps
what the cycle proposed in ``metadata["edits"]`` (by id), and each edited operation's note says
who changed it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from lessonbank.errors import InputError, ParseError
from lessonbank.models import LESSON_MAX_CHARS, Lesson
from lessonbank.proposals import Proposal
from lessonbank.services.consolidation.documents import (
    CORE_CAP_TOKENS,
    build_core,
    core_sections,
    missing_pinned,
)
from lessonbank.services.consolidation.flags import UNDECIDED, flag_text, read_decision
from lessonbank.services.consolidation.phases import check_core
from lessonbank.text import TokenCounter, estimate_tokens

CORE_ID = "core"
EDITABLE = ("extract", "merge", "pattern", "evolve")
_HEADER = re.compile(r"^=== (\S+)(?: ([\w-]+))?\s*$")
_PINNED_LINE = re.compile(r"\[les_[\w-]+\]\s*$")
EDIT_HELP = """\
# Approve with changes: edit the text under each === line, then save and close.
# Delete a whole block (its === line too) to leave that change out; the others are applied.
# Lines starting with # are ignored. Operations that write no text (archive, connect, admit)
# are applied as proposed unless you delete their line. A flag is applied as you decide on its
# decision line; left as it is, it changes nothing.
"""


def edit_file(proposal: Proposal, *, lessons: Mapping[str, Lesson] | None = None) -> str:
    """The editable parts of ``proposal`` as one text file (see the module docstring); ``lessons``
    (by id) gives a flag's lessons their text and scope to narrow."""
    parts = [EDIT_HELP]
    for op in proposal.operations:
        if op.status == "dropped":
            continue
        if op.kind in ("extract", "merge", "pattern") and op.lesson is not None:
            parts.append(f"=== {op.id} {op.kind}\n{op.lesson.content}\n")
        elif op.kind == "evolve":
            parts.append(f"=== {op.id} evolve\n{op.text or ''}\n")
        elif op.kind == "flag":
            parts.append(f"=== {op.id} flag\n{flag_text(op, lessons)}\n")
        else:
            parts.append(f"=== {op.id} {op.kind}\n")
    if proposal.core_memory is not None:
        parts.append(f"=== {CORE_ID} core-memory\n{proposal.core_memory}")
    return "\n".join(parts).rstrip() + "\n"


def read_edit_file(text: str, proposal: Proposal) -> tuple[list[str], dict[str, str]]:
    """(the ids kept, the edits by id) of an edited :func:`edit_file`. InputError on an id the
    proposal does not offer or a block given twice."""
    offered = {op.id for op in proposal.operations if op.status != "dropped"}
    if proposal.core_memory is not None:
        offered.add(CORE_ID)
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("#") and not line.startswith("##"):
            continue
        header = _HEADER.match(line)
        if header:
            block_id = header.group(1)
            if block_id not in offered:
                raise InputError(
                    f"the edited file names {block_id!r}, which proposal {proposal.id} does not offer"
                )
            if block_id in blocks:
                raise InputError(f"the edited file has {block_id!r} twice")
            current = blocks[block_id] = []
        elif current is not None:
            current.append(line)
    edits: dict[str, str] = {}
    originals = original_texts(proposal)
    flags = {op.id: op for op in proposal.operations if op.kind == "flag"}
    for block_id, lines in blocks.items():
        body = "\n".join(lines).strip()
        if block_id in flags:
            if read_decision(body, flags[block_id])[0] is not None:
                edits[block_id] = body
        elif block_id in originals and body != originals[block_id].strip():
            edits[block_id] = body
    return [i for i in blocks], edits


def original_texts(proposal: Proposal) -> dict[str, str]:
    """What each editable part of ``proposal`` would write, by id."""
    texts: dict[str, str] = {}
    for op in proposal.operations:
        if op.status == "dropped" or op.kind not in EDITABLE:
            continue
        texts[op.id] = op.lesson.content if op.lesson is not None else (op.text or "")
    for op in proposal.operations:
        if op.kind == "flag" and op.status != "dropped":
            texts[op.id] = UNDECIDED
    if proposal.core_memory is not None:
        texts[CORE_ID] = proposal.core_memory
    return texts


def apply_edits(
    proposal: Proposal,
    edits: Mapping[str, str],
    chosen: set[str],
    actor: str,
    count: TokenCounter = estimate_tokens,
) -> Proposal:
    """``proposal`` with a person's ``edits`` in place of what the cycle wrote (only of ``chosen``
    parts); InputError on an edit of a part that writes no text, an empty text, or a core memory
    without its four sections."""
    if not edits:
        return proposal
    if not isinstance(edits, Mapping):
        raise InputError("edits must map operation ids (or 'core') to the new text", field="edits")
    originals = original_texts(proposal)
    for part_id, text in edits.items():
        if part_id not in originals:
            raise InputError(
                f"{part_id!r} is not an editable part of proposal {proposal.id}; editable: "
                f"{', '.join(sorted(originals)) or 'none'}",
                field="edits",
            )
        if not isinstance(text, str):
            raise InputError(f"the edit of {part_id} must be text, got {type(text).__name__}", field="edits")
        if not text.strip():
            raise InputError(
                f"the edit of {part_id} is empty; leave it out with --only instead", field="edits"
            )
        if part_id not in chosen:
            raise InputError(f"{part_id} is edited but not approved", field="edits")
    note = f"edited by {actor}"
    operations = []
    for op in proposal.operations:
        edited = edits.get(op.id)
        if edited is None:
            operations.append(op)
        elif op.kind == "flag":
            decision, revisions = read_decision(edited, op)
            decided = {
                "decision": decision,
                "revisions": revisions,
                "note": f"decided by {actor}: {decision}",
            }
            operations.append(op.model_copy(update=decided) if decision is not None else op)
        elif op.lesson is not None:
            if len(edited.strip()) > LESSON_MAX_CHARS:
                raise InputError(f"the edit of {op.id} is over {LESSON_MAX_CHARS} characters", field="edits")
            # New text, read afresh: the screen that quarantined the cycle's text decides on the person's.
            fields = {**op.lesson.model_dump(), "content": edited}
            if "quarantine_reason" in op.lesson.metadata:
                metadata = {k: v for k, v in op.lesson.metadata.items() if k != "quarantine_reason"}
                fields.update(status="active", metadata=metadata)
            lesson = op.lesson.model_validate(fields)
            operations.append(op.model_copy(update={"lesson": lesson, "note": note}))
        else:
            operations.append(op.model_copy(update={"text": edited.strip(), "note": note}))
    core = proposal.core_memory
    if CORE_ID in edits:
        try:
            core = check_core(edits[CORE_ID])
        except ParseError as exc:  # a person's text: their input to fix, not a model's reply
            raise InputError(
                str(exc).replace("phase core: the core memory", "the edited core memory"), field="edits"
            ) from None
        # The pinned facts the cycle put in Critical Facts (one line each, ending in the lesson's id)
        # stay whatever the edit says: Critical Facts is the last section, so they are appended there.
        pinned = [line for line in (proposal.core_memory or "").splitlines() if _PINNED_LINE.search(line)]
        missing = [line for line in pinned if line not in core]
        if missing:
            core = core.rstrip() + "\n" + "\n".join(missing) + "\n"
        if count(core) > CORE_CAP_TOKENS:
            raise InputError(
                f"the edited core memory is over its cap of {CORE_CAP_TOKENS} tokens", field="edits"
            )
    changed = {part_id: originals[part_id] for part_id in edits}
    return proposal.model_copy(
        update={
            "operations": operations,
            "core_memory": core,
            "metadata": {**proposal.metadata, "edits": changed, "edited_by": actor},
        }
    )


def keep_pinned(
    proposal: Proposal, pinned: Sequence[Lesson], count: TokenCounter = estimate_tokens
) -> Proposal:
    """``proposal`` whose core memory rewrite (as the cycle wrote it or a person edited it) holds
    every ``pinned`` lesson in Critical Facts: one missing (the model wrote it without its marker and
    an edit dropped the line, or it was pinned since) is added back. InputError, saying which, when
    the core memory is over its cap with them."""
    core = proposal.core_memory
    missing = missing_pinned(core, pinned) if core is not None else []
    if core is None or not missing:
        return proposal
    sections = core_sections(core)
    sections["Critical Facts"] = "\n".join([sections.get("Critical Facts", ""), *missing]).strip()
    kept = build_core(sections)
    if count(kept) > CORE_CAP_TOKENS:
        raise InputError(
            f"the core memory must keep the pinned fact(s) {', '.join(_ids(missing))} "
            f"and is then over its cap of {CORE_CAP_TOKENS} tokens; shorten another section",
            field="edits",
        )
    return proposal.model_copy(update={"core_memory": kept})


def _ids(lines: Sequence[str]) -> list[str]:
    return [line.rsplit("[", 1)[-1].rstrip("]") for line in lines]
