"""How a lesson is framed, apart from what it says: two documentations of one check open differently
("*Used when* an import alias is the same as the package" / "*Checks for* import aliases that are the
same as the package"), and the opening frame tells nothing about the lesson. Pure and deterministic.

- :func:`unframed`: the text without its opening frame ("Checks for", "Checks that", "This rule flags",
  "Used when", "Emitted when", "According to [PEP 8],", "[PEP 257] recommends that", "the use of"):
  what :func:`.paraphrase.terms` reads, so a frame's words ("use", "check") count neither for nor
  against a pair.
- :func:`reports`: whether the text reports a problem a check finds ("Checks for f-strings that do
  not contain any placeholder", "Used when a ``__str__`` method returns something which is not a
  string") rather than giving advice. A report's negation describes the problem, not the advice, so
  it is no evidence of opposition (:func:`.paraphrase.opposed`): "f-string is missing placeholders"
  and "Checks for f-strings that do not contain any placeholder expressions" say one thing.

The frames were chosen on the tuning half of ``tests/data/lesson_pairs.jsonl`` (``bench/consolidation_pairs.py``).
"""

from __future__ import annotations

import re
from functools import lru_cache

_USE_OF = r"(?:(?:the\s+)?(?:use|uses|usage)\s+of\s+)?"
# Frames that open a report of what a check finds.
_REPORT = re.compile(
    r"^\s*(?:"
    rf"(?:this\s+rule\s+)?checks?\s+(?:for|that|whether|if)\s+{_USE_OF}"
    rf"|(?:this\s+rule|it)\s+(?:checks|flags|detects|finds|reports)\s+{_USE_OF}"
    r"|(?:used|emitted|raised|reported|triggered)\s+when\s+"
    r")",
    re.I,
)
# Frames that cite a source before the advice.
_CITATION = re.compile(
    r"^\s*(?:according\s+to\s+\[?pep\s*\d+\]?\s*,\s*|\[?pep\s*\d+\]?\s+recommends\s+(?:that\s+)?)", re.I
)


@lru_cache(maxsize=65536)
def unframed(text: str) -> str:
    """The text without its opening frames (a citation, then a report's opening; the module docstring)."""
    rest = _CITATION.sub("", text, count=1)
    rest = _REPORT.sub("", rest, count=1)
    return rest if rest.strip() else text


@lru_cache(maxsize=65536)
def reports(text: str) -> bool:
    """Whether the text opens as the report of a check ("Checks for ...", "Used when ...")."""
    return bool(_REPORT.match(_CITATION.sub("", text, count=1)))
