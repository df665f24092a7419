"""lessonbank: agents report episodes, lessonbank reflects, stores lessons and serves them back.

from lessonbank import LessonBank, Episode
bank = LessonBank()
bank.record(Episode(task="...", status="failure", error="..."))
block = bank.context("the next similar task", budget_tokens=800)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
from lessonbank.settings import Settings

if TYPE_CHECKING:
    from lessonbank.bank import AsyncLessonBank, LessonBank
    from lessonbank.remote import AsyncRemoteBank, RemoteBank

# The facades load on first use, so importing a bottom module (``lessonbank.errors``,
# ``lessonbank.models``) does not open the whole stack, and the package root imports no layer above it.
_FACADES = {
    "AsyncLessonBank": "lessonbank.bank",
    "AsyncRemoteBank": "lessonbank.remote",
    "LessonBank": "lessonbank.bank",
    "RemoteBank": "lessonbank.remote",
}


def __getattr__(name: str) -> Any:
    if name in _FACADES:
        value = getattr(importlib.import_module(_FACADES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'lessonbank' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_FACADES})


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
