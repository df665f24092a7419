"""lessonbank: agents report episodes, lessonbank reflects, stores lessons and serves them back.

from lessonbank import LessonBank, Episode
bank = LessonBank()
bank.record(Episode(task="...", status="failure", error="..."))
block = bank.context("the next similar task", budget_tokens=800)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lessonbank.errors import (
    BudgetExceededError,
    ConfigError,
    ConflictError,
    CycleFailedError,
    EvaluatorError,
    InputError,
    LessonbankError,
    LLMError,
    LLMReplyTooLargeError,
    LLMTransientError,
    NotFoundError,
    OnnxBuildError,
    ParseError,
    StoreError,
)
from lessonbank.lazy_names import lazy_names

if TYPE_CHECKING:
    from lessonbank.bank import AsyncLessonBank, LessonBank
    from lessonbank.models import (
        AuditEntry,
        ContextBlock,
        Decision,
        Episode,
        Hit,
        Job,
        Lesson,
        Reflection,
        VerificationResult,
    )
    from lessonbank.remote import AsyncRemoteBank, RemoteBank
    from lessonbank.settings import Settings

# Everything but the errors loads on first use: importing the package (or a bottom module such as
# ``lessonbank.errors``) builds no pydantic model and opens no layer above it, and ``lessonbank --help``
# pays for none of it. ``from lessonbank import Episode`` works as before.
_LAZY = {
    "AsyncLessonBank": "lessonbank.bank",
    "AsyncRemoteBank": "lessonbank.remote",
    "AuditEntry": "lessonbank.models",
    "ContextBlock": "lessonbank.models",
    "Decision": "lessonbank.models",
    "Episode": "lessonbank.models",
    "Hit": "lessonbank.models",
    "Job": "lessonbank.models",
    "Lesson": "lessonbank.models",
    "LessonBank": "lessonbank.bank",
    "Reflection": "lessonbank.models",
    "RemoteBank": "lessonbank.remote",
    "Settings": "lessonbank.settings",
    "VerificationResult": "lessonbank.models",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "AsyncLessonBank",
    "AsyncRemoteBank",
    "AuditEntry",
    "BudgetExceededError",
    "ConfigError",
    "ConflictError",
    "ContextBlock",
    "CycleFailedError",
    "Decision",
    "Episode",
    "EvaluatorError",
    "Hit",
    "InputError",
    "Job",
    "LLMError",
    "LLMReplyTooLargeError",
    "LLMTransientError",
    "Lesson",
    "LessonBank",
    "LessonbankError",
    "NotFoundError",
    "OnnxBuildError",
    "ParseError",
    "Reflection",
    "RemoteBank",
    "Settings",
    "StoreError",
    "VerificationResult",
]

__version__ = "0.1.0"
