"""Every field of every record or call that holds text a person or a model wrote: what
:mod:`lessonbank.redact` redacts (and exports under the same names). Pure data, no code."""

from __future__ import annotations

# Every field of a record that holds text a person or a model wrote. Ids, namespaces, statuses and
# numbers are not text and stay as they are.
LESSON_TEXT_FIELDS = (
    "content",
    "situation",
    "mistake",
    "correction",
    "learned_from",
    "tags",
    "task_type",
    "agent",
    "metadata",
)
EPISODE_TEXT_FIELDS = (
    "task",
    "task_type",
    "agent",
    "goal_title",
    "error",
    "attempt",
    "output",
    "actions",
    "tags",
    "metadata",
)
REFLECTION_TEXT_FIELDS = ("raw_output", "parsed", "skip_reason")
CHECK_TEXT_FIELDS = ("tool", "stderr", "errors")
# An audit row: who and why, and the lesson before and after (a rescreen's ``before`` is the lesson
# as stored before a newer pattern redacted it). Redacted by every store as the row is written.
AUDIT_TEXT_FIELDS = ("actor", "summary", "before", "after")
# Arguments a caller gives with a change: LessonBank.archive / restore / edit / forget, the REST and
# CLI commands over them, a proposal's approve / reject / revert (lifecycle.clean_reason, check_actor).
ARCHIVE_TEXT_FIELDS = ("reason", "actor")
# A git mirror commit: author name (and the e-mail made from it) and message (Mirror.commit).
MIRROR_TEXT_FIELDS = ("author", "message")
# MCP archive_lesson: what the agent says, kept in the proposal it stages.
MCP_ARCHIVE_TEXT_FIELDS = ("reason", "agent")

# Every place caller or model text is kept, by the record or call it arrives in: the one list of
# what must go through redaction (tests/security/test_secrets_stored.py feeds each one).
TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "lesson": LESSON_TEXT_FIELDS,
    "episode": EPISODE_TEXT_FIELDS,
    "episode.verification": CHECK_TEXT_FIELDS,
    "reflection": REFLECTION_TEXT_FIELDS,
    "audit": AUDIT_TEXT_FIELDS,
    "archive": ARCHIVE_TEXT_FIELDS,
    "mirror": MIRROR_TEXT_FIELDS,
    "mcp.archive_lesson": MCP_ARCHIVE_TEXT_FIELDS,
}
