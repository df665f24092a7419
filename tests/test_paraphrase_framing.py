"""Two documentations of one check open with different frames ("Used when ..." / "Checks for ..."): the
frame is not read as the lesson's words, and a report's negation is no evidence of opposite advice."""

from __future__ import annotations

from lessonbank.services.consolidation.framing import reports, unframed
from lessonbank.services.consolidation.paraphrase import Weights, opposed, relation, terms
from lessonbank.text import stem

OTHERS = [
    "Run the linter before pushing.",
    "Pin numpy to 1.26 for the ARM builds.",
    "Checks for unused imports.",
    "Used when an import is unused.",
]


def test_unframed_drops_the_opening_frame_only() -> None:
    assert unframed("Used when a logging format string is given too few arguments.") == (
        "a logging format string is given too few arguments."
    )
    assert unframed("Checks for the use of wildcard imports.") == "wildcard imports."
    assert unframed("This rule flags uses of `eval`.") == "`eval`."
    assert unframed("According to [PEP 8], operators should be surrounded by one space.") == (
        "operators should be surrounded by one space."
    )
    assert (
        unframed("[PEP 257] recommends that the first line be imperative.") == "the first line be imperative."
    )
    assert unframed("Use pathlib instead of os.path.") == "Use pathlib instead of os.path."
    assert unframed("Checks for") == "Checks for"  # nothing left: the text is kept


def test_reports_are_told_from_advice() -> None:
    assert reports("Checks for f-strings that do not contain any placeholder expressions.")
    assert reports("Emitted when a name is both nonlocal and global.")
    assert reports("According to [PEP 8], checks that operators are surrounded by one space.")
    assert not reports("Do not retry flaky network calls.")
    assert not reports("Use the Edit tool for large files.")


def test_the_frame_is_not_a_term() -> None:
    used = terms("Used when a function or method has too many local variables.")
    checks = terms("Checks for functions that include too many local variables.")
    assert stem("used") not in used and stem("checks") not in checks
    assert stem("use") in terms("Use pathlib instead of os.path.")  # advice keeps its verb


def test_a_report_negating_its_problem_is_no_opposition() -> None:
    message = "f-string is missing placeholders"
    report = "Checks for f-strings that do not contain any placeholder expressions."
    assert not opposed(message, report)
    weights = Weights.of([message, report, *OTHERS])
    assert relation(message, report, weights, paraphrase=0.5) == "paraphrase"


def test_advice_negated_is_still_a_contradiction() -> None:
    a, b = "Retry flaky network calls.", "Do not retry flaky network calls."
    assert opposed(a, b)
    assert relation(a, b, Weights.of([a, b, *OTHERS])) == "contradiction"
