"""The whitespace-separated words of a lowercased text, kept for the few texts asked for last.

Redaction (:mod:`lessonbank.redact`) and the injection screen (:mod:`lessonbank.injection`) each decide
which of their patterns may match from a text's lowercased words, one right after the other on the same
lesson texts: the second takes the first's split instead of splitting the text again (a 1 KB lesson's
split is a fifth of either's time). Keyed by the text's value, so a text asked for again is the same
text; a handful of entries, so it holds no memory to speak of. The lists handed out are never changed.
"""

from __future__ import annotations

_KEPT: dict[str, list[str]] = {}
_KEPT_MAX = 8


def lowered_words(lowered: str) -> list[str]:
    """``lowered.split()``, the same list as the last callers got for this text (read it, never change it)."""
    words = _KEPT.get(lowered)
    if words is None:
        words = lowered.split()
        if len(_KEPT) >= _KEPT_MAX:
            _KEPT.clear()
        _KEPT[lowered] = words
    return words
