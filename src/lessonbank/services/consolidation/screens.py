"""The two screens every text a consolidation cycle writes passes, the same as any other lesson's:
secrets redacted (:mod:`lessonbank.redact`), and text that reads as instructions to the model
(:mod:`lessonbank.injection`) kept out of every prompt.

A cycle screens its proposal when it makes it (:func:`screened`), so the stored row, its Markdown,
the dashboard, the dream log and the reflection log never hold a secret, and the person sees what
the screen found before deciding; an approval screens it again after a person's edits. The phases
screen their operations and core memory as they parse them (:func:`screened_operation`,
:func:`screened_document`), so the later phases' prompts read them redacted. Every function is
idempotent: a text screened twice is the text screened once.

- A lesson an operation adds (extract, merge, pattern) passes
  :func:`lessonbank.services.writing.guarded`, the one gate of every lesson written: redacted, and
  ``quarantined`` with ``metadata["quarantine_reason"]`` when it reads as instructions. The
  operation's note says ``quarantined on approval: <reason>``; once approved the lesson is stored
  quarantined, for a person to review, never recalled.
- An evolution entry that reads as instructions is dropped (its note says why): the evolution log
  is read by the next cycle's model, and an instruction teaches it nothing.
- The core memory (injected into every prompt) and phase 5's reflection (the reflection log, read
  by the next cycle) lose each line that reads as instructions; when what is left still does as a
  whole (an instruction split over lines), the core memory rewrite is withheld, the reflection
  replaced by a line saying so. Questions for the person and the key insight are withheld the same
  way. Each withheld text is listed in ``metadata["withheld"]`` (where, reason, the redacted text
  cut to :data:`WITHHELD_CHARS`), shown in the proposal.
- Every other text (reasons, notes, the summary, the ids of unknown lessons, metadata) is redacted.

Pure functions over records: no store, no LLM.
"""

from __future__ import annotations

import logging
from typing import Any

from lessonbank.injection import injection_reason
from lessonbank.proposals import Operation, Proposal
from lessonbank.redact import redact, redact_value
from lessonbank.services.writing import guarded

log = logging.getLogger("lessonbank.consolidation")

QUARANTINED = "quarantined on approval: "
INSTRUCTIONS = "reads as instructions to the model: "
WITHHELD_CHARS = 200
WITHHELD_REFLECTION = "(the reflection was withheld: it reads as instructions to the model)"

Withheld = list[dict[str, str]]


def screened_operation(op: Operation) -> Operation:
    """``op`` with its texts redacted; its new lesson through the lessons' gate (quarantined when it
    reads as instructions, the note saying so); an evolution entry that reads as instructions dropped."""
    update: dict[str, Any] = {"reason": redact(op.reason)}
    if op.text is not None:
        update["text"] = redact(op.text)
    if op.note is not None:
        update["note"] = redact(op.note)
    if op.status == "dropped":  # its ids name no stored lesson, so they may be any model text
        update["lesson_ids"] = [redact(i) for i in op.lesson_ids]
    if op.lesson is not None:
        lesson = guarded(op.lesson)
        update["lesson"] = lesson
        reason = lesson.metadata.get("quarantine_reason") if lesson.status == "quarantined" else None
        if reason is not None and op.status != "dropped":
            update["note"] = _with_mark(update.get("note"), f"{QUARANTINED}{reason}")
    if op.kind == "evolve" and op.status != "dropped":
        reason = injection_reason(update["text"] or "")
        if reason is not None:
            log.warning(
                "evolution entry of operation %s dropped: it reads as instructions (%s)", op.id, reason
            )
            update.update(status="dropped", note=f"{INSTRUCTIONS}{reason}")
    return op.model_copy(update=update)


def screened_document(text: str, where: str, withheld: Withheld) -> str | None:
    """``text`` redacted, less each line that reads as instructions (listed in ``withheld``); None
    when what is left still reads as instructions as a whole."""
    kept = []
    for line in redact(text).splitlines():
        reason = injection_reason(line)
        if reason is None:
            kept.append(line)
        else:
            _withhold(withheld, where, reason, line)
    cleaned = "\n".join(kept) + ("\n" if text.endswith("\n") else "")
    reason = injection_reason(cleaned)
    if reason is not None:
        _withhold(withheld, where, reason, cleaned)
        return None
    return cleaned


def screened(proposal: Proposal) -> Proposal:
    """``proposal`` with every text it would write or show screened (see the module docstring)."""
    withheld: Withheld = list(proposal.metadata.get("withheld", []))
    metadata = redact_value({k: v for k, v in proposal.metadata.items() if k != "withheld"})
    core = proposal.core_memory
    if core is not None:
        core = screened_document(core, "core memory", withheld)
    reflection = metadata.get("reflection")
    if isinstance(reflection, str) and reflection:
        metadata["reflection"] = screened_document(reflection, "reflection", withheld) or WITHHELD_REFLECTION
    insight = metadata.get("insight")
    if isinstance(insight, str) and insight and not _passes(insight, "key insight", withheld):
        metadata["insight"] = ""
    questions = [q for q in map(redact, proposal.questions) if _passes(q, "question", withheld)]
    if withheld:
        metadata["withheld"] = withheld
    return proposal.model_copy(
        update={
            "operations": [screened_operation(op) for op in proposal.operations],
            "core_memory": core,
            "questions": questions,
            "summary": redact(proposal.summary),
            "decision_reason": redact(proposal.decision_reason) if proposal.decision_reason else None,
            "metadata": metadata,
        }
    )


def _passes(text: str, where: str, withheld: Withheld) -> bool:
    reason = injection_reason(text)
    if reason is not None:
        _withhold(withheld, where, reason, text)
    return reason is None


def _withhold(withheld: Withheld, where: str, reason: str, text: str) -> None:
    log.warning("%s: a text withheld, it reads as instructions to the model (%s)", where, reason)
    entry = {"where": where, "reason": reason, "text": text.strip()[:WITHHELD_CHARS]}
    if entry not in withheld:
        withheld.append(entry)


def _with_mark(note: str | None, mark: str) -> str:
    """``note`` ending with ``mark`` (once: a note screened twice is marked once)."""
    kept = [part for part in (note or "").split("; ") if part and not part.startswith(QUARANTINED)]
    return "; ".join([*kept, mark])
